"""The vLLM engine model: reservation vs requirement, the KV pool, infeasible contexts, maximum
context and concurrency."""

from __future__ import annotations

import pytest
from mem_data import GIB, arch, bug_case

from gpu_advisor.core.memory import (
    at_capacity,
    capacity_class,
    estimate_memory,
    kv_pool_check,
    max_concurrency,
    max_context_length,
)
from gpu_advisor.core.memory.engine import (
    forward_bytes_per_token,
    sampler_bytes,
    vllm_default_max_num_batched_tokens,
    vllm_kv_pool,
)
from gpu_advisor.core.results import ParallelPlan
from gpu_advisor.core.spec import InferenceWorkload, TrainingWorkload

RTX3090 = int(23.58 * GIB)  # the exposed memory in the vllm#10517 log


def _b09(max_model_len):
    # vLLM of Dec 2024 (the case's logs): chunked prefill off -> max_num_batched_tokens =
    # max_model_len; CUDA-graph memory was not subtracted from the KV budget before v0.21.
    return InferenceWorkload(
        context_length=max_model_len,
        max_num_batched_tokens=max_model_len,
        gpu_memory_utilization=0.9,
        cuda_graphs=False,
    )


def test_activation_peak_per_batched_token_matches_the_vllm_log():
    """Llama-3.1-8B: 2 B x (2 x 4096 + 3 x 14336) = 102,400 B per token; at 29,000 tokens plus
    the sampler's 256 x 128,256 x 8 B this is 3.01 GiB (the log says 2.99 GiB)."""
    a = arch("meta-llama--Llama-3.1-8B")
    assert forward_bytes_per_token(a, 2) == 2 * (2 * 4096 + 3 * 14336)
    peak = 29_000 * 102_400 + sampler_bytes(256, 128_256)
    assert peak / GIB == pytest.approx(2.99, rel=0.02)
    b = estimate_memory(a, _b09(29_000), ParallelPlan(), capacity_bytes=RTX3090)
    assert b.activations_bytes == peak


def test_b09_kind_requested_context_must_fit_the_kv_pool():
    """B09 (vllm#10517): RTX 3090, utilization 0.90: the KV room is 0.9 x 23.58 - 14.96 (weights)
    - activation peak - 0.35 (non-torch). 29,000 tokens do not fit (room ~2.9 GiB = ~23.7k
    tokens of 128 KiB); 20,000 fit (~3.8 GiB = ~31k tokens); the weights fit in both."""
    a = arch("meta-llama--Llama-3.1-8B")
    expected = bug_case("B09")["expected"]
    no = kv_pool_check(a, _b09(29_000), ParallelPlan(), capacity_bytes=RTX3090)
    assert not no.fits
    assert no.pool_bytes / GIB == pytest.approx(expected["at_29000"]["kv_space_GiB"], rel=0.03)
    assert no.max_tokens == pytest.approx(expected["at_29000"]["max_tokens"], rel=0.03)
    assert no.required_bytes == 29_008 * 131_072  # 1,813 blocks of 16 tokens
    yes = kv_pool_check(a, _b09(20_000), ParallelPlan(), capacity_bytes=RTX3090)
    assert yes.fits
    assert yes.pool_bytes / GIB == pytest.approx(expected["at_20000"]["kv_space_GiB"], rel=0.03)
    assert yes.max_tokens == pytest.approx(expected["at_20000"]["max_tokens"], rel=0.03)
    # the full 131,072-token context needs 16 GiB of KV alone
    assert expected["full_context_kv_GiB"] == 131_072 * 131_072 / GIB


def test_requirement_is_never_the_reservation():
    a = arch("meta-llama--Llama-3.1-8B")
    w = InferenceWorkload(context_length=4096, concurrency=4)
    b = estimate_memory(a, w, ParallelPlan(), capacity_bytes=80 * GIB)
    assert b.engine_reserved_bytes == int(0.9 * 80 * GIB)
    assert b.total_bytes < b.engine_reserved_bytes  # the need is far below what vLLM grabs
    parts = b.weights_bytes + b.kv_cache_bytes + b.activations_bytes + b.overhead_bytes
    assert b.total_bytes == parts
    assert b.kv_pool_bytes == (
        b.engine_reserved_bytes
        - b.weights_bytes
        - b.activations_bytes
        - b.details["overhead.non_torch_bytes"]
        - b.details["overhead.cuda_graph_bytes"]
    )
    assert b.kv_cache_bytes <= b.kv_pool_bytes


def test_reservation_arithmetic():
    reserved_bytes, kv_pool_bytes = vllm_kv_pool(
        capacity_bytes=1000,
        gpu_memory_utilization=0.9,
        weights_bytes=500,
        activation_peak_bytes=100,
        non_torch_bytes=50,
        cuda_graph_bytes=25,
    )
    assert reserved_bytes == 900
    assert kv_pool_bytes == 900 - 500 - 100 - 50 - 25


def test_default_token_budget_depends_on_the_gpu():
    assert vllm_default_max_num_batched_tokens(80 * GIB) == 8192  # H100-class
    assert vllm_default_max_num_batched_tokens(24 * GIB) == 2048


