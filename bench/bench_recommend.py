"""Time ``recommend`` over a synthetic 50,000-offer catalog (seeded), in process.

    python bench/bench_recommend.py [--offers 50000] [--seed 7] [--repeat 30]

Reports the index build time (once per catalog version) and the median / p95 time per
``recommend`` call for a few workloads. Uses ``gpu_advisor.core.memory.estimate_memory`` when
it exists, else a stand-in estimator with the same signature (named in the output).
Target (issue 5): under 10 ms per request for 50,000 offers.
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "service"))

from gpu_advisor.core.architecture import Architecture, ParameterCounts
from gpu_advisor.core.gpus import GpuSpec
from gpu_advisor.core.offers import Network, Offer, ProviderInfo
from gpu_advisor.core.planner import build_offer_index, recommend
from gpu_advisor.core.results import MemoryBreakdown, ParallelPlan
from gpu_advisor.core.spec import (
    Constraints,
    InferenceWorkload,
    ModelSpec,
    RecommendationRequest,
    TrainingWorkload,
    Workload,
)

GIB = 2**30
MIB = 2**20

# id, form, exposed MiB, bandwidth GB/s, bf16, fp8, nvlink GB/s, cc, per-GPU $/h
_GPU_ROWS = [
    ("H100-SXM-80GB", "sxm", 81_559, 3350, 989.5, 1979.0, 900, "9.0", 3.0),
    ("H200-SXM-141GB", "sxm", 143_771, 4800, 989.5, 1979.0, 900, "9.0", 4.0),
    ("A100-SXM-80GB", "sxm", 81_920, 2039, 312.0, None, 600, "8.0", 1.8),
    ("A100-SXM-40GB", "sxm", 40_960, 1555, 312.0, None, 600, "8.0", 1.3),
    ("A100-PCIE-40GB", "pcie", 40_960, 1555, 312.0, None, 0, "8.0", 1.1),
    ("L40S-48GB", "pcie", 46_068, 864, 362.05, 733.0, 0, "8.9", 1.0),
    ("L4-24GB", "pcie", 22_888, 300, 121.0, 242.5, 0, "8.9", 0.7),
    ("A10G-24GB", "pcie", 22_888, 600, 125.0, None, 0, "8.6", 0.9),
    ("RTX4090-24GB", "pcie", 24_564, 1008, 165.2, 330.3, 0, "8.9", 0.4),
    ("RTXA6000-48GB", "pcie", 49_140, 768, 154.8, None, 0, "8.6", 0.8),
    ("T4-16GB", "pcie", 15_360, 320, None, None, 0, "7.5", 0.4),
    ("MI300X-192GB", "oam", 196_608, 5300, 1307.4, 2614.9, 896, None, 3.5),
]


def gpu_table() -> dict[str, GpuSpec]:
    table = {}
    for gid, form, exposed, bw, bf16, fp8, nvlink, cc, _ in _GPU_ROWS:
        memory = int(gid.split("-")[-1].removesuffix("GB")) * GIB
        table[gid] = GpuSpec(
            id=gid,
            name=gid,
            vendor="amd" if gid.startswith("MI") else "nvidia",
            architecture="x",
            form_factor=form,  # type: ignore[arg-type]
            memory_bytes=memory,
            memory_exposed_bytes=exposed * MIB,
            memory_bandwidth_bytes_per_s=bw * 10**9,
            bf16_dense_tflops=bf16,
            fp16_dense_tflops=bf16 or 65.0,
            fp8_dense_tflops=fp8,
            nvlink_bytes_per_s=nvlink * 10**9,
            compute_capability=cc,
        )
    return table


def synthetic_catalog(n: int, seed: int) -> tuple[list[Offer], dict[str, ProviderInfo]]:
    """``n`` offers over 15 providers x up to 40 regions x 3 zones, seeded."""
    rng = random.Random(seed)
    providers = {
        f"cloud{i:02d}": ProviderInfo(
            name=f"cloud{i:02d}",
            billing_increment_seconds=rng.choice([1, 60, 3600]),
            billing_minimum_seconds=rng.choice([0, 60]),
            spot_interruptions_per_hour=rng.choice([None, 0.02, 0.05, 0.2]),
            storage_price_per_gb_month_usd=rng.choice([None, 0.023, 0.04]),
        )
        for i in range(15)
    }
    offers: list[Offer] = []
    names = list(providers)
    while len(offers) < n:
        provider = rng.choice(names)
        info = providers[provider]
        gid, form, exposed, _, _, _, nvlink, _, per_gpu = rng.choice(_GPU_ROWS)
        count = rng.choice([1, 2, 4, 8]) if form == "pcie" else rng.choice([1, 8, 8])
        network = None
        if count == 8 and form != "pcie" and rng.random() < 0.5:
            network = Network(fabric=rng.choice(["infiniband", "efa", "roce"]), gbit_per_s=3200.0)
        factor = rng.uniform(0.8, 1.6)
        region = f"region-{rng.randrange(40):02d}"
        for zone in ("a", "b", "c"):
            price = round(per_gpu * count * factor * rng.uniform(0.98, 1.02), 4)
            spot = round(price * rng.uniform(0.3, 0.7), 4) if rng.random() < 0.6 else None
            offers.append(
                Offer(
                    provider=provider,
                    instance_type=f"{gid.lower()}-{count}x-{int(factor * 100)}",
                    region=region,
                    zone=f"{region}{zone}",
                    gpu=gid,
                    gpu_count=count,
                    gpu_memory_bytes=int(gid.split("-")[-1].removesuffix("GB")) * GIB,
                    gpu_memory_exposed_bytes=exposed * MIB,
                    vcpus=rng.choice([4, 8, 12]) * count,
                    ram_bytes=64 * GIB * count,
                    price_per_hour_usd=price,
                    spot_price_per_hour_usd=spot,
                    interconnect="nvswitch" if nvlink and form != "pcie" else "pcie",
                    network=network,
                    billing_increment_seconds=info.billing_increment_seconds,
                    billing_minimum_seconds=info.billing_minimum_seconds,
                    source="synthetic",
                    fetched_at="2026-11-30T00:00:00Z",
                )
            )
    return offers[:n], providers


def llama_like(params: int, layers: int, hidden: int, heads: int, kv_heads: int) -> Architecture:
    vocab = 128_256
    embedding = vocab * hidden
    return Architecture(
        name=f"llama-like-{params / 1e9:.0f}b",
        family="llama",
        num_layers=layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=hidden // heads,
        intermediate_size=int(3.5 * hidden),
        gated_mlp=True,
        vocab_size=vocab,
        tie_word_embeddings=False,
        parameters=ParameterCounts(
            total=params,
            embedding=embedding,
            lm_head=embedding,
            linear=params - 2 * embedding,
            other=0,
            active=params,
        ),
    )


def stand_in_estimate(
    arch: Architecture, workload: Workload, plan: ParallelPlan, *, capacity_bytes: int | None = None
) -> MemoryBreakdown:
    """16 B/param training states (ZeRO-sharded), 2 B/param weights, KV by KV heads."""
    mp = plan.tensor_parallel * plan.pipeline_parallel
    d = plan.data_parallel
    p = arch.parameters.total
    w = 2 * p // mp
    g = o = act = kv = 0
    if isinstance(workload, TrainingWorkload):
        g, o = 2 * p // mp, 12 * p // mp
        if plan.sharding != "none":
            o //= d
        if plan.sharding in ("zero2", "zero3", "fsdp"):
            g //= d
        if plan.sharding in ("zero3", "fsdp"):
            w //= d
        act = workload.sequence_length * workload.micro_batch_size * arch.hidden_size * 34
        act = act * arch.num_layers // mp
    else:
        per_token = 2 * arch.num_layers * arch.num_kv_heads * arch.head_dim * 2
        kv = workload.concurrency * workload.context_length * per_token // mp
    total = w + g + o + act + kv + GIB
    pool = None
    if capacity_bytes and isinstance(workload, InferenceWorkload):
        pool = int(0.9 * capacity_bytes) - w - GIB
    return MemoryBreakdown(
        weights_bytes=w,
        gradients_bytes=g,
        optimizer_bytes=o,
        activations_bytes=act,
        kv_cache_bytes=kv,
        overhead_bytes=GIB,
        total_bytes=total,
        capacity_bytes=capacity_bytes or 0,
        kv_pool_bytes=pool,
    )


def estimator() -> tuple[Callable[..., MemoryBreakdown], str]:
    try:
        from gpu_advisor.core.memory import estimate_memory  # type: ignore[attr-defined]
    except ImportError:
        return stand_in_estimate, "stand-in estimator (gpu_advisor.core.memory not present)"
    return estimate_memory, "gpu_advisor.core.memory.estimate_memory"


def cases() -> list[tuple[str, Architecture, RecommendationRequest]]:
    l8 = llama_like(8_030_261_248, 32, 4096, 32, 8)
    l70 = llama_like(70_553_706_496, 80, 8192, 64, 8)
    model = ModelSpec(preset="bench")
    return [
        (
            "70B full fine-tune, ZeRO search, total_cost, spot allow",
            l70,
            RecommendationRequest(
                model=model,
                workload=TrainingWorkload(tokens=2e9, sequence_length=4096),
                constraints=Constraints(spot="allow"),
            ),
        ),
        (
            "8B LoRA, time_to_result, budget 500",
            l8,
            RecommendationRequest(
                model=model,
                workload=TrainingWorkload(method="lora", tokens=2e8),
                constraints=Constraints(budget_usd=500.0),
                objective="time_to_result",
            ),
        ),
        (
            "70B serving bf16, ctx 8192 x 16, cost_per_million_tokens",
            l70,
            RecommendationRequest(
                model=model,
                workload=InferenceWorkload(context_length=8192, concurrency=16),
                objective="cost_per_million_tokens",
            ),
        ),
        (
            "8B serving, target 20k tok/s, providers filter",
            l8,
            RecommendationRequest(
                model=model,
                workload=InferenceWorkload(target_tokens_per_second=20_000.0),
                constraints=Constraints(providers=["cloud01", "cloud02", "cloud03"]),
            ),
        ),
    ]


def main(offers: int = 50_000, seed: int = 7, repeat: int = 30) -> None:
    catalog, providers = synthetic_catalog(offers, seed)
    gpus = gpu_table()
    estimate, estimator_name = estimator()
    start = time.perf_counter()
    index = build_offer_index(catalog)
    built = time.perf_counter() - start
    print(f"offers: {len(catalog):,}  groups: {len(index.groups)}  seed: {seed}")
    print(f"estimator: {estimator_name}")
    print(f"index build (once per catalog version): {built * 1e3:.1f} ms")
    for name, arch, request in cases():
        times: list[float] = []
        result: Any = None
        for _ in range(repeat):
            start = time.perf_counter()
            result = recommend(arch, request, index, gpus, providers, estimate)
            times.append(time.perf_counter() - start)
        times.sort()
        p95 = times[min(len(times) - 1, int(0.95 * len(times)))]
        print(
            f"{name}: median {statistics.median(times) * 1e3:.2f} ms, p95 {p95 * 1e3:.2f} ms "
            f"({len(result.recommendations)} recommended, {sum(g.count for g in result.rejected):,} "
            f"rejected in {len(result.rejected)} groups, {len(result.pareto)} Pareto points)"
        )


if __name__ == "__main__":
    typer.run(main)
