"""WorkloadEstimator answers exactly what estimate_memory answers, for every plan of a search,
while remembering the shape-only parts between plans."""

from __future__ import annotations

import pytest
from mem_data import arch

from gpu_advisor.core.errors import InvalidSpecError
from gpu_advisor.core.memory import WorkloadEstimator, estimate_memory
from gpu_advisor.core.memory import estimate as estimate_module
from gpu_advisor.core.memory.training import stage_key
from gpu_advisor.core.results import ParallelPlan
from gpu_advisor.core.spec import InferenceWorkload, TrainingWorkload

WORKLOADS = [
    TrainingWorkload(sequence_length=4096, micro_batch_size=2),
    TrainingWorkload(method="lora", lora_targets=["all-linear"], global_batch_size=64),
    TrainingWorkload(method="qlora", gradient_checkpointing="full", optimizer="adafactor"),
    InferenceWorkload(context_length=8192, concurrency=8),
    InferenceWorkload(engine="generic", weight_dtype="int4", context_length=2048),
]
PLANS = [
    ParallelPlan(tensor_parallel=t, pipeline_parallel=p, data_parallel=d, sharding=z)
    for t in (1, 2, 8)
    for p in (1, 2, 4, 16)
    for d, z in ((1, "none"), (8, "zero1"), (8, "zero3"), (32, "fsdp"))
]


def _answer(estimate, a, workload, plan, capacity):  # type: ignore[no-untyped-def]
    """The breakdown, or the field of the error the plan is refused with."""
    try:
        return estimate(a, workload, plan, capacity_bytes=capacity)
    except InvalidSpecError as error:
        return ("refused", error.field)


@pytest.mark.parametrize(
    "stem",
    [
        "meta-llama--Llama-3.1-70B",  # uniform stack, GQA
        "deepseek-ai--DeepSeek-V3",  # MLA, dense-first MoE layers
        "google--gemma-2-9b",  # sliding-window layers
        "google-t5--t5-base",  # encoder-decoder
        "mistralai--Mixtral-8x7B-v0.1",  # MoE in every layer
    ],
)
@pytest.mark.parametrize("workload", WORKLOADS)
def test_same_answers_as_estimate_memory_plan_after_plan(stem, workload):
    a = arch(stem)
    search = WorkloadEstimator(a, workload)
    for capacity in (None, 80 * 2**30):
        for plan in PLANS * 2:  # the second pass reads what the first remembered
            assert _answer(search, a, workload, plan, capacity) == _answer(
                estimate_memory, a, workload, plan, capacity
            )


def test_other_arguments_are_answered_by_estimate_memory():
    llama, mixtral = arch("meta-llama--Llama-3.1-8B"), arch("mistralai--Mixtral-8x7B-v0.1")
    workload = TrainingWorkload()
    search = WorkloadEstimator(llama, workload)
    plan = ParallelPlan(tensor_parallel=2)
    assert search(mixtral, workload, plan) == estimate_memory(mixtral, workload, plan)
    serve = InferenceWorkload()
    assert search(llama, serve, plan) == estimate_memory(llama, serve, plan)


