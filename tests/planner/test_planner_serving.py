"""Serving specifics: KV pool, throughput targets, expert parallel, latency objective."""

from __future__ import annotations

import pytest
from msgspec import structs

from gpu_advisor.core.architecture import Architecture
from gpu_advisor.core.planner import RecommendationResult, recommend
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


def _serve(workload: InferenceWorkload, offers: list, **constraints) -> RecommendationResult:  # type: ignore[type-arg]
    arch = make_arch(7 * 10**9)
    return recommend(arch, make_request(workload, **constraints), offers, GPUS, {}, toy_estimate)


def test_concurrency_counts_the_whole_deployment_and_idle_replicas_add_nothing() -> None:
    # 7e9 params: 14e9 B of weights; one 4,096-token sequence holds
    # 4096 x (2 x 32 x 8 x 128 x 2) = 0.5 GiB of KV. On an 8 x H100 instance the model fits
    # one GPU, so the deployment runs 8 one-GPU replicas; one sequence runs on one of them:
    # the deployment is exactly as fast as a single H100 serving one sequence.
    single = _serve(InferenceWorkload(concurrency=1), [make_offer("H100-SXM-80GB", 1)])
    eight = _serve(InferenceWorkload(concurrency=1), [make_offer("H100-SXM-80GB", 8)])
    [one] = single.recommendations
    [best] = eight.recommendations
    assert (best.plan.tensor_parallel, best.plan.data_parallel) == (1, 8)
    assert best.performance.replicas == 8
    assert best.performance.sequences_per_replica == 1
    assert best.performance.tokens_per_second == one.performance.tokens_per_second
    speed = next(r for r in best.rationale if r.code == "serving_speed")
    assert "from 8 replicas serving 1 concurrent sequence (1 per replica; 7 idle)" in speed.text
    # 16 sequences over the 8 replicas: 2 each, 8 busy replicas at a batch of 2 -- the rate of
    # 8 one-GPU deployments serving 2 sequences each
    sixteen = _serve(InferenceWorkload(concurrency=16), [make_offer("H100-SXM-80GB", 8)])
    pair = _serve(InferenceWorkload(concurrency=2), [make_offer("H100-SXM-80GB", 1)])
    [spread] = sixteen.recommendations
    assert spread.performance.sequences_per_replica == 2
    # each GPU holds its replica's share: 2 x 0.5 GiB of KV
    assert spread.memory_per_gpu.kv_cache_bytes == 2 * GIB // 2
    assert spread.performance.tokens_per_second == pytest.approx(
        8 * pair.recommendations[0].performance.tokens_per_second
    )


def test_throughput_target_adds_replicas_over_the_sequences() -> None:
    # 16 sequences on one-H100 instances: one replica serving all 16 decodes at r16 tokens/s;
    # two replicas serve 8 each at r8 each, 2 x r8 > r16 (a smaller batch reads less KV per
    # step). A target of 1.2 x r16 needs the second replica (and 2 x r8 reaches it: the
    # toy model decodes bandwidth-bound, 14e9 B of weights vs 0.5 GiB of KV per sequence).
    offer = make_offer("H100-SXM-80GB", 1)
    r16 = _serve(InferenceWorkload(concurrency=16), [offer]).recommendations[0]
    r8 = _serve(InferenceWorkload(concurrency=8), [offer]).recommendations[0]
    assert r16.performance.replicas == 1
    target = 1.2 * r16.performance.tokens_per_second
    assert 2 * r8.performance.tokens_per_second >= target
    scaled = _serve(InferenceWorkload(concurrency=16, target_tokens_per_second=target), [offer])
    best = scaled.recommendations[0]
    assert best.nodes == 2
    assert best.performance.replicas == 2
    assert best.performance.sequences_per_replica == 8
    assert best.performance.tokens_per_second == pytest.approx(2 * r8.performance.tokens_per_second)
    assert best.cost.price_per_hour_usd == pytest.approx(2 * 10.0)


