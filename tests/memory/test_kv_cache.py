"""KV cache: KV heads (GQA/MQA), MLA latents, sliding and hybrid windows, TP replication,
cross-attention; each fault kind from a real config with the arithmetic written out."""

from __future__ import annotations

import pytest
from mem_data import GIB, arch, bug_case, published_case

from gpu_advisor.core.memory import estimate_memory
from gpu_advisor.core.memory.kv_cache import (
    cached_tokens,
    cross_attention_kv_bytes,
    kv_bytes_per_token_per_layer,
    kv_cache_bytes,
    kv_cache_bytes_per_token,
    kv_heads_per_gpu,
    layer_token_capacity,
    mla_bytes_per_token_per_layer,
)
from gpu_advisor.core.results import ParallelPlan
from gpu_advisor.core.spec import InferenceWorkload


def test_term_functions():
    assert kv_bytes_per_token_per_layer(8, 128, 2) == 2 * 8 * 128 * 2
    assert mla_bytes_per_token_per_layer(512, 64, 2) == (512 + 64) * 2
    assert kv_heads_per_gpu(8, 4) == 2
    assert kv_heads_per_gpu(8, 8) == 1
    assert kv_heads_per_gpu(8, 16) == 1  # replicated, not 0.5
    assert layer_token_capacity(4096, 32768) == 4096
    assert layer_token_capacity(None, 32768) == 32768
    assert layer_token_capacity(4096, 100) == 100


def test_b03_kind_gqa_uses_kv_heads_not_attention_heads():
    """B03 (vllm#29736): Llama-3-8B, bf16 KV, 8 sequences x 8192 tokens: 2 x 32 layers x 8 KV
    heads x 128 x 2 B = 131,072 B/token -> 8 GiB, not the 32 GiB of 32 attention heads."""
    a = arch("meta-llama--Llama-3.1-8B")
    per_token = 2 * 32 * 8 * 128 * 2
    assert kv_cache_bytes_per_token(a, element_bytes=2) == per_token == 131_072
    total = kv_cache_bytes(a, context_tokens=8192, sequences=8, element_bytes=2)
    assert total == 8 * 8192 * per_token
    assert total / GIB == bug_case("B03")["expected"]["kv_total_GiB"]
    mha = 2 * 32 * 32 * 128 * 2 * 8 * 8192
    assert mha / GIB == bug_case("B03")["expected"]["wrong_mha_formula_GiB"]


def test_mqa_falcon_caches_one_kv_head():
    a = arch("tiiuae--falcon-7b")  # multi_query: true -> 1 KV head of 64
    assert kv_cache_bytes_per_token(a, element_bytes=2) == 2 * 32 * 1 * 64 * 2


def test_b05_kind_mla_caches_the_latent_once():
    """B05 (TensorRT-LLM#16707): DeepSeek-V3 caches (kv_lora_rank 512 + rope 64) x 2 B per layer:
    61 x 576 x 2 = 70,272 B/token; 2.14 GiB per 32k sequence; 46 sequences in 100 GiB."""
    a = arch("deepseek-ai--DeepSeek-V3")
    expected = bug_case("B05")["expected"]
    assert kv_cache_bytes_per_token(a, element_bytes=2) == 61 * (512 + 64) * 2 == 70_272
    one = kv_cache_bytes(a, context_tokens=32768, sequences=1, element_bytes=2)
    assert one == 70_272 * 32768
    assert one / GIB == pytest.approx(expected["kv_32k_GiB"], abs=0.005)
    assert (100 * GIB) // one == expected["sequences_in_100GiB"]
    # the generic per-head formula with the config's 128 KV heads x (7168/128) is ~25x more
    assert expected["wrong_generic_bytes_per_token"] == 2 * 61 * 128 * 56 * 2
    # MLA's latent has no heads: TP=8 does not shrink it
    assert kv_cache_bytes_per_token(a, element_bytes=2, tensor_parallel=8) == 70_272


def test_b07_kind_sliding_window_layers_hold_the_window():
    """B07 (whichllm#124): Gemma-3-27B at 131,072 tokens: 10 global layers hold the context,
    52 sliding layers hold 1,024 tokens: 8,192 B per layer-token ->
    10 x 8192 x 131072 + 52 x 8192 x 1024 = 10.4 GiB, not 62 GiB."""
    a = arch("google--gemma-3-27b-it")
    windows = a.layer_windows
    assert windows.count(None) == 10
    assert windows.count(1024) == 52
    per_layer_token = 2 * 16 * 128 * 2
    expected = 10 * per_layer_token * 131072 + 52 * per_layer_token * 1024
    got = kv_cache_bytes(a, context_tokens=131072, sequences=1, element_bytes=2)
    assert got == expected
    assert got / GIB == pytest.approx(bug_case("B07")["expected"]["kv_GiB"], abs=0.05)
    naive = 62 * per_layer_token * 131072
    assert naive / GIB == pytest.approx(bug_case("B07")["expected"]["naive_all_full_GiB"], abs=0.05)


