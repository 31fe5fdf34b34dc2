"""Weights by dtype and format: bits per weight with their constants, which modules a format
covers, shipped checkpoint formats, MoE total parameters and tensor-parallel sharding.

Every expected value is a hand calculation written out from the real config's shapes or a
published figure.
"""

from __future__ import annotations

from fractions import Fraction

import pytest
from mem_data import GB, GIB, arch, arch_from, bug_case

from gpu_advisor.core.errors import InvalidSpecError
from gpu_advisor.core.memory import estimate_memory
from gpu_advisor.core.memory.formats import (
    INT4,
    MXFP4,
    NF4,
    NF4_SINGLE,
    Q4_K_M,
    Q8_0,
    elements_bytes,
    matrix_bytes,
    weight_format,
)
from gpu_advisor.core.results import ParallelPlan
from gpu_advisor.core.spec import InferenceWorkload

# Llama-3.1-70B (config.json): h 8192, 80 layers, 64 heads, 8 KV heads x 128, FFN 28672, vocab
# 128256, untied head.
L70_LINEAR_PER_LAYER = 2 * 8192 * 8192 + 2 * 8192 * 1024 + 3 * 8192 * 28672  # q,o + k,v + mlp
L70_LINEAR = 80 * L70_LINEAR_PER_LAYER
L70_EMBED_AND_HEAD = 2 * 128256 * 8192
L70_NORMS = 80 * 2 * 8192 + 8192
L70_ROWS = 80 * (8192 + 1024 + 1024 + 8192 + 28672 + 28672 + 8192)  # output channels


def _weights(a, dtype, plan=None):
    workload = InferenceWorkload(weight_dtype=dtype, context_length=16)
    return estimate_memory(a, workload, plan or ParallelPlan())


def test_bits_per_weight_constants():
    # NF4 + double quantisation: 4 + 8/64 + 32/(64*256) (QLoRA paper, section 3)
    assert Fraction(NF4.bits_per_weight) == 4 + Fraction(8, 64) + Fraction(32, 64 * 256)
    assert round(NF4.bits_per_weight, 3) == 4.127
    assert NF4_SINGLE.bits_per_weight == 4 + 32 / 64  # 4.5: bitsandbytes default (no double quant)
    assert INT4.bits_per_weight == 4 + 32 / 128  # fp16 scale + 16-bit zero per 128 weights
    assert MXFP4.bits_per_weight == 4 + 8 / 32  # one E8M0 scale per 32 FP4 values
    assert Q8_0.bits_per_weight == (32 * 8 + 16) / 32  # 34-byte block of 32 weights
    assert Q4_K_M.bits_per_weight == 4.84  # llama.cpp quantize README, Llama-2-7B
    assert Q4_K_M.covers_embeddings
    assert not NF4.covers_embeddings


def test_matrix_bytes_int8_has_a_scale_per_output_channel():
    int8 = weight_format("int8")
    assert matrix_bytes(4096, 4096, int8) == 4096 * 4096 * 1 + 4096 * 4  # data + fp32 row scales
    assert matrix_bytes(4096, 4096, int8, copies=3) == 3 * (4096 * 4096 + 4096 * 4)


def test_unknown_dtype_names_the_field():
    with pytest.raises(InvalidSpecError) as err:
        weight_format("int3")
    assert err.value.field == "workload.weight_dtype"


def test_b01_kind_dtype_rows_follow_the_requested_dtype_not_the_config_dtype():
    """B01 (accelerate#3379): every row halved. Llama-3.1-70B declares torch_dtype bfloat16;
    fp32 must be 4 B/param and fp16 2 B/param of all 70,553,706,496 parameters."""
    a = arch("meta-llama--Llama-3.1-70B")
    total = L70_LINEAR + L70_EMBED_AND_HEAD + L70_NORMS
    assert total == 70_553_706_496
    assert _weights(a, "fp32").weights_bytes == 4 * total  # 282.2 GB
    fp16 = _weights(a, "fp16").weights_bytes
    assert fp16 == 2 * total
    assert fp16 / GIB == pytest.approx(131.4, abs=0.05)  # the case's 131.4 GiB, not ~65
    case = bug_case("B01")["expected"]
    assert fp16 / GB == pytest.approx(case["fp16_GB"], rel=0.01)
    assert _weights(a, "fp32").weights_bytes / GB == pytest.approx(case["fp32_GB"], rel=0.01)


