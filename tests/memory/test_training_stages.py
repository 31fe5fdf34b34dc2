"""The two phases of training_breakdown: stage states before ZeRO and DP divide them, then the
heaviest stage. Phase one drops the stages an earlier stage covers (StageStates.covers: every
term of the total at least as large, whatever the sharding, DP, EP and offload); that must never
change an answer, which is what the breakdown with nothing dropped gives."""

from __future__ import annotations

import msgspec
import pytest
from mem_data import arch

from gpu_advisor.core.errors import InvalidSpecError
from gpu_advisor.core.memory import estimate_memory
from gpu_advisor.core.memory.overhead import OverheadModel
from gpu_advisor.core.memory.training import StageStates, stage_states
from gpu_advisor.core.results import ParallelPlan
from gpu_advisor.core.spec import TrainingWorkload

WORKLOADS = {
    "full": TrainingWorkload(sequence_length=4096),
    "global batch": TrainingWorkload(global_batch_size=48, micro_batch_size=2),
    "offload": TrainingWorkload(cpu_offload_optimizer=True),
    "lora": TrainingWorkload(method="lora", lora_targets=["all-linear"]),
    "qlora, adafactor, full recompute": TrainingWorkload(
        method="qlora", optimizer="adafactor", gradient_checkpointing="full"
    ),
    "8-bit adamw, fp32 gradients": TrainingWorkload(optimizer="adamw-8bit", gradient_dtype="fp32"),
}
PLANS = [
    ParallelPlan(tensor_parallel=t, pipeline_parallel=p, data_parallel=d, sharding=z)
    for t in (1, 8)
    for p in (2, 3, 4, 5, 8)
    for d in (1, 16)
    for z in ("none", "zero2", "zero3", "fsdp")
]


def _answers(a, workload, overhead):  # type: ignore[no-untyped-def]
    answers = []
    for plan in PLANS:
        try:
            answers.append(estimate_memory(a, workload, plan, overhead=overhead))
        except InvalidSpecError as error:
            answers.append(("refused", error.field))
    return answers


@pytest.mark.parametrize(
    "stem",
    [
        "meta-llama--Llama-3.1-70B",  # uniform stack: stage 0 covers the middle stages
        "deepseek-ai--DeepSeek-V3",  # dense-first MoE layers: stages unlike each other
        "google--gemma-2-9b",  # sliding-window layers
        "google-t5--t5-base",  # encoder-decoder
        "mistralai--Mixtral-8x7B-v0.1",
    ],
)
@pytest.mark.parametrize("workload", WORKLOADS.values(), ids=WORKLOADS.keys())
@pytest.mark.parametrize(
    "overhead",
    [OverheadModel(), OverheadModel(fragmentation_fraction=-0.5)],  # the latter: every stage
    ids=["default overhead", "negative fragmentation"],
)
def test_dropping_covered_stages_changes_no_answer(stem, workload, overhead, monkeypatch):
    a = arch(stem)
    pruned = _answers(a, workload, overhead)
    monkeypatch.setattr(StageStates, "covers", lambda self, other: False)
    assert pruned == _answers(a, workload, overhead)


@pytest.mark.parametrize(
    ("workload", "remaining"),
    [
        # 1F1B: stage 0 holds 8 micro-batches of its 10 layers, the last stage 1 micro-batch
        # plus the logits; the embedding and the untied head are both 128,256 x 8,192
        (TrainingWorkload(), [0]),
        # a step of one micro-batch: every stage holds 1, and the last one the logits on top
        (TrainingWorkload(global_batch_size=1), [0, 7]),
    ],
)
def test_stage_zero_covers_the_middle_stages_of_a_uniform_stack(workload, remaining):
    # Llama-3.1-70B: 80 layers over PP 8 = 10 per stage; stage 0 also holds the embedding
    a = arch("meta-llama--Llama-3.1-70B")
    plan = ParallelPlan(pipeline_parallel=8)
    for overhead in (OverheadModel(), OverheadModel(fragmentation_fraction=-0.5)):
        stages = stage_states(a, workload, plan, overhead=overhead)
        assert [s.stage for s in stages] == remaining


