"""The serving planner's memos shared by the groups of one request give each group the answer
it gets from a planner of its own.

A request's :class:`ServingPlanner` remembers replica fits per GPU capacity (the shapes tried,
exposed and usable bytes), replicas-for-memory per fitted shape and capacity, and speeds per
fitted shape, GPU, compute path, efficiency and links (:mod:`.serving_speed`). The groups below
come in pairs that agree on all but one of those inputs and must get different answers; were
a memo key to miss that input, the group planned second would be handed the first one's
answer and differ from its own planner's.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from msgspec import structs

from gpu_advisor.core.architecture import Architecture
from gpu_advisor.core.planner.estimator import MemoMemory
from gpu_advisor.core.planner.hardware import compute_path
from gpu_advisor.core.planner.serving import ServingPlanner
from gpu_advisor.core.planner.topology import GroupContext, GroupKey, GroupVerdict, SearchSpace
from gpu_advisor.core.spec import Constraints, InferenceWorkload, Objective

from .fixtures import GIB, GPUS, INFINIBAND, MIB, make_arch, toy_estimate

# 20e9 params: 40e9 B of weights at TP=1 (fits an 80 GB GPU, not a 48 GB one); 40 heads and
# 8 KV heads: TP 1, 2, 4, 8.
ARCH = make_arch(20 * 10**9, layers=40, hidden=5120, heads=40, kv_heads=8)
H100_EXPOSED = 81_559 * MIB


def _planner(
    workload: InferenceWorkload, objective: Objective, constraints: Constraints
) -> Callable[[GroupContext], GroupVerdict]:
    memory = MemoMemory(toy_estimate, ARCH, workload)
    return ServingPlanner(SearchSpace(ARCH, constraints, memory), workload, objective).plan


def _context(
    space: SearchSpace,
    gpu: str,
    count: int,
    *,
    interconnect: str = "nvswitch",
    exposed: int | None = None,
    network: bool = False,
) -> GroupContext:
    spec = GPUS[gpu]
    compute = compute_path(spec, "bf16")
    assert compute is not None
    key = GroupKey(
        gpu=gpu,
        gpu_count=count,
        memory_exposed_bytes=exposed or spec.memory_exposed_bytes,
        interconnect=interconnect,  # type: ignore[arg-type]
        network_fabric=INFINIBAND.fabric if network else None,
        network_gbit_per_s=INFINIBAND.gbit_per_s if network else None,
    )
    return space.context(key, spec, compute, None)


def _groups(arch: Architecture, constraints: Constraints) -> dict[str, GroupContext]:
    space = SearchSpace(arch, constraints, MemoMemory(toy_estimate, arch, InferenceWorkload()))
    return {
        "h100 x8": _context(space, "H100-SXM-80GB", 8),
        # the same GPU and capacity over PCIe: TP traffic on another link (speed key: links)
        "h100 x8 pcie": _context(space, "H100-SXM-80GB", 8, interconnect="pcie"),
        # another GPU with the H100's exposed bytes: same fits, other bandwidth and peak
        # (speed key: GPU, compute path)
        "a100 x8 as h100": _context(space, "A100-SXM-80GB", 8, exposed=H100_EXPOSED),
        # the same GPU with less memory exposed (fit keys: capacity)
        "h100 x8 at 40 GiB": _context(space, "H100-SXM-80GB", 8, exposed=40 * GIB),
        # the same exposed bytes with less of them usable (fit keys: usable bytes; within a
        # request min_headroom_fraction is one, a planner's memos do not rely on it)
        "h100 x8, 30 GiB usable": structs.replace(
            _context(space, "H100-SXM-80GB", 8), usable_bytes=30.0 * GIB
        ),
        # more bytes exposed, as many usable: a larger vLLM reservation (fit keys: exposed)
        "h100 x8 exposing 96 GiB": structs.replace(
            _context(space, "H100-SXM-80GB", 8, exposed=96 * GIB), usable_bytes=H100_EXPOSED
        ),
        # replicas of whole nodes, as many as the sequences need (replicas-for-memory key)
        "h100 x1 ib": _context(space, "H100-SXM-80GB", 1, network=True),
        "h100 x1 ib exposing 96 GiB": structs.replace(
            _context(space, "H100-SXM-80GB", 1, exposed=96 * GIB, network=True),
            usable_bytes=H100_EXPOSED,
        ),
        # fewer GPUs per instance: the same replica shapes, other deployments
        "h100 x4": _context(space, "H100-SXM-80GB", 4),
        "h100 x1": _context(space, "H100-SXM-80GB", 1),
        "a100 x1 as h100": _context(space, "A100-SXM-80GB", 1, exposed=H100_EXPOSED),
        # one 48 GB GPU holds no replica of one GPU; two types of one capacity
        "l40s x2": _context(space, "L40S-48GB", 2, interconnect="pcie"),
        "a6000 x2 as l40s": _context(
            space, "RTXA6000-48GB", 2, interconnect="pcie", exposed=46_068 * MIB
        ),
        "l40s x1 ib": _context(space, "L40S-48GB", 1, interconnect="pcie", network=True),
        "a6000 x1 ib as l40s": _context(
            space, "RTXA6000-48GB", 1, interconnect="pcie", exposed=46_068 * MIB, network=True
        ),
    }


WORKLOADS = {
    # throughput matters: every power-of-two replica size is sized and compared
    "cost per token, target": (
        InferenceWorkload(context_length=8192, concurrency=64, target_tokens_per_second=3000.0),
        "cost_per_million_tokens",
    ),
    # smallest replica that makes the fewest instances
    "price": (InferenceWorkload(context_length=8192, concurrency=16), "price_per_hour"),
    # a replica of two nodes holds 4 or 5 of the sequences on an H100, by the vLLM pool
    "long sequences": (
        InferenceWorkload(context_length=32768, concurrency=32, gpu_memory_utilization=0.5),
        "total_cost",
    ),
    # vLLM at 0.5 of a 48 GB GPU leaves no KV pool beside a half of the weights (20e9 B)
    "small pool": (
        InferenceWorkload(context_length=32768, concurrency=8, gpu_memory_utilization=0.5),
        "total_cost",
    ),
}


@pytest.mark.parametrize("case", sorted(WORKLOADS))
@pytest.mark.parametrize("reverse", [False, True])
def test_groups_sharing_a_planner_get_their_own_planners_answers(case: str, reverse: bool) -> None:
    workload, objective = WORKLOADS[case]
    constraints = Constraints(max_nodes=4)
    groups = list(_groups(ARCH, constraints).items())
    if reverse:  # the other group of each pair fills the memos first
        groups.reverse()
    shared = _planner(workload, objective, constraints)  # type: ignore[arg-type]
    for name, ctx in groups:
        alone = _planner(workload, objective, constraints)(ctx)  # type: ignore[arg-type]
        assert shared(ctx) == alone, name


PAIRS = [
    # (group, group, the workload, the input of a memo key they differ in)
    ("h100 x8", "h100 x8 pcie", "cost per token, target", "links"),
    ("h100 x8", "a100 x8 as h100", "cost per token, target", "GPU and compute path"),
    ("h100 x1", "a100 x1 as h100", "cost per token, target", "GPU and compute path"),
    ("l40s x2", "a6000 x2 as l40s", "price", "GPU and compute path"),
    ("h100 x8", "h100 x8 at 40 GiB", "price", "exposed and usable bytes"),
    ("h100 x8", "h100 x8 exposing 96 GiB", "small pool", "exposed bytes"),
    ("h100 x1 ib", "h100 x1 ib exposing 96 GiB", "long sequences", "exposed bytes"),
    ("h100 x8", "h100 x8, 30 GiB usable", "price", "usable bytes"),
]


@pytest.mark.parametrize(("first", "second", "case", "differs_in"), PAIRS)
def test_each_pair_gets_different_answers(
    first: str, second: str, case: str, differs_in: str
) -> None:
    # Without this the test above could pass with a memo key that misses an input: each pair
    # differs in the sizes, rates or limits of the option chosen, not only in the GPU named.
    workload, objective = WORKLOADS[case]
    constraints = Constraints(max_nodes=4)
    groups = _groups(ARCH, constraints)
    one, other = (
        _planner(workload, objective, constraints)(groups[name])  # type: ignore[arg-type]
        for name in (first, second)
    )
    assert _numbers(one) != _numbers(other), differs_in


def _numbers(verdict: GroupVerdict) -> object:
    """What a verdict says besides the GPU it names."""
    if verdict.options:
        [option] = verdict.options
        return (option.plan, option.nodes, option.tokens_per_second, option.memory)
    assert verdict.rejection is not None
    data = {k: v for k, v in verdict.rejection.data.items() if k != "gpu"}
    return (verdict.rejection.code, data)


def test_each_gpu_of_one_id_gets_its_own_default_mfu() -> None:
    # SearchSpace.context remembers default MFUs by GPU id: a GPU of the same id that is
    # another object (here an AMD part) gets its own -- DEFAULT_MFU: datacenter 0.40, AMD 0.25
    space = SearchSpace(ARCH, Constraints(), MemoMemory(toy_estimate, ARCH, InferenceWorkload()))
    h100 = _context(space, "H100-SXM-80GB", 8)
    amd = structs.replace(h100.gpu, vendor="amd")
    again = space.context(h100.key, amd, h100.compute, None)
    assert (h100.efficiency, again.efficiency) == (0.40, 0.25)
    assert _context(space, "H100-SXM-80GB", 4).efficiency == 0.40
