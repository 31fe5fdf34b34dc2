"""Impossible plans are rejected naming the field; absurd sizes answer fast; the breakdown adds
up and reports the most loaded GPU."""

from __future__ import annotations

import time

import pytest
from mem_data import GIB, arch

from gpu_advisor.core.errors import InvalidSpecError
from gpu_advisor.core.memory import estimate_memory, max_concurrency, max_context_length
from gpu_advisor.core.models import generic_decoder
from gpu_advisor.core.results import ParallelPlan
from gpu_advisor.core.spec import InferenceWorkload, ModelSpec, TrainingWorkload


@pytest.mark.parametrize(
    ("stem", "plan", "field"),
    [
        # 32 heads: TP 3 does not divide them
        ("meta-llama--Llama-3.1-8B", ParallelPlan(tensor_parallel=3), "plan.tensor_parallel"),
        # Qwen2.5-7B: 28 heads, 4 KV heads: TP 7 divides 28 but neither divides nor is a
        # multiple of 4 KV heads
        ("Qwen--Qwen2.5-7B", ParallelPlan(tensor_parallel=7), "plan.tensor_parallel"),
        # expert parallel on a dense model
        (
            "meta-llama--Llama-3.1-8B",
            ParallelPlan(data_parallel=2, expert_parallel=2),
            "plan.expert_parallel",
        ),
        # Mixtral has 8 experts: EP 3 does not divide them
        (
            "mistralai--Mixtral-8x7B-v0.1",
            ParallelPlan(data_parallel=3, expert_parallel=3),
            "plan.expert_parallel",
        ),
        # EP must divide data parallel
        (
            "mistralai--Mixtral-8x7B-v0.1",
            ParallelPlan(data_parallel=2, expert_parallel=4),
            "plan.expert_parallel",
        ),
        # GPT-2 has 12 layers
        ("openai-community--gpt2", ParallelPlan(pipeline_parallel=13), "plan.pipeline_parallel"),
    ],
)
def test_impossible_plans_name_the_field(stem, plan, field):
    with pytest.raises(InvalidSpecError) as err:
        estimate_memory(arch(stem), TrainingWorkload(), plan)
    assert err.value.field == field
    assert err.value.message


def test_kv_heads_replicate_when_tp_is_a_multiple():
    # Llama-3.1-8B: 8 KV heads, TP 16 divides the 32 heads and is a multiple of 8: allowed
    b = estimate_memory(
        arch("meta-llama--Llama-3.1-8B"), InferenceWorkload(), ParallelPlan(tensor_parallel=16)
    )
    assert b.weights_bytes > 0


def test_breakdown_adds_up_and_reports_headroom():
    a = arch("meta-llama--Llama-3.1-8B")
    cap = 81_559 * 2**20
    b = estimate_memory(
        a, TrainingWorkload(method="lora", sequence_length=1024), ParallelPlan(), capacity_bytes=cap
    )
    parts = b.weights_bytes + b.gradients_bytes + b.optimizer_bytes + b.activations_bytes
    assert b.total_bytes == parts + b.kv_cache_bytes + b.overhead_bytes
    assert b.capacity_bytes == cap
    assert b.headroom_fraction == pytest.approx(1 - b.total_bytes / cap)
    assert (
        b.overhead_bytes
        == b.details["overhead.cuda_context_bytes"] + b.details["overhead.fragmentation_bytes"]
    )
    assert b.details["overhead.cuda_context_bytes"] == 426 * 2**20


def test_most_loaded_pipeline_stage_is_reported():
    """Llama-3.1-8B inference over 2 stages: stage 0 holds the embedding, stage 1 the head and
    the sampler; both hold 16 layers. The larger stage is reported."""
    a = arch("meta-llama--Llama-3.1-8B")
    b = estimate_memory(a, InferenceWorkload(), ParallelPlan(pipeline_parallel=2))
    assert b.details["pipeline_stage"] == 1  # the head stage also holds the sampler's logits
    linear = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336  # one layer
    other = (32 * 2 * 4096 + 4096) * 16 // 32  # norms spread evenly over the 32 layers
    assert b.weights_bytes == 2 * (16 * linear + 128_256 * 4096 + other)


def test_absurd_sizes_answer_fast():
    huge = generic_decoder(ModelSpec(parameters=1e14))
    start = time.perf_counter()
    estimate_memory(
        huge,
        TrainingWorkload(sequence_length=10_485_760, micro_batch_size=65_536),
        ParallelPlan(data_parallel=100_000, sharding="zero3"),
    )
    estimate_memory(
        huge,
        InferenceWorkload(context_length=10_485_760, concurrency=1_000_000),
        ParallelPlan(),
        capacity_bytes=192 * GIB,
    )
    a = arch("google--gemma-3-27b-it")
    max_context_length(
        a, InferenceWorkload(), ParallelPlan(pipeline_parallel=62), capacity_bytes=80 * GIB
    )
    max_concurrency(
        a, InferenceWorkload(context_length=10_485_760), ParallelPlan(), capacity_bytes=80 * GIB
    )
    assert time.perf_counter() - start < 1.0