def _grown(states: StageStates, term: str) -> StageStates:
    """``states`` with one term of its total one byte (or element) larger."""
    match term.split("."):
        case ["shard", field]:
            shard = msgspec.structs.replace(
                states.shard, **{field: getattr(states.shard, field) + 1}
            )
            return msgspec.structs.replace(states, shard=shard)
        case [name, part]:
            split = getattr(states, name)
            grown = msgspec.structs.replace(split, **{part: getattr(split, part) + 1})
            return msgspec.structs.replace(states, **{name: grown})
        case [name]:
            return msgspec.structs.replace(states, **{name: getattr(states, name) + 1})
    raise AssertionError(term)


@pytest.mark.parametrize(
    "term",
    [
        f"{name}.{part}"
        for name in ("weights", "frozen_weights", "gradients", "master", "optimizer")
        for part in ("dense", "routed")
    ]
    + ["shard.block_params", "shard.largest_module", "activations_bytes", "overhead_bytes"],
)
def test_a_stage_larger_in_any_one_term_is_not_covered(term):
    # every term of the total: the sharded states (dense over DP, routed over DP / EP), the
    # ZeRO-3 / FSDP gathered unit, activations and overhead
    (states,) = stage_states(
        arch("mistralai--Mixtral-8x7B-v0.1"),
        TrainingWorkload(),
        ParallelPlan(),
        overhead=OverheadModel(),
    )
    assert states.covers(states)
    grown = _grown(states, term)
    assert grown.covers(states)
    assert not states.covers(grown)


# A breakdown's details list the terms in their order (the stage's parameters, ZeRO-3's gathered
# unit, offload's host bytes, master weights and optimizer state, activations and overhead); a
# plan copies its stage's template and fills in its own numbers, so the template stays as it was.
_HEAD = ["pipeline_stage", "parameters_on_gpu", "weights.embedding_bytes"]
_GATHERED = ["weights.zero3_gathered_bytes", "gradients.zero3_gathered_bytes"]
_HOST = ["host.offloaded_states_bytes", "host.loading_peak_bytes", "gradients.offloaded_bytes"]
_TAIL = [
    "optimizer.master_weights_bytes",
    "optimizer.state_bytes",
    "activations.saved_bytes",
    "activations.logits_buffer_bytes",
    "activations.recompute_working_set_bytes",
    "activations.micro_batches_in_flight",
    "overhead.cuda_context_bytes",
    "overhead.fragmentation_bytes",
]


@pytest.mark.parametrize(
    ("offload", "sharding", "keys"),
    [
        (False, "zero2", _HEAD + _TAIL),
        (False, "fsdp", _HEAD + _GATHERED + _TAIL),
        (True, "zero1", _HEAD + _HOST + _TAIL),
        (True, "zero3", _HEAD + _GATHERED + _HOST + _TAIL),
    ],
)
def test_details_are_in_the_order_of_the_terms(offload, sharding, keys):
    from gpu_advisor.core.memory import WorkloadEstimator

    a = arch("meta-llama--Llama-3.1-8B")
    workload = TrainingWorkload(cpu_offload_optimizer=offload)
    search = WorkloadEstimator(a, workload)
    small, large = (ParallelPlan(data_parallel=d, sharding=sharding) for d in (2, 8))
    first = search(a, workload, small)
    second = search(a, workload, large)  # the same stage states, another DP
    assert list(first.details) == list(second.details) == keys
    # ZeRO-1 and up shard the optimizer state over DP (on the GPU, or offloaded per node)
    assert first.details != second.details
    assert first == estimate_memory(a, workload, small)  # the first answer is left as it was
