"""Serving estimates in two phases (memory/inference.py): the stage memories of a plan shape
(:func:`stage_memories`, remembered per :func:`serving_key` by ``WorkloadEstimator``), then the
replica's share of the sequences and the GPU (:func:`heaviest_serving_stage`).

Expected values are ``estimate_memory``'s own answers on the same inputs, and for the pruning
of stages the heaviest of every stage's :func:`stage_breakdown`: these tests check that
remembering and pruning change nothing, not the memory model itself (its numbers are checked
against published cases in test_reference_cases.py).
"""

from __future__ import annotations

import pytest
from mem_data import GIB, arch

from gpu_advisor.core.errors import InvalidSpecError
from gpu_advisor.core.memory import WorkloadEstimator, estimate_memory
from gpu_advisor.core.memory import estimate as estimate_module
from gpu_advisor.core.memory.inference import (
    inference_breakdown,
    serving_key,
    stage_breakdown,
    weight_plan,
)
from gpu_advisor.core.memory.overhead import DEFAULT_OVERHEAD, OverheadModel
from gpu_advisor.core.results import MemoryBreakdown, ParallelPlan
from gpu_advisor.core.spec import InferenceWorkload

# What depends on DP and on the GPU must reach every answer though the stage memories are
# shared: the sequences per replica, ceil(concurrency / DP) (KV cache; the generic engine's
# prefill of every prompt and its logits), vLLM's batch defaults (8192 tokens / 1024 sequences
# on GPUs of at least 70 GiB, else 2048 / 256: 24 and 48 GiB below, 80 and 141 GiB above), its
# reservation and KV pool. Shapes are (TP, PP, EP); PP > 1 in every case.
CASES = {
    "dense GQA, vLLM": (
        "meta-llama--Llama-3.1-70B",
        InferenceWorkload(context_length=8192, concurrency=16),
        [(1, 1, 1), (2, 4, 1), (8, 1, 1), (1, 5, 1)],
    ),
    "dense GQA, generic, fp8 KV, 16-bit weights": (
        "meta-llama--Llama-3.1-70B",
        InferenceWorkload(
            engine="generic", kv_cache_dtype="fp8", context_length=4096, concurrency=24
        ),
        [(2, 1, 1), (4, 2, 1), (1, 7, 1)],
    ),
    "dense GQA, vLLM, fixed batch, no CUDA graphs, int4": (
        "meta-llama--Llama-3.1-70B",
        InferenceWorkload(
            weight_dtype="int4",
            max_num_batched_tokens=4096,
            max_num_seqs=64,
            cuda_graphs=False,
            concurrency=40,
        ),
        [(1, 1, 1), (2, 3, 1)],
    ),
    "encoder-decoder (cross-attention KV), generic": (
        "google-t5--t5-base",
        InferenceWorkload(engine="generic", context_length=1024, prompt_tokens=768, concurrency=12),
        [(1, 1, 1), (2, 3, 1), (1, 4, 1)],
    ),
    "encoder-decoder, vLLM": (
        "google-t5--t5-base",
        InferenceWorkload(context_length=2048, concurrency=9),
        [(1, 2, 1), (4, 6, 1)],
    ),
    "encoder-only, generic (no sampler, no KV)": (
        "google-bert--bert-base-uncased",
        InferenceWorkload(engine="generic", context_length=512, concurrency=33),
        [(1, 1, 1), (2, 3, 1)],
    ),
    "sliding windows (Gemma-3), vLLM": (
        "google--gemma-3-27b-it",
        InferenceWorkload(context_length=32768, concurrency=6),
        [(1, 1, 1), (2, 4, 1), (4, 2, 1)],
    ),
    "sliding windows + MoE (gpt-oss), generic, fp8 KV, EP": (
        "openai--gpt-oss-20b",
        InferenceWorkload(
            engine="generic", kv_cache_dtype="fp8", context_length=16384, concurrency=5
        ),
        [(1, 1, 1), (2, 2, 1), (2, 2, 4), (1, 3, 2)],
    ),
    "MLA (DeepSeek-V3), vLLM, fp8 KV, EP": (
        "deepseek-ai--DeepSeek-V3",
        InferenceWorkload(kv_cache_dtype="fp8", context_length=16384, concurrency=32),
        [(8, 2, 1), (8, 2, 8), (16, 1, 2), (8, 4, 4)],
    ),
    "MLA (DeepSeek-V3), generic": (
        "deepseek-ai--DeepSeek-V3",
        InferenceWorkload(engine="generic", context_length=4096, concurrency=3),
        [(8, 2, 1), (4, 3, 2)],
    ),
}
# DP 8 comes first: it fills a shape's stage memories, the other DPs and GPUs read them
DATA_PARALLEL = (8, 1, 2, 3, 5, 16, 64)
CAPACITIES = (80 * GIB, None, 24 * GIB, 48 * GIB, 141 * GIB)