def test_max_concurrency_is_pool_over_sequence_kv():
    """Llama-3.1-70B at TP=8 on 80 GB GPUs: concurrency = floor(pool / (8192 x 40,960 B))."""
    a = arch("meta-llama--Llama-3.1-70B")
    w = InferenceWorkload(context_length=8192)
    plan = ParallelPlan(tensor_parallel=8)
    cap = 81_559 * 2**20
    pool = estimate_memory(a, w, plan, capacity_bytes=cap).kv_pool_bytes
    assert pool is not None
    per_seq = 8192 * (2 * 80 * 1 * 128 * 2)
    assert max_concurrency(a, w, plan, capacity_bytes=cap) == pool // per_seq


def test_max_context_grows_past_the_window_for_sliding_models():
    """Mistral-7B-v0.1 caps every layer at 4,096 tokens: once the pool holds one window per
    layer, any context fits; Llama-3.1-8B (no window) stops at pool / 128 KiB."""
    cap = 24 * GIB
    mistral = max_context_length(
        arch("mistralai--Mistral-7B-v0.1"), InferenceWorkload(), ParallelPlan(), capacity_bytes=cap
    )
    assert mistral == 2**31  # capped search bound: the windowed cache never outgrows the pool
    llama = arch("meta-llama--Llama-3.1-8B")
    w = InferenceWorkload()
    pool = estimate_memory(llama, w, ParallelPlan(), capacity_bytes=cap).kv_pool_bytes
    assert pool is not None
    longest = max_context_length(llama, w, ParallelPlan(), capacity_bytes=cap)
    assert longest == (pool // 131_072) // 16 * 16  # whole 16-token blocks


def test_generic_engine_fits_the_whole_requirement():
    a = arch("meta-llama--Llama-3.1-8B")
    w = InferenceWorkload(engine="generic", context_length=4096, concurrency=8)
    b = estimate_memory(a, w, ParallelPlan(), capacity_bytes=40 * GIB)
    assert b.engine_reserved_bytes is None
    assert b.kv_cache_bytes == 8 * 4096 * 131_072
    # prefill of 8 prompts of 4096 - 256 tokens, plus last-position logits
    assert b.activations_bytes == 8 * 3840 * 102_400 + 8 * 128_256 * 8
    longest = max_context_length(a, w, ParallelPlan(), capacity_bytes=40 * GIB)
    over = estimate_memory(
        a,
        InferenceWorkload(engine="generic", context_length=longest + 1, concurrency=8),
        ParallelPlan(),
    )
    assert over.total_bytes > 40 * GIB
    fits = estimate_memory(
        a,
        InferenceWorkload(engine="generic", context_length=longest, concurrency=8),
        ParallelPlan(),
    )
    assert fits.total_bytes <= 40 * GIB


def test_capacity_class_follows_the_vllm_large_gpu_default():
    serve = InferenceWorkload()
    # vLLM's batch defaults change at 70 GiB (EngineArgs.get_batch_defaults)
    assert capacity_class(serve, 70 * GIB)
    assert capacity_class(serve, None)
    assert not capacity_class(serve, 70 * GIB - 1)
    # the generic engine and training never depend on the capacity
    assert capacity_class(InferenceWorkload(engine="generic"), 24 * GIB)
    assert capacity_class(TrainingWorkload(), 24 * GIB)


@pytest.mark.parametrize(
    ("first", "second"),
    [(80 * GIB, int(139.8 * GIB)), (int(22.4 * GIB), int(44.4 * GIB))],
)
def test_at_capacity_moves_only_the_reservation_and_headroom(first, second):
    a = arch("meta-llama--Llama-3.1-8B")
    w = InferenceWorkload(context_length=8192, concurrency=4, gpu_memory_utilization=0.9)
    plan = ParallelPlan(tensor_parallel=2)
    on_first = estimate_memory(a, w, plan, capacity_bytes=first)
    moved = at_capacity(on_first, w, second)
    assert moved == estimate_memory(a, w, plan, capacity_bytes=second)
    assert moved.total_bytes == on_first.total_bytes  # the requirement is the same
    # the reservation is 0.9 x capacity; everything it holds besides the KV pool is unchanged
    assert moved.engine_reserved_bytes == int(second * 0.9)
    assert moved.kv_pool_bytes - on_first.kv_pool_bytes == int(second * 0.9) - int(first * 0.9)
    assert moved.headroom_fraction == 1 - on_first.total_bytes / second


def test_at_capacity_refuses_another_capacity_class():
    a = arch("meta-llama--Llama-3.1-8B")
    w = InferenceWorkload()
    large = estimate_memory(a, w, ParallelPlan(), capacity_bytes=80 * GIB)
    # a 24 GB GPU gets vLLM's small batch defaults: its requirement differs, re-estimate it
    with pytest.raises(ValueError, match="capacity class"):
        at_capacity(large, w, 24 * 10**9)
    training = TrainingWorkload(method="qlora")
    need = estimate_memory(a, training, ParallelPlan())
    assert at_capacity(need, training, 24 * GIB) == estimate_memory(
        a, training, ParallelPlan(), capacity_bytes=24 * GIB
    )
