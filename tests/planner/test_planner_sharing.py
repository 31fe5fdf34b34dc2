"""Searches one TrainingPlanner shares between the groups of a request answer each group as
its own search would: groups that share all but one input of a shared search get their own
answers. Memory comes from ``toy_estimate`` (arithmetic in fixtures.py)."""

from __future__ import annotations

from gpu_advisor.core.planner.estimator import MemoMemory
from gpu_advisor.core.planner.topology import SearchSpace
from gpu_advisor.core.planner.training import TrainingPlanner, _Fit
from gpu_advisor.core.results import MemoryBreakdown, ParallelPlan
from gpu_advisor.core.spec import Constraints, TrainingWorkload

from .fixtures import GIB, make_arch, toy_estimate

# 16 B per parameter of full fine-tuning state (fixtures.py): 6 Gi parameters hold 96 GiB,
# sharded over every GPU of the plan by ZeRO-3 (or split by TP x PP without data parallel),
# beside 2 GiB / TP of activations and 1 GiB of overhead: the most-sharded plan of TP t on
# n nodes of g GPUs needs 96 / (g n) + 2 / t + 1 GiB at every PP degree.
PARAMETERS = 6 * 2**30


def _planner() -> TrainingPlanner:
    arch = make_arch(PARAMETERS)  # 32 heads, 8 KV heads: TP 1, 2, 4, 8
    workload = TrainingWorkload()
    memory = MemoMemory(toy_estimate, arch, workload)
    return TrainingPlanner(SearchSpace(arch, Constraints(), memory), workload)


def _need_gib(g: int, n: int, t: int) -> float:
    return 96 / (g * n) + 2 / t + 1


def test_fewest_nodes_is_shared_by_the_widest_tp_degree_not_the_cap() -> None:
    usable = 9.5 * GIB
    # 4 GPUs per node, TP 4: 24 / n + 1.5 <= 9.5 from n = 3; TP 2: 24 / n + 2 <= 9.5 from n = 4
    assert _need_gib(4, 2, 4) > 9.5 >= _need_gib(4, 3, 4)
    assert _need_gib(4, 3, 2) > 9.5 >= _need_gib(4, 4, 2)
    # 8 GPUs per node, TP 4: 12 / n + 1.5 <= 9.5 from n = 2
    assert _need_gib(8, 1, 4) > 9.5 >= _need_gib(8, 2, 4)
    planner = _planner()
    assert planner.fewest_nodes(4, 4, 64, usable) == 3
    assert planner.fewest_nodes(4, 2, 64, usable) == 4  # another widest TP: its own search
    assert planner.fewest_nodes(4, 8, 64, usable) == 3  # a cap of 8 on 4 GPUs: TP 4 again
    assert planner.fewest_nodes(8, 4, 64, usable) == 2  # another GPU count
    assert planner.fewest_nodes(4, 4, 2, usable) is None  # fewer nodes allowed than needed
    assert planner.fewest_nodes(4, 4, 1, usable) is None
    assert planner.fewest_nodes(4, 4, 3, usable) == 3
    # another usable size: 24 / n + 1.5 <= 13.5 from n = 2 (outside the interval searched)
    assert planner.fewest_nodes(4, 4, 64, 13.5 * GIB) == 2
    assert planner.fewest_nodes(4, 4, 64, 9.6 * GIB) == 3
    # one node of 4 GPUs at TP 4 needs 24 + 1.5 GiB
    assert planner.fewest_nodes(4, 4, 1, 25.5 * GIB) == 1
    assert planner.fewest_nodes(4, 4, 1, 25.4 * GIB) is None