def test_other_workloads_are_answered_by_siblings_that_share_equal_workloads(monkeypatch):
    # The lighter workloads a suggestion tries (planner/relax.py) are new objects each time; the
    # estimator answers them through one sibling per distinct workload value, and each answer
    # is estimate_memory's for that workload.
    llama = arch("meta-llama--Llama-3.1-8B")
    search = WorkloadEstimator(llama, TrainingWorkload(sequence_length=8192))
    made: list[object] = []
    real = estimate_module.WorkloadEstimator.__init__

    def recording(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        made.append(args[1])
        real(self, *args, **kwargs)

    monkeypatch.setattr(estimate_module.WorkloadEstimator, "__init__", recording)
    shorter = [TrainingWorkload(sequence_length=2048) for _ in range(3)]  # equal, not identical
    checkpointed = TrainingWorkload(sequence_length=2048, gradient_checkpointing="full")
    for plan in PLANS[:12]:
        for workload in (*shorter, checkpointed):
            assert _answer(search, llama, workload, plan, 80 * 2**30) == _answer(
                estimate_memory, llama, workload, plan, 80 * 2**30
            )
    # one sibling per distinct value: the three equal workloads share one
    assert made == [shorter[0], checkpointed]


def test_an_unknown_lora_target_is_reported_on_every_call():
    a = arch("meta-llama--Llama-3.1-8B")
    workload = TrainingWorkload(method="lora", lora_targets=["nope"])
    search = WorkloadEstimator(a, workload)
    for _ in range(2):
        with pytest.raises(InvalidSpecError) as raised:
            search(a, workload, ParallelPlan())
        assert raised.value.field.startswith("workload.lora_targets")


# Plans of one shape (TP, PP, EP, sequence parallel) that differ in DP and sharding share their
# stage states (training.stage_key); everything that depends on DP must still reach the answer:
# ZeRO sharding over DP and over the expert-data-parallel group DP / EP, the micro-batches of a
# step (global batch / (micro-batch x DP) caps 1F1B's micro-batches in flight when PP > 1), and
# offload's host bytes per node (GPUs per node = min(8, TP x PP x DP)). Where the effective
# sharding is "none" without offload, the estimator keeps one breakdown per shape and capacity
# (training.sharded_over_dp): the workload's own sharding ("zero2", "fsdp" below) applies to plans
# that say "none", offload ("qlora ...") counts the plan's GPUs, and the two capacities differ.
DP_WORKLOADS = {
    # 64 / (1 x DP) micro-batches: 8 in flight on stage 0 with PP 8 up to DP 8, then 4, 2, 1
    "global batch with 1F1B": TrainingWorkload(global_batch_size=64, sequence_length=2048),
    "optimizer offload": TrainingWorkload(cpu_offload_optimizer=True, sharding="zero2"),
    "lora, global batch": TrainingWorkload(
        method="lora", lora_targets=["all-linear"], global_batch_size=32, micro_batch_size=2
    ),
    "qlora, 8-bit adamw, offload": TrainingWorkload(
        method="qlora", optimizer="adamw-8bit", cpu_offload_optimizer=True, global_batch_size=16
    ),
    "adafactor, full recompute": TrainingWorkload(
        optimizer="adafactor", gradient_checkpointing="full", sharding="fsdp"
    ),
}
SHARDINGS = ("none", "zero1", "zero2", "zero3", "fsdp")


@pytest.mark.parametrize(
    ("stem", "shapes"),
    [
        # (TP, PP, EP, sequence parallel)
        (
            "meta-llama--Llama-3.1-70B",
            [(1, 1, 1, False), (2, 8, 1, True), (2, 8, 1, False), (8, 4, 1, False)],
        ),
        # EP divides DP: experts shard over DP / EP
        (
            "mistralai--Mixtral-8x7B-v0.1",
            [(1, 2, 1, False), (1, 2, 2, False), (2, 4, 4, False), (4, 1, 8, True)],
        ),
    ],
)
@pytest.mark.parametrize("workload", DP_WORKLOADS.values(), ids=DP_WORKLOADS.keys())
def test_plans_that_differ_only_in_dp_share_stage_states_not_answers(
    stem, shapes, workload, monkeypatch
):
    a = arch(stem)
    computed: list[ParallelPlan] = []
    remembered = estimate_module.stage_states

    def counting(arch_, workload_, plan, **kwargs):  # type: ignore[no-untyped-def]
        computed.append(plan)
        return remembered(arch_, workload_, plan, **kwargs)

    monkeypatch.setattr(estimate_module, "stage_states", counting)
    search = WorkloadEstimator(a, workload)
    plans = [
        ParallelPlan(
            tensor_parallel=t,
            pipeline_parallel=p,
            expert_parallel=e,
            sequence_parallel=sp,
            data_parallel=d,
            sharding=z,
        )
        for t, p, e, sp in shapes
        for d in (8, 1, 2, 4, 16, 64)  # DP 8 fills the shape's states, the others read them
        for z in SHARDINGS
        if d % e == 0
    ]
    for plan in plans:
        for capacity in (None, 80 * 2**30):
            assert _answer(search, a, workload, plan, capacity) == _answer(
                estimate_memory, a, workload, plan, capacity
            ), plan
    # the states were computed once per shape and micro-batch count, not once per plan
    assert len(computed) == len({stage_key(workload, plan) for plan in plans}) < len(plans)


# The estimator validates a plan shape once (WorkloadEstimator._stage_states: the stage_key
# holds TP, PP and EP); the checks that read DP must still refuse each later plan of the shape,
# with the same error as estimate_memory.
@pytest.mark.parametrize(
    ("remembered", "later"),
    [
        # Mixtral: 8 experts; EP 4 over DP 8 is valid, over DP 6 it does not divide DP
        (
            ParallelPlan(data_parallel=8, expert_parallel=4),
            ParallelPlan(data_parallel=6, expert_parallel=4),
        ),
        # DP must be at least 1, whatever the shape
        (ParallelPlan(data_parallel=8), ParallelPlan(data_parallel=0)),
        (
            ParallelPlan(data_parallel=8, pipeline_parallel=2),
            ParallelPlan(pipeline_parallel=2, data_parallel=-1),
        ),
    ],
)
@pytest.mark.parametrize("workload", [TrainingWorkload(), TrainingWorkload(global_batch_size=32)])
def test_a_remembered_shape_still_refuses_a_dp_it_cannot_run(remembered, later, workload):
    a = arch("mistralai--Mixtral-8x7B-v0.1")
    search = WorkloadEstimator(a, workload)
    assert _answer(search, a, workload, remembered, None) == _answer(
        estimate_memory, a, workload, remembered, None
    )
    refused = _answer(estimate_memory, a, workload, later, None)
    assert refused[0] == "refused"
    assert _answer(search, a, workload, later, None) == refused


@pytest.mark.parametrize(
    "plan",
    [
        ParallelPlan(tensor_parallel=3),  # 32 heads
        ParallelPlan(data_parallel=3, expert_parallel=3),  # 8 experts
        ParallelPlan(pipeline_parallel=33),  # 32 layers
    ],
)
def test_a_refused_shape_is_refused_on_every_call(plan):
    a = arch("mistralai--Mixtral-8x7B-v0.1")
    workload = TrainingWorkload()
    search = WorkloadEstimator(a, workload)
    refused = _answer(estimate_memory, a, workload, plan, None)
    assert refused[0] == "refused"
    for _ in range(2):
        assert _answer(search, a, workload, plan, None) == refused
