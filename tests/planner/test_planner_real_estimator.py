"""The planner through the real memory estimator (gpu_advisor.core.memory) and real presets:
the acceptance workloads of issue 2 on hand-built offers, with the arithmetic written out."""

from __future__ import annotations

import pytest
from msgspec import structs

from gpu_advisor.core.memory import estimate_memory
from gpu_advisor.core.models.resolve import resolve_model
from gpu_advisor.core.planner import MEMORY_CAPACITY_RULE, recommend
from gpu_advisor.core.results import ParallelPlan
from gpu_advisor.core.spec import InferenceWorkload, ModelSpec, TrainingWorkload

from .fixtures import GIB, GPUS, INFINIBAND, MIB, make_offer, make_request

LLAMA_8B = resolve_model(ModelSpec(preset="meta-llama/Llama-3.1-8B"))
LLAMA_70B = resolve_model(ModelSpec(preset="meta-llama/Llama-3.1-70B"))
MIXTRAL = resolve_model(ModelSpec(preset="mistralai/Mixtral-8x7B-v0.1"))

SINGLE_GPU_OFFERS = [
    make_offer("L4-24GB", 1, interconnect="pcie", price=0.8, instance_type="l4"),
    make_offer("L40S-48GB", 1, interconnect="pcie", price=1.8, instance_type="l40s"),
    make_offer("A100-SXM-80GB", 1, price=2.5, instance_type="a100"),
    make_offer("H100-SXM-80GB", 1, price=4.0, instance_type="h100"),
]


def test_llama_8b_qlora_fits_one_24gb_gpu() -> None:
    # QLoRA: 8.03e9 params, linears in NF4 (~0.52 B/param), embeddings/head in bf16, full
    # checkpointing at 2,048 x 1 tokens: well under the L4's 22,888 MiB.
    workload = TrainingWorkload(
        method="qlora",
        sequence_length=2048,
        micro_batch_size=1,
        gradient_checkpointing="full",
        tokens=1e8,
    )
    offers = [*SINGLE_GPU_OFFERS, make_offer("L4-24GB", 4, interconnect="pcie", price=3.2)]
    by_price = recommend(
        LLAMA_8B,
        make_request(workload, objective="price_per_hour"),
        offers,
        GPUS,
        {},
        estimate_memory,
    )
    top = by_price.recommendations[0]
    assert top.gpus == 1
    assert top.offer.gpu_memory_bytes <= 48 * GIB
    assert top.memory_per_gpu.total_bytes <= 22_888 * MIB
    by_cost = recommend(LLAMA_8B, make_request(workload), offers, GPUS, {}, estimate_memory)
    # n GPUs of a kind cost at least as much in total as one: the cheapest job uses one GPU
    assert by_cost.recommendations[0].offer.gpu_count == 1


def test_llama_70b_bf16_serving_rejects_single_gpus_with_the_numbers() -> None:
    # Weights alone: 70.55e9 params x 2 B = 141.1e9 B (131.4 GiB) > any single 80 GB GPU.
    # KV per token = 2 x 80 layers x 8 KV heads x 128 x 2 B = 327,680 B; the need quoted is
    # the smallest replica's with one 8,192-token sequence: 2.5 GiB more than the weights.
    workload = InferenceWorkload(weight_dtype="bf16", context_length=8192, concurrency=16)
    offers = [*SINGLE_GPU_OFFERS, make_offer("H100-SXM-80GB", 8, price=30.0, instance_type="x8")]
    result = recommend(LLAMA_70B, make_request(workload), offers, GPUS, {}, estimate_memory)
    assert [r.offer.instance_type for r in result.recommendations] == ["x8"]
    rejected = {g.gpu: g for g in result.rejected}
    assert set(rejected) == {"L4-24GB", "L40S-48GB", "A100-SXM-80GB", "H100-SXM-80GB"}
    kv_per_token = 2 * 80 * 8 * 128 * 2
    assert kv_per_token == 327_680
    for group in rejected.values():
        assert group.code == "insufficient_memory"
        need = group.data["need_bytes"]
        assert need >= 141 * 10**9 + 8192 * kv_per_token  # weights + one sequence's KV
        assert "GiB per GPU" in group.text
        assert f"exposes {group.data['exposed_bytes'] / GIB:.1f} GiB" in group.text


