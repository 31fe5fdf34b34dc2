"""Searches one TrainingPlanner shares between the groups of a request answer each group as
its own search would: groups that share all but one input of a shared search get their own
answers. Memory comes from ``toy_estimate`` (arithmetic in fixtures.py)."""

from __future__ import annotations

from gpu_advisor.core.planner.estimator import MemoMemory
from gpu_advisor.core.planner.topology import SearchSpace
from gpu_advisor.core.planner.training import TrainingPlanner
from gpu_advisor.core.results import ParallelPlan
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
