"""A deployment's estimate from :class:`ReplicaSpeed` is ``estimate_inference`` of the deployed
plan on its own breakdown.

``ReplicaSpeed.deployment`` takes the replica's estimate from its per-batch estimate of the
replica's share of the sequences (measured on ``one``, the breakdown holding one sequence per
replica) when the deployed breakdown has ``one``'s weights and the share times ``one``'s KV
bytes: ``estimate_inference`` reads nothing else of a breakdown. Two estimators below break
that condition in the two ways it can break -- KV bytes that do not scale exactly with the
share (the toy estimator floors ``share x context x kv_per_token / (t p)``) and weights that
change with the share (as when another pipeline stage becomes the most loaded one) -- so a
deployment that reused the per-batch estimate regardless would differ.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from msgspec import structs

from gpu_advisor.core.architecture import Architecture
from gpu_advisor.core.planner.estimator import MemoMemory
from gpu_advisor.core.planner.hardware import Links, compute_path
from gpu_advisor.core.planner.performance import (
    estimate_inference,
    max_concurrency,
    serving_flops,
)
from gpu_advisor.core.planner.serving_speed import ReplicaSpeed, deployed
from gpu_advisor.core.planner.topology import SearchSpace
from gpu_advisor.core.results import MemoryBreakdown, ParallelPlan
from gpu_advisor.core.spec import Constraints, InferenceWorkload, Workload

from .fixtures import GIB, GPUS, make_arch, toy_estimate

# 20e9 params, 40 layers, 8 KV heads of 128: the toy KV cache of one 4,096-token sequence is
# 2 x 40 x 8 x 128 x 2 x 4,096 = 671,088,640 bytes, split over t x p GPUs
ARCH = make_arch(20 * 10**9, layers=40, hidden=5120, heads=40, kv_heads=8)
WORKLOAD = InferenceWorkload(context_length=4096, concurrency=12)
H100 = GPUS["H100-SXM-80GB"]
NVLINK = Links(tp_bytes_per_s=450e9, tp_medium="nvlink", dp_bytes_per_s=450e9, dp_medium="nvlink")

Estimate = Callable[..., MemoryBreakdown]


def _heavier_when_shared(
    arch: Architecture, workload: Workload, plan: ParallelPlan, *, capacity_bytes: int | None = None
) -> MemoryBreakdown:
    """The toy estimator, with 1 GiB more weights on a replica holding several sequences."""
    memory = toy_estimate(arch, workload, plan, capacity_bytes=capacity_bytes)
    assert isinstance(workload, InferenceWorkload)
    if workload.concurrency > plan.data_parallel:
        return structs.replace(
            memory,
            weights_bytes=memory.weights_bytes + GIB,
            total_bytes=memory.total_bytes + GIB,
        )
    return memory


def _speed(estimate: Estimate, replica: ParallelPlan) -> tuple[ReplicaSpeed, MemoMemory]:
    memory = MemoMemory(estimate, ARCH, WORKLOAD)
    space = SearchSpace(ARCH, Constraints(), memory)
    capacity = H100.memory_exposed_bytes
    one = memory(deployed(replica, WORKLOAD.concurrency), capacity)
    assert one is not None
    compute = compute_path(H100, "bf16")
    assert compute is not None
    speed = ReplicaSpeed(
        space,
        WORKLOAD,
        serving_flops(ARCH, WORKLOAD),
        replica=replica,
        one=one,
        per_replica=max_concurrency(one, WORKLOAD, deployed(replica, WORKLOAD.concurrency), 7e10),
        capacity_bytes=capacity,
        gpu=H100,
        compute=compute,
        efficiency=0.4,
        link=NVLINK,
    )
    return speed, memory


def _estimated(speed: ReplicaSpeed, memory: MemoMemory, replicas: int) -> object:
    """``estimate_inference`` of ``replicas`` replicas on the deployed breakdown."""
    deployment = speed.deployment(replicas)
    plan = deployment.plan
    breakdown = memory(plan, H100.memory_exposed_bytes)
    assert breakdown is not None
    compute = compute_path(H100, "bf16")
    assert compute is not None
    return estimate_inference(
        ARCH,
        WORKLOAD,
        plan,
        breakdown,
        H100,
        compute,
        NVLINK,
        speed.estimate(1).max_concurrency,
        0.4,
    )


@pytest.mark.parametrize("estimate", [toy_estimate, _heavier_when_shared])
@pytest.mark.parametrize(("t", "p"), [(1, 1), (2, 1), (1, 3), (2, 2)])
def test_deployed_estimates_are_estimate_inference_of_the_deployed_plan(
    estimate: Estimate, t: int, p: int
) -> None:
    speed, memory = _speed(estimate, ParallelPlan(tensor_parallel=t, pipeline_parallel=p))
    for replicas in range(1, WORKLOAD.concurrency + 1):
        assert speed.deployment(replicas).estimate == _estimated(speed, memory, replicas)


@pytest.mark.parametrize(
    ("estimate", "t", "p", "replicas"),
    [
        # the toy KV cache of 12 sequences on 3 stages: 12 x 671,088,640 // 3 = 2,684,354,560,
        # of 4 sequences (3 replicas) 894,784,853, not 4 x 223,696,213 = 894,784,852
        (toy_estimate, 1, 3, 3),
        # 1 GiB more weights on a replica of several sequences than on one of one
        (_heavier_when_shared, 1, 1, 4),
    ],
)
def test_the_per_batch_estimate_is_not_reused_where_the_breakdowns_differ(
    estimate: Estimate, t: int, p: int, replicas: int
) -> None:
    speed, memory = _speed(estimate, ParallelPlan(tensor_parallel=t, pipeline_parallel=p))
    share = -(-WORKLOAD.concurrency // replicas)
    deployed_estimate = speed.deployment(replicas).estimate
    assert deployed_estimate == _estimated(speed, memory, replicas)
    assert deployed_estimate != speed.estimate(share)