def _answer(estimate, a, workload, plan, capacity):  # type: ignore[no-untyped-def]
    """The breakdown, or the field of the error the plan is refused with."""
    try:
        return estimate(a, workload, plan, capacity_bytes=capacity)
    except InvalidSpecError as error:
        return ("refused", error.field)


def _plans(shapes: list[tuple[int, int, int]]) -> list[ParallelPlan]:
    return [
        ParallelPlan(tensor_parallel=t, pipeline_parallel=p, expert_parallel=e, data_parallel=d)
        for t, p, e in shapes
        for d in DATA_PARALLEL
        if d % e == 0
    ]


@pytest.mark.parametrize(("stem", "workload", "shapes"), CASES.values(), ids=CASES.keys())
def test_plans_that_differ_in_dp_and_gpu_share_stage_memories_not_answers(
    stem, workload, shapes, monkeypatch
):
    a = arch(stem)
    computed: list[ParallelPlan] = []
    remembered = estimate_module.stage_memories

    def counting(arch_, workload_, plan, **kwargs):  # type: ignore[no-untyped-def]
        computed.append(plan)
        return remembered(arch_, workload_, plan, **kwargs)

    monkeypatch.setattr(estimate_module, "stage_memories", counting)
    search = WorkloadEstimator(a, workload)
    plans = _plans(shapes)
    answers = []
    for plan in plans:
        for capacity in CAPACITIES:
            answer = _answer(search, a, workload, plan, capacity)
            assert answer == _answer(estimate_memory, a, workload, plan, capacity), (
                plan,
                capacity,
            )
            answers.append(answer)
    # the shared memories were computed once per shape, not once per plan and GPU ...
    assert len(computed) == len({serving_key(plan) for plan in computed}) <= len(shapes)
    # ... and the answers still differ with DP and GPU (the cases exercise what they share)
    valid = [answer for answer in answers if isinstance(answer, MemoryBreakdown)]
    per_sequence = {(answer.kv_cache_bytes, answer.activations_bytes) for answer in valid}
    assert len(per_sequence) > len(shapes)
    assert len({answer.capacity_bytes for answer in valid}) == len(CAPACITIES)
    if workload.engine == "vllm" and workload.max_num_batched_tokens is None:
        assert {answer.details["activations.batched_tokens"] for answer in valid} == {2048, 8192}


@pytest.mark.parametrize(("stem", "workload", "shapes"), CASES.values(), ids=CASES.keys())
@pytest.mark.parametrize(
    "overhead",
    [DEFAULT_OVERHEAD, OverheadModel(fragmentation_fraction=-0.5)],
    ids=["default overhead", "negative fragmentation (no pruning)"],
)
def test_the_heaviest_stage_is_the_heaviest_of_every_stage(stem, workload, shapes, overhead):
    """Phase one keeps only the candidate stages (layout) that no earlier stage covers; the
    answer is still the first stage of the largest total among all stages."""
    a = arch(stem)
    wplan = weight_plan(a, workload.weight_dtype)
    for t, p, e in [*shapes, (1, 6, 1), (2, 11, 1)]:
        plan = ParallelPlan(tensor_parallel=t, pipeline_parallel=p, expert_parallel=e)
        if e > 1:
            plan = ParallelPlan(
                tensor_parallel=t, pipeline_parallel=p, expert_parallel=e, data_parallel=e
            )
        try:
            estimate_module.validate_plan(a, plan)
        except InvalidSpecError:
            continue
        for capacity in (None, 24 * GIB, 141 * GIB):
            every = [
                stage_breakdown(
                    a,
                    workload,
                    plan,
                    stage,
                    wplan=wplan,
                    capacity_bytes=capacity,
                    overhead=overhead,
                )
                for stage in range(p)
            ]
            heaviest = max(every, key=lambda breakdown: breakdown.total_bytes)  # the first
            assert heaviest == inference_breakdown(
                a, workload, plan, capacity_bytes=capacity, overhead=overhead
            ), (plan, capacity)
