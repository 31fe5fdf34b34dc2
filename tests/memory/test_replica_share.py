"""Serving ``concurrency`` counts the whole deployment's sequences: each of a plan's
``data_parallel`` replicas holds ``ceil(concurrency / data_parallel)`` of them, and one GPU's
KV cache and prefill activations are sized for that share (QA finding 2: 400 sequences on six
one-GPU replicas were sized as 400 on every GPU)."""

from __future__ import annotations

from mem_data import GIB, arch

from gpu_advisor.core.memory import estimate_memory, max_concurrency, max_context_length
from gpu_advisor.core.results import ParallelPlan
from gpu_advisor.core.spec import InferenceWorkload

H100 = 81_559 * 2**20
LLAMA_8B_KV_PER_TOKEN = 2 * 32 * 8 * 128 * 2  # 2 (K, V) x layers x KV heads x head_dim x bf16


def test_each_gpu_holds_its_replicas_share_of_the_kv_cache() -> None:
    a = arch("meta-llama--Llama-3.1-8B")
    w = InferenceWorkload(context_length=4096, concurrency=400)
    six = estimate_memory(a, w, ParallelPlan(data_parallel=6), capacity_bytes=H100)
    # ceil(400 / 6) = 67 sequences x 4,096 tokens x 131,072 B = 33.5 GiB, not 400 x 0.5 GiB
    assert six.kv_cache_bytes == 67 * 4096 * LLAMA_8B_KV_PER_TOKEN
    assert six.details["kv_cache.sequences"] == 67
    one = estimate_memory(a, w, ParallelPlan(), capacity_bytes=H100)
    assert one.kv_cache_bytes == 400 * 4096 * LLAMA_8B_KV_PER_TOKEN == 200 * GIB
    # the other terms do not depend on the share
    assert six.weights_bytes == one.weights_bytes
    assert six.total_bytes - six.kv_cache_bytes == one.total_bytes - one.kv_cache_bytes
    assert six.total_bytes <= H100 < one.total_bytes


def test_generic_engine_prefills_only_the_replicas_share() -> None:
    a = arch("meta-llama--Llama-3.1-8B")
    w = InferenceWorkload(engine="generic", context_length=4096, concurrency=8)
    two = estimate_memory(a, w, ParallelPlan(data_parallel=2))
    # 4 prompts of 4,096 - 256 = 3,840 tokens x 102,400 B (2 x (2 x 4096 + 3 x 14336)), plus
    # 4 x vocab 128,256 x 8 B of last-position logits (see test_engine)
    assert two.activations_bytes == 4 * 3840 * 102_400 + 4 * 128_256 * 8
    assert two.kv_cache_bytes == 4 * 4096 * LLAMA_8B_KV_PER_TOKEN


def test_limits_count_every_replica() -> None:
    a = arch("meta-llama--Llama-3.1-8B")
    w = InferenceWorkload(context_length=8192, concurrency=16)
    single = max_concurrency(a, w, ParallelPlan(), capacity_bytes=H100)
    # four replicas hold four times what one does
    assert max_concurrency(a, w, ParallelPlan(data_parallel=4), capacity_bytes=H100) == 4 * single
    # 16 sequences over 2 replicas: each holds 8, as one replica serving 8
    shared = max_context_length(a, w, ParallelPlan(data_parallel=2), capacity_bytes=H100)
    alone = max_context_length(a, w, ParallelPlan(), capacity_bytes=H100, concurrency=8)
    assert shared == alone


def test_an_encoder_reads_its_whole_context() -> None:
    # bert-base-uncased generates nothing: the generic engine's prefill is the whole 512-token
    # context of each of 4 sequences (output_tokens does not apply), no logits are sampled:
    # 4 x 512 x 2 B x (2 x 768 + 2 x 3072) (plain FFN) = 31,457,280 B.
    a = arch("google-bert--bert-base-uncased")
    w = InferenceWorkload(engine="generic", context_length=512, concurrency=4)
    memory = estimate_memory(a, w, ParallelPlan())
    assert memory.activations_bytes == 4 * 512 * 2 * (2 * 768 + 2 * 3072) == 31_457_280
    assert memory.kv_cache_bytes == 0