def test_llama_70b_full_finetune_needs_two_nodes_over_a_cluster_network() -> None:
    # Model states: 16 B/param x 70.55e9 = 1,128.9e9 B; over 8 GPUs with ZeRO-3 that is
    # 141.1e9 B (131.4 GiB) per GPU > 79.6 GiB, so at least 15 GPUs of 80 GB -> 2 nodes.
    assert 16 * 70.55e9 / 80e9 > 14
    workload = TrainingWorkload(sharding="zero3", sequence_length=4096, tokens=1e9)
    clustered = make_offer(network=INFINIBAND, instance_type="with-ib", price=30.0)
    isolated = make_offer(instance_type="no-network", price=25.0)
    result = recommend(
        LLAMA_70B, make_request(workload), [clustered, isolated], GPUS, {}, estimate_memory
    )
    best = result.recommendations[0]
    assert best.offer.instance_type == "with-ib"
    assert best.nodes >= 2
    assert best.memory_per_gpu.total_bytes <= 81_559 * MIB
    [rejected] = result.rejected
    assert rejected.code == "no_cluster_network"
    assert rejected.data["nodes_needed"] >= 2


def test_mixtral_bf16_does_not_fit_one_80gb_gpu() -> None:
    # All experts are resident: 46.7e9 params x 2 B = 93.4e9 B (87.0 GiB) > 79.6 GiB.
    assert MIXTRAL.parameters.total * 2 > 81_559 * MIB
    workload = InferenceWorkload(weight_dtype="bf16")
    offers = [*SINGLE_GPU_OFFERS, make_offer("H100-SXM-80GB", 2, price=8.0, instance_type="x2")]
    result = recommend(MIXTRAL, make_request(workload), offers, GPUS, {}, estimate_memory)
    [best] = [r for r in result.recommendations if r.offer.instance_type == "x2"]
    assert best.plan.tensor_parallel == 2
    assert {g.gpu for g in result.rejected} == {
        "L4-24GB",
        "L40S-48GB",
        "A100-SXM-80GB",
        "H100-SXM-80GB",
    }


def test_capacity_rule_asks_once_per_capacity_class_with_the_same_answer() -> None:
    # vLLM serving: the requirement depends on the GPU only through vLLM's batch defaults
    # (>= 70 GiB or not), so the two 80 GB GPUs share one estimate per plan, and the 24, 40
    # and 48 GB GPUs (small class) another; the result is the same as asking per capacity.
    workload = InferenceWorkload(context_length=8192, concurrency=8)
    offers = [
        *SINGLE_GPU_OFFERS,
        make_offer("A100-PCIE-40GB", 1, interconnect="pcie", price=1.5, instance_type="a40"),
        make_offer("RTXA6000-48GB", 1, interconnect="pcie", price=1.1, instance_type="a6000"),
    ]
    calls: list[tuple[ParallelPlan, int | None]] = []

    def counted(arch, workload, plan, *, capacity_bytes=None):  # type: ignore[no-untyped-def]
        calls.append((plan, capacity_bytes))
        return estimate_memory(arch, workload, plan, capacity_bytes=capacity_bytes)

    request = make_request(workload)
    per_capacity = recommend(LLAMA_8B, request, offers, GPUS, {}, counted)
    asked_per_capacity = list(calls)
    calls.clear()
    by_class = recommend(
        LLAMA_8B, request, offers, GPUS, {}, counted, capacity_rule=MEMORY_CAPACITY_RULE
    )
    assert by_class == per_capacity
    # every plan is asked once per capacity without the rule, once per class with it
    # (classes: >= 70 GiB or not, vLLM's EngineArgs.get_batch_defaults)
    assert len(set(asked_per_capacity)) == len(asked_per_capacity)
    classes = [(plan, capacity is None or capacity >= 70 * GIB) for plan, capacity in calls]
    assert len(set(classes)) == len(classes)
    # each single-GPU replica is sized with one sequence (data_parallel 8) first: 6 capacities
    # -> 2 classes
    assert sum(plan.data_parallel == 8 for plan, _ in asked_per_capacity) == 6
    assert sum(plan.data_parallel == 8 for plan, _ in calls) == 2
    assert len(calls) < len(asked_per_capacity)