def test_cached_tokens_of_a_pipeline_stage():
    """Tokens one sequence caches in a stage's layers: Llama-3.1-8B (32 full layers) at 8,192
    tokens, layers [8, 16): 8 x 8,192 = 65,536; Gemma-3-27B (a full layer every 6th: layers
    5, 11, ...; 1,024-token windows elsewhere), layers [0, 12): 2 x 8,192 + 10 x 1,024 =
    26,624; a range past the last layer counts only the layers there are."""
    llama = arch("meta-llama--Llama-3.1-8B")
    assert cached_tokens(llama, 8192, (8, 16)) == 8 * 8192 == 65_536
    assert cached_tokens(llama, 8192, (24, 40)) == 8 * 8192
    assert cached_tokens(llama, 8192, (0, 0)) == 0
    gemma = arch("google--gemma-3-27b-it")
    assert gemma.layer_windows[5] is None
    assert gemma.layer_windows[11] is None
    assert cached_tokens(gemma, 8192, (0, 12)) == 2 * 8192 + 10 * 1024 == 26_624


def test_d07_mistral_rolling_buffer_is_8x_smaller_at_32k():
    """D07 (Mistral 7B paper section 2): W = 4096, 32k tokens -> 8x; 4.00 GiB full vs 0.50 GiB."""
    a = arch("mistralai--Mistral-7B-v0.1")
    windowed = kv_cache_bytes(a, context_tokens=32768, sequences=1, element_bytes=2)
    full = 32 * 2 * 8 * 128 * 2 * 32768
    assert full / GIB == 4.0
    assert windowed == 32 * 2 * 8 * 128 * 2 * 4096
    assert full // windowed == published_case("D07")["value"]


def test_hybrid_gpt_oss_counts_both_layer_kinds():
    """gpt-oss-20b alternates 128-token sliding and full layers (layer_types): 12 + 12 layers of
    2 x 8 x 64 x 2 B per token."""
    a = arch("openai--gpt-oss-20b")
    per_layer_token = 2 * 8 * 64 * 2
    got = kv_cache_bytes(a, context_tokens=10_000, sequences=2, element_bytes=2)
    assert got == 2 * per_layer_token * (12 * 10_000 + 12 * 128)


def test_b08_kind_kv_per_gpu_stops_shrinking_past_the_kv_heads():
    """B08 (transformers#48566): Llama-3.1-70B, 8 KV heads. Whole model 320 KiB/token; TP=8:
    40 KiB/token/GPU; TP=16: still 40 KiB (each head on two GPUs), not 20."""
    a = arch("meta-llama--Llama-3.1-70B")
    assert kv_cache_bytes_per_token(a, element_bytes=2) == 2 * 80 * 8 * 128 * 2 == 320 * 1024
    expected = bug_case("B08")["expected"]
    for tp in (8, 16):
        b = estimate_memory(
            a,
            InferenceWorkload(context_length=1024, concurrency=1),
            ParallelPlan(tensor_parallel=tp),
        )
        per_token = b.details["kv_cache.bytes_per_token"]
        assert per_token == 2 * 80 * 1 * 128 * 2
        assert per_token / 1024 == expected[f"tp{tp}"]["kv_KiB_per_token_per_gpu"]
        assert b.kv_cache_bytes == per_token * 1024


def test_kv_dtype_and_concurrency_scale_the_cache():
    a = arch("meta-llama--Llama-3.1-8B")
    fp8 = estimate_memory(
        a,
        InferenceWorkload(context_length=4096, concurrency=16, kv_cache_dtype="fp8"),
        ParallelPlan(),
    )
    assert fp8.kv_cache_bytes == 2 * 32 * 8 * 128 * 1 * 4096 * 16


def test_t5_caches_cross_attention_over_the_encoder_output():
    a = arch("google-t5--t5-base")
    assert cross_attention_kv_bytes(a, encoder_tokens=512, sequences=2, element_bytes=2) == (
        12 * 2 * 12 * 64 * 2 * 512 * 2
    )
    assert (
        cross_attention_kv_bytes(
            arch("meta-llama--Llama-3.1-8B"), encoder_tokens=512, sequences=1, element_bytes=2
        )
        == 0
    )


def test_encoder_only_models_cache_nothing():
    a = arch("google-bert--bert-base-uncased")
    assert kv_cache_bytes(a, context_tokens=512, sequences=4, element_bytes=2) == 0


def test_t5_serving_counts_self_and_cross_attention_caches():
    """T5-base, generic engine, 2 sequences, context 512 of which 256 prompt tokens (the encoder
    input): decoder self-attention holds 512 tokens, cross-attention the 256 encoder tokens;
    12 decoder layers x 2 x 12 heads x 64 x 2 B each."""
    a = arch("google-t5--t5-base")
    b = estimate_memory(
        a,
        InferenceWorkload(engine="generic", context_length=512, prompt_tokens=256, concurrency=2),
        ParallelPlan(),
    )
    per_layer_token = 2 * 12 * 64 * 2
    assert b.kv_cache_bytes == 12 * per_layer_token * (512 + 256) * 2
