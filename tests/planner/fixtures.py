"""Hand-built inputs for the planner tests: a memory estimator whose arithmetic is written out,
GPU specs from shared/data/gpu-specs/gpu_specs.csv, and offer builders.

The toy estimator (per GPU, bytes):

* training: weights ``2 P / (t p)``, gradients ``2 P / (t p)``, AdamW state ``12 P / (t p)``
  (fp32 master + two moments); ZeRO-1 divides the optimizer state by ``d``, ZeRO-2 also the
  gradients, ZeRO-3 / FSDP also the weights; activations ``2 GiB / t``; overhead 1 GiB;
* inference: weights ``2 P / (t p)``; KV cache ``share x context x kv_per_token / (t p)``
  with ``kv_per_token = 2 x layers x kv_heads x head_dim x 2`` and ``share =
  ceil(concurrency / d)``, one replica's share of the deployment's sequences; overhead 1 GiB;
  with a
  capacity, a vLLM engine reserves ``0.9 x capacity`` and the KV pool is the reservation
  minus weights and overhead.
"""

from __future__ import annotations

from typing import Any

from gpu_advisor.core.architecture import Architecture, ParameterCounts
from gpu_advisor.core.gpus import GpuSpec
from gpu_advisor.core.offers import Network, Offer, ProviderInfo
from gpu_advisor.core.results import MemoryBreakdown, ParallelPlan
from gpu_advisor.core.spec import InferenceWorkload, TrainingWorkload, Workload

GIB = 2**30
MIB = 2**20
OVERHEAD_BYTES = 1 * GIB
TRAINING_ACTIVATION_BYTES = 2 * GIB


def kv_bytes_per_token(arch: Architecture) -> int:
    return 2 * arch.num_layers * arch.num_kv_heads * arch.head_dim * 2


