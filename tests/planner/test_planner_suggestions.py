"""Suggestions that relax what binds (QA finding 12): a lighter workload (recomputed
activations, smaller micro-batches, shorter sequences) before more nodes, and no hardware
suggestions when a number such as the budget is what binds.

The estimator here extends ``toy_estimate`` (fixtures.py) with activations that depend on
the workload, so each relaxation's figure can be worked by hand:

* model states: weights 2 P, gradients 2 P, AdamW 12 P bytes over TP x PP (no ZeRO at DP 1);
* activations: ``micro_batch_size x sequence_length x 3,000,000 / DIVISOR / TP`` bytes, with
  DIVISOR 1 without recomputation, 2 with selective and 16 with full recomputation;
* overhead 1 GiB.
"""

from __future__ import annotations

from gpu_advisor.core.architecture import Architecture
from gpu_advisor.core.planner import recommend
from gpu_advisor.core.results import MemoryBreakdown, ParallelPlan
from gpu_advisor.core.spec import TrainingWorkload, Workload

from .fixtures import GIB, GPUS, INFINIBAND, make_arch, make_offer, make_request, toy_estimate

PARAMS = 4 * 10**9
STATES = 16 * PARAMS  # 64e9 B: 2 + 2 + 12 bytes per parameter on one GPU
ACTIVATION_BYTES_PER_TOKEN = 3_000_000
DIVISOR = {"none": 1, "selective": 2, "full": 16}
# H100 exposes 81,559 MiB = 85,520,809,984 B; states + overhead leave
# 85,520,809,984 - 64e9 - 1,073,741,824 = 20,447,068,160 B for activations.


def activation_estimate(
    arch: Architecture,
    workload: Workload,
    plan: ParallelPlan,
    *,
    capacity_bytes: int | None = None,
) -> MemoryBreakdown:
    base = toy_estimate(arch, workload, plan, capacity_bytes=capacity_bytes)
    assert isinstance(workload, TrainingWorkload)
    activations = (
        workload.micro_batch_size
        * workload.sequence_length
        * ACTIVATION_BYTES_PER_TOKEN
        // DIVISOR[workload.gradient_checkpointing]
        // plan.tensor_parallel
    )
    total = base.total_bytes - base.activations_bytes + activations
    return MemoryBreakdown(
        weights_bytes=base.weights_bytes,
        gradients_bytes=base.gradients_bytes,
        optimizer_bytes=base.optimizer_bytes,
        activations_bytes=activations,
        overhead_bytes=base.overhead_bytes,
        total_bytes=total,
        capacity_bytes=base.capacity_bytes,
    )


def _recommend(workload: TrainingWorkload, **constraints: object):  # type: ignore[no-untyped-def]
    arch = make_arch(PARAMS)
    offer = make_offer("H100-SXM-80GB", 1, interconnect="none", network=INFINIBAND)
    request = make_request(workload, **constraints)
    return recommend(arch, request, [offer], GPUS, {}, activation_estimate)


def test_recomputation_is_suggested_before_more_nodes() -> None:
    # micro-batch 8 x 2,048 tokens: 49,152,000,000 B of activations without recomputation,
    # 24,576,000,000 with selective (both above the 20.4e9 B left), 3,072,000,000 with full.
    # Two nodes would also fit (ZeRO shards the states), but max_nodes is 1.
    workload = TrainingWorkload(micro_batch_size=8, sequence_length=2048, tokens=1e8)
    result = _recommend(workload, max_nodes=1)

    assert result.recommendations == []
    assert [s.code for s in result.suggestions][:2] == ["enable_checkpointing", "raise_max_nodes"]
    first = result.suggestions[0]
    assert first.data["gradient_checkpointing"] == "full"
    assert first.data["need_bytes"] == STATES + 8 * 2048 * 3_000_000 // 16 + GIB
    # 64e9 + 3,072,000,000 + 1,073,741,824 = 68,145,741,824 B = 63.5 GiB
    assert first.text.startswith(
        "set gradient_checkpointing to 'full' (activations recomputed): 1 × H100-SXM-80GB "
        "(acme h100-sxm-80gb-x1 us-east-1, TP=1, PP=1, DP=1) needs 63.5 GiB per GPU of 79.6 GiB"
    )


def test_then_a_smaller_micro_batch() -> None:
    # full recomputation already; 32,768 tokens: micro-batch 8 -> 49.2e9 B, 4 -> 24.6e9 B,
    # 2 -> 12,288,000,000 B: the largest that fits the 20.4e9 B left is 2.
    workload = TrainingWorkload(
        micro_batch_size=8, sequence_length=32_768, gradient_checkpointing="full", tokens=1e8
    )
    result = _recommend(workload, max_nodes=1)

    first = result.suggestions[0]
    assert first.code == "lower_micro_batch_size"
    assert first.data["micro_batch_size"] == 2
    assert first.data["need_bytes"] == STATES + 2 * 32_768 * 3_000_000 // 16 + GIB
    assert first.text.startswith("set micro_batch_size to 2: ")


