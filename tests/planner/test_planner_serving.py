"""Serving specifics: KV pool, throughput targets, expert parallel, latency objective."""

from __future__ import annotations

import math

import pytest

from gpu_advisor.core.architecture import Architecture
from gpu_advisor.core.planner import recommend
from gpu_advisor.core.results import MemoryBreakdown, ParallelPlan
from gpu_advisor.core.spec import InferenceWorkload, TrainingWorkload, Workload

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
        "the KV pool of 0.1 GiB per GPU on 1 × L4-24GB holds no 12,288-token sequence "
        "(1.5 GiB each)"
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
    """16 B/param of training states: dense parameters split by TP x PP, routed experts also
    by EP (ZeRO ignored); 1 GiB overhead."""
    routed = arch.parameters.routed_expert
    dense = arch.parameters.total - routed
    mp = plan.tensor_parallel * plan.pipeline_parallel
    per_gpu = dense // mp + routed // (mp * plan.expert_parallel)
    return MemoryBreakdown(
        weights_bytes=2 * per_gpu,
        gradients_bytes=2 * per_gpu,
        optimizer_bytes=12 * per_gpu,
        overhead_bytes=GIB,
        total_bytes=16 * per_gpu + GIB,
        capacity_bytes=capacity_bytes or 0,
    )


def test_expert_parallel_is_searched_for_moe_training() -> None:
    # 2e9 dense + 30e9 routed parameters (8 experts), 6 heads (TP in {1, 2}), 2 layers
    # (PP <= 2), one node of 8 H100 (79.6 GiB usable). EP must divide DP.
    #   TP x PP = 2, DP = 4:  EP=2: 16 x (1e9 + 7.5e9)  = 136e9 B  -> no
    #                         EP=4: 16 x (1e9 + 3.75e9) =  76e9 B (70.8 GiB) + 1 GiB -> fits
    #   TP = PP = 1, DP = 8:  EP=8: 16 x (2e9 + 3.75e9) =  92e9 B (85.7 GiB) -> no
    arch = make_arch(
        32 * 10**9,
        layers=2,
        heads=6,
        kv_heads=6,
        experts=8,
        experts_per_token=2,
        routed_expert=30 * 10**9,
        active=9_500_000_000,
    )
    workload = TrainingWorkload(sharding="none", tokens=1e8)
    offer = make_offer("H100-SXM-80GB", 8)
    result = recommend(arch, make_request(workload), [offer], GPUS, {}, expert_estimate)
    best = result.recommendations[0]
    assert best.plan.tensor_parallel * best.plan.pipeline_parallel == 2
    assert (best.plan.data_parallel, best.plan.expert_parallel) == (4, 4)
    assert best.memory_per_gpu.total_bytes == 76 * 10**9 + GIB
    assert "EP=4" in best.rationale[0].text


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