def test_b01_kind_int8_and_int4_keep_embeddings_16_bit_and_add_constants():
    a = arch("meta-llama--Llama-3.1-70B")
    int8 = L70_LINEAR * 1 + L70_ROWS * 4 + L70_EMBED_AND_HEAD * 2 + L70_NORMS * 2
    assert _weights(a, "int8").weights_bytes == int8
    int4 = L70_LINEAR * 425 // 800 + L70_EMBED_AND_HEAD * 2 + L70_NORMS * 2  # 4.25 bits
    assert _weights(a, "int4").weights_bytes == int4
    # above the case's "35.3 GB before constants", by the constants and 16-bit embeddings
    assert int4 / GB == pytest.approx(40.57, abs=0.01)
    assert int4 > bug_case("B01")["expected"]["int4_GB_before_constants"] * GB


def test_b14_kind_4bit_model_keeps_all_its_parameters():
    """B14 (transformers#25978): packed 4-bit weights counted as half the parameters.
    Llama-2-13B shapes (40 layers, h 5120, FFN 13824) on the real Llama-2 config file, NF4 with
    double quantisation; embeddings and head stay 16-bit."""
    a = arch_from(
        "meta-llama--Llama-2-7b-hf",
        hidden_size=5120,
        intermediate_size=13824,
        num_hidden_layers=40,
        num_attention_heads=40,
        num_key_value_heads=40,
    )
    linear = 40 * (4 * 5120 * 5120 + 3 * 5120 * 13824)
    embed_head = 2 * 32000 * 5120
    norms = 40 * 2 * 5120 + 5120
    assert a.parameters.total == linear + embed_head + norms == 13_015_864_320
    breakdown = _weights(a, "nf4")
    assert breakdown.details["parameters_on_gpu"] == 13_015_864_320  # not ~6.5e9
    nf4_bytes = Fraction(linear) * (4 + Fraction(8, 64) + Fraction(32, 16384)) / 8
    expected = -(-nf4_bytes.numerator // nf4_bytes.denominator) + (embed_head + norms) * 2
    assert breakdown.weights_bytes == expected
    case = bug_case("B14")["expected"]
    assert breakdown.weights_bytes / GB == pytest.approx(case["weights_GB_double_quant"], rel=0.02)
    # and never the "half the parameters" reading: 13.0e9 / 2 params x 0.5 B
    assert breakdown.weights_bytes > 2 * (13_015_864_320 // 2) * 0.5


def test_b02_kind_moe_weights_use_total_parameters():
    """B02 (llmfit#230): Mixtral-8x7B sized by its 12.9B active parameters. All 8 experts are
    resident: 46,702,792,704 x 2 B = 93.4 GB, which does not fit one 80 GB GPU."""
    a = arch("mistralai--Mixtral-8x7B-v0.1")
    experts = 32 * 8 * 3 * 4096 * 14336  # layers x experts x (w1,w2,w3) x h x f
    attention = 32 * (2 * 4096 * 4096 + 2 * 4096 * 1024)
    embed_head = 2 * 32000 * 4096
    routers_norms = 32 * (8 * 4096 + 2 * 4096) + 4096
    total = experts + attention + embed_head + routers_norms
    assert total == 46_702_792_704
    b = estimate_memory(
        a, InferenceWorkload(weight_dtype="bf16"), ParallelPlan(), capacity_bytes=80 * GIB
    )
    assert b.weights_bytes == 2 * total
    assert b.weights_bytes / GB == pytest.approx(
        bug_case("B02")["expected"]["mixtral_bf16_weights_GB"], rel=0.01
    )
    assert b.total_bytes > b.capacity_bytes  # does not fit one 80 GB GPU
    assert a.parameters.active < total / 3  # active params drive FLOPs only


def test_shipped_formats_size_the_checkpoint_as_shipped():
    """gpt-oss ships its routed experts in MXFP4 (4.25 bits); everything else bf16. Without a
    requested dtype the weights are the shipped checkpoint; with bf16 requested, 2 B/param."""
    a = arch("openai--gpt-oss-20b")
    p = a.parameters
    experts = 24 * 32 * (2880 * 5760 + 2880 * 2880)  # layers x experts x (gate_up, down)
    expert_biases = 24 * 32 * (5760 + 2880)
    assert p.routed_expert == experts + expert_biases
    shipped = estimate_memory(a, InferenceWorkload(), ParallelPlan())
    mx = Fraction(experts) * Fraction(425, 100) / 8
    rest = p.total - experts  # non-expert params and expert biases in bf16
    assert shipped.weights_bytes == -(-mx.numerator // mx.denominator) + 2 * rest
    assert shipped.weights_bytes / GB == pytest.approx(13.8, abs=0.1)  # ~13 GB checkpoint
    assert _weights(a, "bf16").weights_bytes == 2 * p.total


def test_deepseek_v3_ships_fp8_with_block_scales():
    a = arch("deepseek-ai--DeepSeek-V3")
    p = a.parameters
    linear_weights = p.linear - 0  # MLA and experts, no biases in DeepSeek-V3
    b = estimate_memory(a, InferenceWorkload(), ParallelPlan())
    fp8 = Fraction(linear_weights) * (8 + Fraction(32, 128 * 128)) / 8
    rest = 2 * (p.embedding + p.lm_head + p.other)
    assert b.weights_bytes == -(-fp8.numerator // fp8.denominator) + rest
    assert b.weights_bytes / GB == pytest.approx(673.3, abs=0.5)  # ~ the 671B fp8 checkpoint


def test_gguf_formats_cover_embeddings_too():
    a = arch("meta-llama--Llama-2-7b-hf")
    p = a.parameters
    b = _weights(a, "q8_0")
    expected = elements_bytes(p.linear, Q8_0) + elements_bytes(p.embedding + p.lm_head, Q8_0)
    assert b.weights_bytes == expected + 2 * p.other  # norms stay floating point
    assert b.weights_bytes / GB == pytest.approx(6_738_415_616 * 8.5 / 8 / 1e9, rel=0.001)


def test_b08_kind_weights_shard_by_tensor_parallel_with_kv_replicated():
    """B08: Llama-3.1-70B at TP=8 holds 1/8 of everything; at TP=16 the 8 KV heads cannot be
    split 16 ways, so each rank keeps one whole K and V head (2 x 8192 x 128 per layer)."""
    a = arch("meta-llama--Llama-3.1-70B")
    tp8 = _weights(a, "bf16", ParallelPlan(tensor_parallel=8))
    per_rank_linear = L70_LINEAR // 8
    assert tp8.details["weights.linear_bytes"] == 2 * per_rank_linear
    assert tp8.weights_bytes == 2 * (per_rank_linear + L70_EMBED_AND_HEAD // 8) + 2 * L70_NORMS
    assert tp8.weights_bytes / GB == pytest.approx(17.6, abs=0.05)  # the case's 17.6 GB
    tp16 = _weights(a, "bf16", ParallelPlan(tensor_parallel=16))
    q_o_mlp = 80 * (2 * 8192 * 8192 + 3 * 8192 * 28672) // 16
    kv = 80 * 2 * 8192 * 128  # one whole K head and one V head per rank
    assert tp16.details["weights.linear_bytes"] == 2 * (q_o_mlp + kv)
    assert tp16.weights_bytes / GB == pytest.approx(8.8, rel=0.03)  # case: "8.8 GB/GPU"