def test_then_a_shorter_sequence() -> None:
    # full recomputation, micro-batch 1, 1,048,576 tokens: 196.6e9 B. n tokens hold
    # n x 3e6 / 16 B: 131,072 -> 24.6e9 B (too much), 65,536 -> 12,288,000,000 B: fits.
    workload = TrainingWorkload(
        sequence_length=1_048_576, gradient_checkpointing="full", tokens=1e8
    )
    result = _recommend(workload, max_nodes=1)

    first = result.suggestions[0]
    assert first.code == "lower_sequence_length"
    assert first.data["sequence_length"] == 65_536
    assert first.data["need_bytes"] == STATES + 65_536 * 3_000_000 // 16 + GIB
    assert first.text.startswith("set sequence_length to 65,536: ")


def test_all_three_relaxations_together_are_named_together() -> None:
    # none -> selective -> full (still 196.6e9 / 8 = 24.6e9 B at micro-batch 8 ... too much),
    # micro-batch 1 at 1,048,576 tokens is still 196.6e9 / 16 too: the sequence goes to 65,536
    # with recomputation on and micro-batch 1.
    workload = TrainingWorkload(micro_batch_size=8, sequence_length=1_048_576, tokens=1e8)
    result = _recommend(workload, max_nodes=1)

    first = result.suggestions[0]
    assert first.code == "lower_sequence_length"
    assert {k: first.data[k] for k in ("gradient_checkpointing", "micro_batch_size")} == {
        "gradient_checkpointing": "full",
        "micro_batch_size": 1,
    }
    assert first.data["sequence_length"] == 65_536
    assert first.text.startswith(
        "set gradient_checkpointing to 'full' (activations recomputed), micro_batch_size to 1 "
        "and sequence_length to 65,536: "
    )


def test_a_tiny_budget_suggests_the_budget_and_nothing_about_hardware() -> None:
    # The 8 x H100 instance fits (toy ZeRO-3 states 16 x 7e9 / 8); the others fail for
    # hardware reasons (no bf16 on a T4; 112e9 B of states on one 24 GB L4).
    # With budget_usd 1 only the budget binds: raise it, nothing else.
    arch = make_arch(7 * 10**9)
    workload = TrainingWorkload(tokens=1e9, sequence_length=2048)
    offers = [
        make_offer("H100-SXM-80GB", 8, instance_type="fits"),
        make_offer("T4-16GB", 1, interconnect="none", instance_type="t4"),
        make_offer("L4-24GB", 1, interconnect="none", instance_type="l4"),
    ]
    result = recommend(arch, make_request(workload, budget_usd=1.0), offers, GPUS, {}, toy_estimate)
    assert result.recommendations == []
    assert [s.code for s in result.suggestions] == ["raise_budget"]


def test_a_cluster_network_is_suggested_only_where_it_alone_is_missing() -> None:
    # 100e9 params full fine-tuning (16 B/param of model states, ZeRO-3 over every GPU) on
    # 8 x H100 instances (85,520,809,984 B each GPU): 2 nodes hold 16e11 / 16 = 100e9 B (too
    # much), 3 nodes 66.7e9 B (fits). One offer has InfiniBand, the other has none.
    arch = make_arch(100 * 10**9, layers=80, hidden=8192, heads=64)
    workload = TrainingWorkload(tokens=1e9, sequence_length=4096)
    clustered = make_offer(network=INFINIBAND, instance_type="with-ib")
    isolated = make_offer(instance_type="no-network")
    # max_nodes 2: neither offer may use the 3 nodes the job needs; a network would not help
    request = make_request(workload, max_nodes=2)
    result = recommend(arch, request, [clustered, isolated], GPUS, {}, toy_estimate)
    codes = {s.code: s for s in result.suggestions}
    assert codes["raise_max_nodes"].text == "raise max_nodes to 3 (8 × H100-SXM-80GB)"
    assert "cluster_network" not in codes
    # only the isolated offer, max_nodes 4: its missing network is all that stands in the way
    request = make_request(workload, max_nodes=4)
    result = recommend(arch, request, [isolated], GPUS, {}, toy_estimate)
    codes = {s.code: s for s in result.suggestions}
    assert codes["cluster_network"].text == (
        "an offer with a cluster network: 8 × H100-SXM-80GB needs 3 nodes"
    )


def test_larger_gpu_quotes_the_least_any_allowed_plan_needs() -> None:
    # Same job. A one-GPU instance needs all 16e11 B + 2 GiB + 1 GiB on its GPU; the clustered
    # 8-GPU offer within max_nodes 2 needs 16e11 / 16 = 100e9 B + 2 GiB / 8 + 1 GiB =
    # 101,342,177,280 B per GPU. A larger GPU must expose the smaller of the two, not the
    # one-GPU figure.
    arch = make_arch(100 * 10**9, layers=80, hidden=8192, heads=64)
    workload = TrainingWorkload(tokens=1e9, sequence_length=4096)
    clustered = make_offer(network=INFINIBAND, instance_type="with-ib")
    single = make_offer("H100-SXM-80GB", 1, instance_type="one-gpu")
    request = make_request(workload, max_nodes=2)
    result = recommend(arch, request, [clustered, single], GPUS, {}, toy_estimate)
    codes = {s.code: s for s in result.suggestions}
    assert codes["larger_gpu"].data["need_bytes"] == 100 * 10**9 + 2 * GIB // 8 + GIB
    assert codes["larger_gpu"].data["need_bytes"] == 101_342_177_280
