"""A recommendation leaves no reference cycles behind: when ``recommend`` returns, refcounting
alone frees its search state (planners, memos, estimators). The service runs planning with the
cyclic collector paused (:mod:`gpu_advisor.collector`); a cycle would keep a whole request's
memos alive until the next collection, and that collection would walk them."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from gpu_advisor.core.memory import WorkloadEstimator
from gpu_advisor.core.models.resolve import resolve_model
from gpu_advisor.core.planner import MEMORY_CAPACITY_RULE, recommend
from gpu_advisor.core.planner.estimator import MemoMemory
from gpu_advisor.core.planner.serving import ServingPlanner
from gpu_advisor.core.planner.training import TrainingPlanner
from gpu_advisor.core.spec import InferenceWorkload, ModelSpec, TrainingWorkload, Workload

from .fixtures import GPUS, INFINIBAND, make_offer, make_request

REQUEST_STATE = (TrainingPlanner, ServingPlanner, MemoMemory, WorkloadEstimator)

OFFERS = [
    make_offer("L4-24GB", 1, interconnect="pcie", price=0.8, instance_type="l4"),
    make_offer("A100-SXM-80GB", 8, price=30.0, instance_type="a100x8"),
    make_offer("H100-SXM-80GB", 8, price=98.0, instance_type="h100x8", network=INFINIBAND),
    make_offer("H100-SXM-80GB", 4, price=49.0, instance_type="h100x4"),
]


@pytest.fixture
def collector_off() -> Iterator[None]:
    gc.collect()  # nothing from earlier tests left to collect
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        (gc.enable if was else gc.disable)()


def alive() -> int:
    # type(o), not isinstance: isinstance falls back to o.__class__, which some objects of
    # other tests' imports answer with a warning (torch.distributed.reduce_op: FutureWarning)
    return sum(issubclass(type(o), REQUEST_STATE) for o in gc.get_objects())


@pytest.mark.usefixtures("collector_off")
@pytest.mark.parametrize(
    ("preset", "workload"),
    [
        # the 70B full fine-tune searches pipeline sweeps and probes "needs N nodes"
        ("meta-llama/Llama-3.1-70B", TrainingWorkload(sequence_length=4096, tokens=2e9)),
        ("meta-llama/Llama-3.1-8B", TrainingWorkload(method="lora", tokens=2e8)),
        ("meta-llama/Llama-3.1-70B", InferenceWorkload(concurrency=16)),
        ("mistralai/Mixtral-8x7B-v0.1", InferenceWorkload(concurrency=64)),
    ],
)
def test_the_search_state_is_freed_without_the_collector(preset: str, workload: Workload) -> None:
    before = alive()
    arch = resolve_model(ModelSpec(preset=preset))
    result = recommend(
        arch,
        make_request(workload),
        OFFERS,
        GPUS,
        {},
        WorkloadEstimator(arch, workload),
        capacity_rule=MEMORY_CAPACITY_RULE,
    )
    assert result.recommendations or result.rejected
    assert alive() == before
