"""Serving specifics: KV pool, throughput targets, expert parallel, latency objective."""

from __future__ import annotations

import math

import pytest

from gpu_advisor.core.architecture import Architecture
from gpu_advisor.core.planner import recommend
from gpu_advisor.core.results import MemoryBreakdown, ParallelPlan
from gpu_advisor.core.spec import InferenceWorkload, Workload

from .fixtures import GIB, GPUS, MIB, make_arch, make_offer, make_request, toy_estimate


def test_context_that_does_not_fit_the_kv_pool_is_rejected() -> None:
    # 9e9 params: 18e9 B (16.76 GiB) of weights + 1 GiB overhead.
    # KV per token: 2 x 32 layers x 8 KV heads x 128 x 2 B = 131,072 B; one 12,288-token
    # sequence = 12,288 x 131,072 B = 1.5 GiB.
    # Requirement: 16.76 + 1.5 + 1 = 19.26 GiB <= 22,888 MiB (22.35 GiB) exposed: fits.
    # vLLM at utilisation 0.8 reserves 0.8 x 22.35 = 17.88 GiB; the KV pool is
    # 17.88 - 16.76 - 1 = 0.12 GiB < 1.5 GiB: the context does not fit the pool.
    arch = make_arch(9 * 10**9)
    workload = InferenceWorkload(context_length=12_288, gpu_memory_utilization=0.8)
    offer = make_offer("L4-24GB", 1, interconnect="pcie")
    result = recommend(arch, make_request(workload), [offer], GPUS, {}, toy_estimate)

    assert result.recommendations == []
    [group] = result.rejected
    assert group.code == "kv_pool_too_small"
    pool = int(0.8 * 22_888 * MIB) - 18 * 10**9 - GIB
    assert group.data["kv_pool_bytes"] == pool
    assert group.data["sequence_bytes"] == 12_288 * 131_072
    assert group.text == (
        "the KV pool of 0.1 GiB per GPU on L4-24GB holds no 12,288-token sequence (1.5 GiB each)"
    )
    assert [s.code for s in result.suggestions] == ["shorter_context"]


def test_throughput_target_sizes_the_deployment() -> None:
    arch = make_arch(7 * 10**9)
    workload = InferenceWorkload(concurrency=8, context_length=4096, output_tokens=256)
    offer = make_offer("H100-SXM-80GB", 1)
    single = recommend(arch, make_request(workload), [offer], GPUS, {}, toy_estimate)
    per_replica = single.recommendations[0].performance.tokens_per_second
    target = 3.5 * per_replica  # needs ceil(3.5) = 4 one-GPU instances
    scaled = recommend(
        arch,
        make_request(
            InferenceWorkload(
                concurrency=8,
                context_length=4096,
                output_tokens=256,
                target_tokens_per_second=target,
            )
        ),
        [offer],
        GPUS,
        {},
        toy_estimate,
    )
    best = scaled.recommendations[0]
    assert best.nodes == math.ceil(3.5) == 4
    assert best.performance.replicas == 4
    assert best.performance.tokens_per_second == pytest.approx(4 * per_replica)
    assert best.cost.price_per_hour_usd == pytest.approx(4 * 10.0)


def test_throughput_target_beyond_max_nodes_is_rejected() -> None:
    arch = make_arch(7 * 10**9)
    workload = InferenceWorkload(target_tokens_per_second=1e9)
    offer = make_offer("H100-SXM-80GB", 1)
    result = recommend(arch, make_request(workload, max_nodes=4), [offer], GPUS, {}, toy_estimate)
    assert [g.code for g in result.rejected] == ["over_max_nodes"]
    assert [s.code for s in result.suggestions] == ["raise_max_nodes"]


def expert_estimate(
    arch: Architecture,
    workload: Workload,
    plan: ParallelPlan,
    *,
    capacity_bytes: int | None = None,
) -> MemoryBreakdown:
    """bf16 weights: dense part split by TP x PP, routed experts also by EP; 1 GiB overhead."""
    routed = arch.parameters.routed_expert
    dense = arch.parameters.total - routed
    mp = plan.tensor_parallel * plan.pipeline_parallel
    weights = 2 * dense // mp + 2 * routed // (mp * plan.expert_parallel)
    return MemoryBreakdown(
        weights_bytes=weights,
        overhead_bytes=GIB,
        total_bytes=weights + GIB,
        capacity_bytes=capacity_bytes or 0,
    )


def test_expert_parallel_is_searched_for_moe() -> None:
    # 4 GPUs; 6 heads -> TP in {1, 2}; 2 layers -> PP <= 2; so a replica of 4 is TP=2 x PP=2.
    # 40e9 dense... 4e9 dense + 96e9 routed (8 experts):
    #   EP=1: 2 * 4e9 / 4 + 2 * 96e9 / 4 = 50e9 B (46.6 GiB) + 1 GiB > 45.0 GiB (L40S)
    #   EP=2: 2e9 + 24e9 = 26e9 B (24.2 GiB) + 1 GiB fits.
    arch = make_arch(
        100 * 10**9,
        layers=2,
        heads=6,
        kv_heads=6,
        experts=8,
        experts_per_token=2,
        routed_expert=96 * 10**9,
        active=28 * 10**9,
    )
    offer = make_offer("L40S-48GB", 4, interconnect="pcie")
    workload = InferenceWorkload(engine="generic")
    result = recommend(arch, make_request(workload), [offer], GPUS, {}, expert_estimate)
    best = result.recommendations[0]
    assert (best.plan.tensor_parallel, best.plan.pipeline_parallel) == (2, 2)
    assert best.plan.expert_parallel == 2
    assert best.memory_per_gpu.weights_bytes == 2 * 4 * 10**9 // 4 + 2 * 96 * 10**9 // 8
    assert "EP=2" in best.rationale[0].text


def test_latency_objective_ranks_serving_by_request_latency() -> None:
    arch = make_arch(7 * 10**9)
    workload = InferenceWorkload(concurrency=1, context_length=2048)
    slow = make_offer("L4-24GB", 1, interconnect="pcie", price=1.0)
    fast = make_offer("H100-SXM-80GB", 1, price=10.0)
    result = recommend(
        arch,
        make_request(workload, objective="time_to_result"),
        [slow, fast],
        GPUS,
        {},
        toy_estimate,
    )
    first, second = result.recommendations
    assert first.offer.gpu == "H100-SXM-80GB"
    assert first.performance.request_latency_seconds < second.performance.request_latency_seconds
    # the Pareto set trades the cheap slow L4 against the fast H100
    assert [p.instance_type for p in result.pareto] == ["l4-24gb-x1", "h100-sxm-80gb-x1"]