def test_memo_memory_answers_per_plan_and_capacity() -> None:
    # one estimate per plan (training: the capacity cannot change the requirement), re-based
    # on each capacity asked: capacity and headroom are the capacity's, the rest the plan's
    arch = make_arch(PARAMETERS)
    workload = TrainingWorkload()
    asked: list[tuple[int, int | None]] = []

    def counted(arch, workload, plan, *, capacity_bytes=None):  # type: ignore[no-untyped-def]
        asked.append((plan.data_parallel, capacity_bytes))
        return toy_estimate(arch, workload, plan, capacity_bytes=capacity_bytes)

    memory = MemoMemory(counted, arch, workload)
    one = ParallelPlan(data_parallel=2, sharding="zero3")
    two = ParallelPlan(data_parallel=4, sharding="zero3")
    for plan, capacity in [(one, None), (one, 80 * GIB), (two, 80 * GIB), (one, 40 * GIB)]:
        assert memory(plan, capacity) == toy_estimate(arch, workload, plan, capacity_bytes=capacity)
    # 96 GiB of states over 2 and 4 GPUs, 2 GiB of activations, 1 GiB of overhead
    assert memory(one, 40 * GIB).total_bytes == 51 * GIB
    assert memory(two, 40 * GIB).total_bytes == 27 * GIB
    assert memory(two, 40 * GIB).headroom_fraction == 1 - 27 / 40
    assert asked == [(2, None), (4, 80 * GIB)]


# A sweep whose most-sharded plans need less at each deeper pipeline, by hand: TP 1 over 4
# GPUs searches PP 1, 2, 4 (the divisors of 4), needing 30, 20, 10 GiB (each step saves more
# than PIPELINE_MIN_SAVING, so the sweep goes on to PP 4).
_SWEEP_NEED_GIB = {1: 30, 2: 20, 4: 10}


def test_fits_somewhere_answers_from_the_least_requirement_computed_and_stays_lazy() -> None:
    arch = make_arch(PARAMETERS)
    workload = TrainingWorkload()
    asked: list[int] = []

    def by_pipeline(arch, workload, plan, *, capacity_bytes=None):  # type: ignore[no-untyped-def]
        asked.append(plan.pipeline_parallel)
        need = _SWEEP_NEED_GIB[plan.pipeline_parallel] * GIB
        return MemoryBreakdown(weights_bytes=need, total_bytes=need)

    memory = MemoMemory(by_pipeline, arch, workload)
    planner = TrainingPlanner(SearchSpace(arch, Constraints(), memory), workload)

    # 25 GiB: PP 2 (20 GiB) is the first that fits; PP 4 is not asked yet. The answer holds
    # for any usable size from 20 GiB up.
    fit = _Fit(25 * GIB)
    assert planner.fits_somewhere(1, 4, fit)
    assert asked == [1, 2]
    assert fit.low == 20 * GIB
    # 15 GiB: neither entry computed fits; PP 4 (10 GiB) is computed and fits
    fit = _Fit(15 * GIB)
    assert planner.fits_somewhere(1, 4, fit)
    assert asked == [1, 2, 4]
    # 12 GiB: the least requirement computed (10 GiB, the latest entry) fits; nothing asked
    fit = _Fit(12 * GIB)
    assert planner.fits_somewhere(1, 4, fit)
    assert (fit.low, fit.high) == (10 * GIB, float("inf"))
    # 5 GiB: under every entry of the complete sweep
    fit = _Fit(5 * GIB)
    assert not planner.fits_somewhere(1, 4, fit)
    assert (fit.low, fit.high) == (-float("inf"), 10 * GIB)
    assert asked == [1, 2, 4]


def test_pipeline_degrees_are_shared_by_the_gpus_per_tensor_parallel_group() -> None:
    # PP degrees are the divisors of total / TP up to the layers (32 here, 6 below)
    planner = _planner()
    assert planner._pipeline_degrees(1, 48) == [1, 2, 3, 4, 6, 8, 12, 16, 24]  # of 48
    assert planner._pipeline_degrees(2, 48) == [1, 2, 3, 4, 6, 8, 12, 24]  # of 24
    assert planner._pipeline_degrees(4, 96) == [1, 2, 3, 4, 6, 8, 12, 24]  # of 24
    assert planner._pipeline_degrees(1, 24) == [1, 2, 3, 4, 6, 8, 12, 24]
    assert planner._pipeline_degrees(2, 16) == [1, 2, 4, 8]  # of 8
    arch = make_arch(PARAMETERS, layers=6)
    workload = TrainingWorkload()
    shallow = TrainingPlanner(
        SearchSpace(arch, Constraints(), MemoMemory(toy_estimate, arch, workload)), workload
    )
    assert shallow._pipeline_degrees(1, 48) == [1, 2, 3, 4, 6]