def test_a_target_one_sequence_per_replica_cannot_reach_asks_for_more_concurrency() -> None:
    # concurrency 1: one sequence decodes at r1 tokens/s on a one-GPU replica whatever the
    # replicas, so a target of 1.5 x r1 needs at least ceil(1.5) = 2 concurrent sequences.
    offer = make_offer("H100-SXM-80GB", 1)
    r1 = _serve(InferenceWorkload(concurrency=1), [offer]).recommendations[0]
    rate = r1.performance.tokens_per_second
    result = _serve(InferenceWorkload(concurrency=1, target_tokens_per_second=1.5 * rate), [offer])
    assert result.recommendations == []
    [group] = result.rejected
    assert group.code == "target_over_concurrency"
    assert group.data["concurrency_needed"] == 2
    assert group.data["sequence_tokens_per_second"] == pytest.approx(rate)
    assert group.text.startswith(
        f"1 concurrent sequence cannot sustain {1.5 * rate:,.0f} output tokens/s on "
        "1 × H100-SXM-80GB: one sequence decodes at most "
    )
    [suggestion] = result.suggestions
    assert suggestion.code == "raise_concurrency"
    assert suggestion.text.startswith(
        f"raise concurrency to at least 2, or lower target_tokens_per_second to at most {rate:,.0f}"
    )
    # on 8 NVLink GPUs, tensor parallel speeds the one sequence up instead; the rationale
    # says why the replica has several GPUs
    eight = make_offer("H100-SXM-80GB", 8)
    result = _serve(InferenceWorkload(concurrency=1, target_tokens_per_second=1.5 * rate), [eight])
    [best] = result.recommendations
    assert best.plan.tensor_parallel > 1
    assert best.performance.tokens_per_second >= 1.5 * rate
    [note] = [r for r in best.rationale if r.code == "split_for_target"]
    assert note.text.endswith(
        f"output tokens/s with 1 concurrent sequence: one-GPU replicas reach at most {rate:,.0f}"
    )