def test_an_aws_g5_a10g_offer_is_planned_with_the_bundled_gpu_table() -> None:
    # The bundled table carries the A10G's dense rates (Lightning's _CUDA_FLOPS: bf16 125
    # TFLOPS), so a g5.xlarge is timed and priced instead of rejected gpu_rate_unknown.
    # Llama-3.1-8B bf16 weights 16.06e9 B + KV 4 x 4,096 x 131,072 B fit 22,888 MiB.
    from gpu_advisor.catalog.gpu_table import load_gpu_catalog

    table = load_gpu_catalog().by_id
    workload = InferenceWorkload(context_length=4096, concurrency=4)
    g5 = make_offer("A10G-24GB", 1, interconnect="pcie", price=1.006, instance_type="g5.xlarge")
    g5 = structs.replace(g5, gpu_memory_exposed_bytes=table["A10G-24GB"].memory_exposed_bytes)
    result = recommend(LLAMA_8B, make_request(workload), [g5], table, {}, estimate_memory)
    assert result.rejected == []
    [top] = result.recommendations
    assert top.offer.instance_type == "g5.xlarge"
    assert top.performance.tokens_per_second > 0


def test_one_gpu_replicas_unless_the_objective_is_throughput_per_dollar() -> None:
    # DESIGN "Serving": a model that fits one GPU is served one GPU per replica (latency); under
    # cost_per_million_tokens the replica shape with the most output tokens per GPU paid for
    # wins, and the rationale names what it was compared with. Llama-3.1-8B (16 GB of bf16
    # weights) fits one H100; 64 sequences over one 8-GPU instance either way.
    workload = InferenceWorkload(concurrency=64)
    node = [make_offer("H100-SXM-80GB", 8, price=98.0)]
    by_cost = recommend(LLAMA_8B, make_request(workload), node, GPUS, {}, estimate_memory)
    by_token = recommend(
        LLAMA_8B,
        make_request(workload, objective="cost_per_million_tokens"),
        node,
        GPUS,
        {},
        estimate_memory,
    )
    latency, throughput = by_cost.recommendations[0], by_token.recommendations[0]
    assert (latency.plan.tensor_parallel, latency.plan.data_parallel) == (1, 8)
    assert "single_gpu_replica" in [r.code for r in latency.rationale]
    # the same instance and price: more tokens per second is a lower cost per token
    assert throughput.gpus == latency.gpus == 8
    assert throughput.performance.tokens_per_second > latency.performance.tokens_per_second
    assert throughput.cost.per_million_tokens_usd < latency.cost.per_million_tokens_usd
    note = next(r for r in throughput.rationale if r.code == "tp_for_throughput")
    replica = throughput.plan.tensor_parallel * throughput.plan.pipeline_parallel
    assert note.data["replica_gpus"] == replica > 1
    assert note.data["smallest_replica_gpus"] == 1
    # the one-GPU figure it quotes is the deployment the latency objective chose
    assert note.data["smallest_tokens_per_second_per_gpu"] == pytest.approx(
        latency.performance.tokens_per_second / 8, rel=1e-9
    )
    assert note.data["tokens_per_second_per_gpu"] == pytest.approx(
        throughput.performance.tokens_per_second / 8, rel=1e-9
    )