def toy_estimate(
    arch: Architecture,
    workload: Workload,
    plan: ParallelPlan,
    *,
    capacity_bytes: int | None = None,
) -> MemoryBreakdown:
    """The estimator described in the module docstring."""
    params = arch.parameters.total
    mp = plan.tensor_parallel * plan.pipeline_parallel
    d = plan.data_parallel
    gradients = optimizer = activations = kv = 0
    weights = 2 * params // mp
    match workload:
        case TrainingWorkload():
            gradients = 2 * params // mp
            optimizer = 12 * params // mp
            if plan.sharding in ("zero1", "zero2", "zero3", "fsdp"):
                optimizer //= d
            if plan.sharding in ("zero2", "zero3", "fsdp"):
                gradients //= d
            if plan.sharding in ("zero3", "fsdp"):
                weights //= d
            activations = TRAINING_ACTIVATION_BYTES // plan.tensor_parallel
        case InferenceWorkload():
            share = -(-workload.concurrency // d)
            kv = share * workload.context_length * kv_bytes_per_token(arch) // mp
    total = weights + gradients + optimizer + activations + kv + OVERHEAD_BYTES
    reserved = pool = None
    if capacity_bytes and isinstance(workload, InferenceWorkload) and workload.engine == "vllm":
        reserved = int(workload.gpu_memory_utilization * capacity_bytes)
        pool = reserved - weights - OVERHEAD_BYTES
    return MemoryBreakdown(
        weights_bytes=weights,
        gradients_bytes=gradients,
        optimizer_bytes=optimizer,
        activations_bytes=activations,
        kv_cache_bytes=kv,
        overhead_bytes=OVERHEAD_BYTES,
        total_bytes=total,
        capacity_bytes=capacity_bytes or 0,
        headroom_fraction=1 - total / capacity_bytes if capacity_bytes else None,
        engine_reserved_bytes=reserved,
        kv_pool_bytes=pool,
    )


def make_arch(
    params: int,
    *,
    layers: int = 32,
    hidden: int = 4096,
    heads: int = 32,
    kv_heads: int = 8,
    head_dim: int = 128,
    vocab: int = 32_000,
    experts: int = 0,
    experts_per_token: int = 0,
    routed_expert: int = 0,
    active: int | None = None,
) -> Architecture:
    """A decoder whose parameter total is ``params`` (untied embeddings of vocab x hidden)."""
    embedding = vocab * hidden
    return Architecture(
        name="toy",
        family="llama",
        num_layers=layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=4 * hidden,
        gated_mlp=True,
        vocab_size=vocab,
        tie_word_embeddings=False,
        num_experts=experts,
        num_experts_per_token=experts_per_token,
        parameters=ParameterCounts(
            total=params,
            embedding=embedding,
            lm_head=embedding,
            linear=params - 2 * embedding,
            routed_expert=routed_expert,
            other=0,
            active=params if active is None else active,
        ),
    )


# Rows of shared/data/gpu-specs/gpu_specs.csv (memory_exposed: observed_total_mib where the
# table has one; AWS reports L4 as 22,888 MiB per the skypilot-catalog README).
GPUS: dict[str, GpuSpec] = {
    g.id: g
    for g in (
        GpuSpec(
            id="H100-SXM-80GB",
            name="H100 SXM5 80GB",
            vendor="nvidia",
            architecture="hopper",
            form_factor="sxm",
            memory_bytes=80 * GIB,
            memory_exposed_bytes=81_559 * MIB,
            memory_bandwidth_bytes_per_s=3_350 * 10**9,
            bf16_dense_tflops=989.5,
            fp16_dense_tflops=989.5,
            fp8_dense_tflops=1979.0,
            fp32_tflops=67.0,
            int8_dense_tops=1979.0,
            nvlink_bytes_per_s=900 * 10**9,
            compute_capability="9.0",
        ),
        GpuSpec(
            id="A100-SXM-80GB",
            name="A100 SXM4 80GB",
            vendor="nvidia",
            architecture="ampere",
            form_factor="sxm",
            memory_bytes=80 * GIB,
            memory_exposed_bytes=81_920 * MIB,
            memory_bandwidth_bytes_per_s=2_039 * 10**9,
            bf16_dense_tflops=312.0,
            fp16_dense_tflops=312.0,
            fp32_tflops=19.5,
            int8_dense_tops=624.0,
            nvlink_bytes_per_s=600 * 10**9,
            compute_capability="8.0",
        ),
        GpuSpec(
            id="A100-PCIE-40GB",
            name="A100 PCIe 40GB",
            vendor="nvidia",
            architecture="ampere",
            form_factor="pcie",
            memory_bytes=40 * GIB,
            memory_exposed_bytes=40_960 * MIB,
            memory_bandwidth_bytes_per_s=1_555 * 10**9,
            bf16_dense_tflops=312.0,
            fp16_dense_tflops=312.0,
            fp32_tflops=19.5,
            nvlink_bytes_per_s=600 * 10**9,
            compute_capability="8.0",
        ),
        GpuSpec(
            id="L40S-48GB",
            name="L40S",
            vendor="nvidia",
            architecture="ada",
            form_factor="pcie",
            memory_bytes=48 * GIB,
            memory_exposed_bytes=46_068 * MIB,
            memory_bandwidth_bytes_per_s=864 * 10**9,
            bf16_dense_tflops=362.05,
            fp16_dense_tflops=362.05,
            fp8_dense_tflops=733.0,
            compute_capability="8.9",
        ),
        GpuSpec(
            id="L4-24GB",
            name="L4",
            vendor="nvidia",
            architecture="ada",
            form_factor="pcie",
            memory_bytes=24 * GIB,
            memory_exposed_bytes=22_888 * MIB,
            memory_bandwidth_bytes_per_s=300 * 10**9,
            bf16_dense_tflops=121.0,
            fp16_dense_tflops=121.0,
            fp8_dense_tflops=242.5,
            compute_capability="8.9",
        ),
        GpuSpec(
            id="T4-16GB",
            name="T4",
            vendor="nvidia",
            architecture="turing",
            form_factor="pcie",
            memory_bytes=16 * GIB,
            memory_exposed_bytes=15_360 * MIB,
            memory_bandwidth_bytes_per_s=320 * 10**9,
            fp16_dense_tflops=65.0,
            int8_dense_tops=130.0,
            compute_capability="7.5",
        ),
        GpuSpec(
            id="RTXA6000-48GB",
            name="RTX A6000",
            vendor="nvidia",
            architecture="ampere",
            form_factor="pcie",
            memory_bytes=48 * GIB,
            memory_exposed_bytes=49_140 * MIB,
            memory_bandwidth_bytes_per_s=768 * 10**9,
            bf16_dense_tflops=154.8,
            fp16_dense_tflops=154.8,
            nvlink_bytes_per_s=int(112.5 * 10**9),
            compute_capability="8.6",
        ),
    )
}

INFINIBAND = Network(fabric="infiniband", gbit_per_s=3200.0)


def make_offer(
    gpu: str = "H100-SXM-80GB",
    gpu_count: int = 8,
    *,
    price: float = 10.0,
    spot: float | None = None,
    provider: str = "acme",
    instance_type: str | None = None,
    region: str = "us-east-1",
    interconnect: str = "nvswitch",
    network: Network | None = None,
    increment: int = 1,
    minimum: int = 0,
    vcpus: float | None = None,
    exposed: int | None = None,
) -> Offer:
    spec = GPUS.get(gpu)
    memory = spec.memory_bytes if spec else 80 * GIB
    extra: dict[str, Any] = {}
    return Offer(
        provider=provider,
        instance_type=instance_type or f"{gpu.lower()}-x{gpu_count}",
        region=region,
        gpu=gpu,
        gpu_count=gpu_count,
        gpu_memory_bytes=memory,
        gpu_memory_exposed_bytes=exposed or (spec.memory_exposed_bytes if spec else memory),
        vcpus=vcpus if vcpus is not None else 16.0 * gpu_count,
        ram_bytes=128 * GIB * gpu_count,
        price_per_hour_usd=price,
        spot_price_per_hour_usd=spot,
        interconnect=interconnect,  # type: ignore[arg-type]
        network=network,
        billing_increment_seconds=increment,
        billing_minimum_seconds=minimum,
        source="test",
        fetched_at="2026-11-30T00:00:00Z",
        **extra,
    )


def providers(**rates: float | None) -> dict[str, ProviderInfo]:
    """ProviderInfo per name with the given spot interruption rate per hour."""
    return {
        name: ProviderInfo(name=name, billing_increment_seconds=1, spot_interruptions_per_hour=rate)
        for name, rate in rates.items()
    }


def make_request(
    workload: Workload,
    *,
    objective: str = "total_cost",
    top_k: int = 5,
    **constraints: Any,
) -> Any:
    """A RecommendationRequest for a toy model (the model spec is not read by the core)."""
    from gpu_advisor.core.spec import Constraints, ModelSpec, RecommendationRequest

    return RecommendationRequest(
        model=ModelSpec(preset="toy"),
        workload=workload,
        constraints=Constraints(**constraints),
        objective=objective,  # type: ignore[arg-type]
        top_k=top_k,
    )