def test_huge_concurrency_is_over_max_nodes_with_a_concurrency_suggestion() -> None:
    # One H100 (81,559 MiB exposed): vLLM pool = int(0.9 x 85,521,547,264) - 14e9 - 1 GiB
    #   = 76,969,392,537 - 15,073,741,824 = 61,895,650,713 B; one 4,096-token sequence takes
    #   536,870,912 B -> 115 sequences per replica. 1,000,000 sequences need
    #   ceil(1e6 / 115) = 8,696 one-GPU instances; max_nodes 4 holds 4 x 115 = 460.
    assert 61_895_650_713 // 536_870_912 == 115
    offer = make_offer("H100-SXM-80GB", 1)
    result = _serve(InferenceWorkload(concurrency=1_000_000), [offer], max_nodes=4)
    [group] = result.rejected
    assert group.code == "over_max_nodes"
    assert group.data["nodes_needed"] == -(-1_000_000 // 115) == 8_696
    assert [s.code for s in result.suggestions] == ["raise_max_nodes", "lower_concurrency"]
    lower = result.suggestions[1]
    assert lower.data["max_concurrency"] == 4 * 115
    assert lower.text == (
        "lower concurrency to at most 460 (1 × H100-SXM-80GB: 115 sequences per 1-GPU "
        "replica within max_nodes 4)"
    )
    assert not any(s.code == "larger_gpu" for s in result.suggestions)


def test_throughput_target_beyond_max_nodes_is_rejected() -> None:
    # 1,000 sequences can reach 100 x the one-sequence rate, but only with more than 4
    # replicas: over max_nodes, and the target (not the concurrency) sets the size.
    offer = make_offer("H100-SXM-80GB", 1)
    r1 = _serve(InferenceWorkload(concurrency=1), [offer]).recommendations[0]
    target = 100 * r1.performance.tokens_per_second
    workload = InferenceWorkload(concurrency=1000, target_tokens_per_second=target)
    result = _serve(workload, [offer], max_nodes=4)
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


def test_fewer_instances_win_over_one_gpu_replicas() -> None:
    # 7e9 params on 8 x H100 (81,559 MiB = 85,521,547,264 B each; vLLM reserves
    # int(0.9 x 85,521,547,264) = 76,969,392,537 B):
    # * one-GPU replicas: pool 76,969,392,537 - 14e9 - 1 GiB = 61,895,650,713 B / 0.5 GiB per
    #   4,096-token sequence -> 115 each; 1,000 sequences need ceil(1000 / 115) = 9 replicas
    #   = 2 instances of 8;
    # * TP=2 replicas: pool per GPU 76,969,392,537 - 7e9 - 1 GiB = 68,895,650,713 B / 0.25 GiB
    #   per sequence per GPU -> 256 each; 4 replicas per instance hold 1,024 >= 1,000: one
    #   instance. Fewer instances win; each replica serves ceil(1000 / 4) = 250 sequences.
    assert 61_895_650_713 // 536_870_912 == 115
    assert 68_895_650_713 // 268_435_456 == 256
    result = _serve(InferenceWorkload(concurrency=1000), [make_offer("H100-SXM-80GB", 8)])
    [best] = result.recommendations
    assert best.nodes == 1
    assert (best.plan.tensor_parallel, best.plan.data_parallel) == (2, 4)
    assert best.performance.sequences_per_replica == 250
    assert best.performance.max_concurrency_per_replica == 256
    assert best.performance.max_concurrency == 4 * 256
    assert best.memory_per_gpu.kv_cache_bytes == 250 * 268_435_456
    [note] = [r for r in best.rationale if r.code == "split_for_concurrency"]
    assert note.text == (
        "2 GPUs per replica to serve 1,000 concurrent sequences on 1 instance: one-GPU "
        "replicas hold 115 each and need 2 instances"
    )


def test_a_context_longer_than_the_model_was_trained_for_is_rejected() -> None:
    # The model's max_position_embeddings is 8,192: a 16,384-token context is refused (vLLM
    # will not start with a longer max_model_len) on every offer, with a suggestion naming
    # the limit; 8,192 itself is served.
    arch = structs.replace(make_arch(7 * 10**9), max_position_embeddings=8192)
    offers = [make_offer("H100-SXM-80GB", 8), make_offer("L4-24GB", 1, interconnect="pcie")]
    too_long = recommend(
        arch, make_request(InferenceWorkload(context_length=16_384)), offers, GPUS, {}, toy_estimate
    )
    assert too_long.recommendations == []
    assert {g.code for g in too_long.rejected} == {"context_exceeds_model"}
    assert too_long.rejected[0].text == (
        "context_length 16,384 is longer than the 8,192 tokens toy was trained for "
        "(max_position_embeddings): a serving engine refuses it"
    )
    [suggestion] = too_long.suggestions
    assert suggestion.code == "lower_context_length"
    assert suggestion.text == (
        "lower context_length (prompt + output tokens) to at most 8,192, the trained context of toy"
    )
    at_limit = recommend(
        arch, make_request(InferenceWorkload(context_length=8192)), offers, GPUS, {}, toy_estimate
    )
    assert at_limit.recommendations


def test_a_generic_engine_encoder_is_sized_by_its_growing_prefill() -> None:
    # An encoder-only model has no KV cache, but the generic engine prefills every sequence of
    # a replica at once: activations grow with the share. Estimator: weights 2 GB, 1 GB of
    # activations per sequence, 1 GiB overhead, on a 22,888 MiB L4 (24,000,004,096 B):
    # (24,000,004,096 - 2e9 - 1 GiB) / 1e9 = 20.9 -> 20 sequences per one-GPU replica, so
    # 50 sequences need ceil(50 / 20) = 3 replicas.
    arch = structs.replace(make_arch(10**9), encoder_only=True)

    def growing(arch, workload, plan, *, capacity_bytes=None):  # type: ignore[no-untyped-def]
        share = -(-workload.concurrency // plan.data_parallel)
        total = 2 * 10**9 + share * 10**9 + GIB
        return MemoryBreakdown(
            weights_bytes=2 * 10**9,
            activations_bytes=share * 10**9,
            overhead_bytes=GIB,
            total_bytes=total,
            capacity_bytes=capacity_bytes or 0,
        )

    assert (22_888 * MIB - 2 * 10**9 - GIB) // 10**9 == 20
    workload = InferenceWorkload(engine="generic", concurrency=50, context_length=512)
    offer = make_offer("L4-24GB", 1, interconnect="pcie")
    [best] = recommend(arch, make_request(workload), [offer], GPUS, {}, growing).recommendations
    assert best.nodes == 3
    assert best.performance.max_concurrency_per_replica == 20
    assert best.performance.sequences_per_replica == 17  # ceil(50 / 3)
    assert best.memory_per_gpu.total_bytes == 2 * 10**9 + 17 * 10**9 + GIB
