"""Activations: Korthikanti et al. 2022 Table 2 reproduced by the inventory, FlashAttention,
selective and full recomputation, TP + sequence parallel, PP in flight, MoE, gated MLPs, the
logits buffer and LoRA. Shapes from real configs; arithmetic written out."""

from __future__ import annotations

import msgspec
import pytest
from mem_data import GB, GIB, arch, arch_from, published_case

from gpu_advisor.core.memory import estimate_memory
from gpu_advisor.core.memory.activations import (
    ActivationSetup,
    LayerKind,
    Trainable,
    attention_score_bytes,
    korthikanti_layer_bytes,
    layer_activations,
    loss_bytes,
    stage_activations,
)
from gpu_advisor.core.memory.kernels import MEGATRON, kernels_for, norm_bytes_per_element
from gpu_advisor.core.results import ParallelPlan
from gpu_advisor.core.spec import TrainingWorkload

# GPT-2 XL (published case B01): 48 layers, h 1600, 25 heads, plain 4h GeLU MLP, s 1024, b 32.
S, B, H, A = 1024, 32, 1600, 25
SBH = S * B * H


def gpt2_xl():
    return arch_from("openai-community--gpt2", n_embd=1600, n_layer=48, n_head=25)


def megatron(**kw):
    defaults = {
        "sequence": S,
        "batch": B,
        "act_bytes": 2,
        "flash_attention": False,
        "kernels": MEGATRON,
    }
    return ActivationSetup(**(defaults | kw))


def test_korthikanti_formula_b01_value():
    per_layer = korthikanti_layer_bytes(sequence=S, batch=B, hidden=H, heads=A)
    assert per_layer == S * B * H * (34 + 5 * A * S // H) == 5_976_883_200
    assert 48 * per_layer / GB == pytest.approx(published_case("B01")["value"], rel=0.001)


def test_inventory_reproduces_korthikanti_34_plus_5as_over_h():
    layer = layer_activations(gpt2_xl(), megatron(), LayerKind())
    assert layer.total == SBH * 34 + 5 * A * S * S * B
    assert layer.attention_scores == 5 * A * S * S * B  # softmax 2 + mask 1 + dropout out 2
    assert layer.norms == 4 * SBH  # two LayerNorm inputs
    assert layer.ffn + layer.block_inputs // 2 == 19 * SBH - SBH  # 2 + 8 + 8 (mask counted apart)


def test_flash_attention_drops_the_score_term():
    layer = layer_activations(gpt2_xl(), megatron(flash_attention=True), LayerKind())
    lse = 4 * S * B * A  # fp32 log-sum-exp per query row and head
    assert layer.attention_scores == 0
    # Korthikanti's 34 sbh stays: Q, K, V and the output (8 sbh) are what FlashAttention keeps
    assert layer.total == 34 * SBH + lse


def test_tensor_and_sequence_parallel_match_table_2():
    t = 5  # divides the 25 heads
    tp = layer_activations(gpt2_xl(), megatron(tensor_parallel=t), LayerKind())
    assert tp.total == korthikanti_layer_bytes(
        sequence=S, batch=B, hidden=H, heads=A, tensor_parallel=t
    )
    assert tp.total == 10 * SBH + 24 * SBH // t + 5 * A * S * S * B // t
    tp_sp = layer_activations(
        gpt2_xl(), megatron(tensor_parallel=t, sequence_parallel=True), LayerKind()
    )
    assert tp_sp.total == 34 * SBH // t + 5 * A * S * S * B // t


def test_selective_recompute_matches_table_2():
    t = 5
    sel = layer_activations(
        gpt2_xl(), megatron(tensor_parallel=t, recompute="selective"), LayerKind()
    )
    assert sel.total == korthikanti_layer_bytes(
        sequence=S, batch=B, hidden=H, heads=A, tensor_parallel=t, recompute="selective"
    )
    assert sel.total == 10 * SBH + 24 * SBH // t


def test_b03_full_recompute_keeps_2sbh_per_layer():
    """B03 (Transformer Math 101): 2 x s x b x h x L = 2 x 1024 x 32 x 1600 x 48 = 5.03e9 B."""
    a = gpt2_xl()
    st = stage_activations(
        a,
        megatron(recompute="full"),
        layers=[(LayerKind(), 48)],
        first_stage=False,
        last_stage=False,
    )
    assert st.layers == 2 * SBH * 48
    assert st.layers / GB == pytest.approx(published_case("B03")["value"], rel=0.002)
    # plus one layer's working set while it is recomputed
    assert st.recompute_working_set == 34 * SBH + 5 * A * S * S * B


def test_b09_attention_scores_of_one_layer():
    """B09 (von Platen): 40 heads x 2 B x 16000^2 = 20.48e9 B = 19.07 GiB."""
    got = attention_score_bytes(heads=40, sequence=16000, batch=1, element_bytes=2)
    assert got == 40 * 2 * 16000**2
    assert got / GIB == pytest.approx(published_case("B09")["value"], rel=0.01)


def test_gated_mlp_keeps_four_intermediate_tensors():
    """Llama-3.1-8B, bf16, HF profile: FFN input 2Th + gate, up, SiLU and product 4 x 2Tf."""
    a = arch("meta-llama--Llama-3.1-8B")
    setup = ActivationSetup(
        sequence=512, batch=1, act_bytes=2, flash_attention=True, kernels=kernels_for("llama")
    )
    layer = layer_activations(a, setup, LayerKind())
    tokens = 512
    assert layer.ffn == 4 * 2 * tokens * 14336
    # norms: Llama RMSNorm keeps an fp32 copy and the bf16 normalised tensor (4 + 2 B)
    assert layer.norms == 2 * (4 + 2) * tokens * 4096
    # attention: Q (32 x 128), K and V (8 x 128 each), output, fp32 log-sum-exp
    assert layer.attention == 2 * tokens * (4096 + 2 * 1024 + 4096) + 4 * tokens * 32
    assert layer.block_inputs == 2 * 2 * tokens * 4096  # QKV input and FFN input


def test_moe_ffn_scales_with_experts_per_token():
    """Mixtral-8x7B: each token visits k of 8 experts; going from k=2 to k=1 removes one slot:
    4 x 2 B x f (expert intermediates) + 2 x 2 B x h (gathered input, expert output) +
    41 B of dispatch bookkeeping per token."""
    a2 = arch("mistralai--Mixtral-8x7B-v0.1")
    a1 = msgspec.structs.replace(a2, num_experts_per_token=1)
    setup = ActivationSetup(
        sequence=256, batch=2, act_bytes=2, flash_attention=True, kernels=kernels_for("mixtral")
    )
    moe = LayerKind(moe=True)
    two = layer_activations(a2, setup, moe)
    one = layer_activations(a1, setup, moe)
    tokens = 512
    per_slot = 4 * 2 * 14336 + 2 * 2 * 4096
    assert two.ffn - one.ffn == tokens * per_slot
    assert two.router - one.router == tokens * 41
    # router probabilities: fp32 over 8 experts + the fp32 normalising sum
    assert one.router == tokens * (4 * 8 + 4) + tokens * 41


def test_norm_implementations():
    assert norm_bytes_per_element("fused", 2) == 2
    assert norm_bytes_per_element("rms_upcast", 2) == 6  # fp32 copy + bf16 normalised
    assert norm_bytes_per_element("rms_upcast", 4) == 8
    assert norm_bytes_per_element("rms_fp32", 2) == 8  # Gemma keeps both in fp32
    assert norm_bytes_per_element("rms_t5", 2) == 4 + 2 + 2


def test_logits_buffer_is_fp32_and_dominates_for_large_vocabularies():
    tokens, vocab = 2048, 128256
    saved, transient = loss_bytes(tokens, vocab, 2)
    assert saved == 4 * tokens * vocab  # fp32 log-probabilities (transformers ForCausalLMLoss)
    assert transient == (2 + 4 + 4) * tokens * vocab  # bf16 logits + two fp32 gradients
    a = arch("meta-llama--Llama-3.1-8B")
    b = estimate_memory(
        a,
        TrainingWorkload(sequence_length=2048, gradient_checkpointing="full"),
        ParallelPlan(),
    )
    assert b.details["activations.logits_buffer_bytes"] == 14 * tokens * vocab
    assert b.details["activations.logits_buffer_bytes"] > 0.7 * b.activations_bytes


def test_pipeline_first_stage_holds_pp_micro_batches():
    """1F1B: the first of 4 stages keeps 4 micro-batches, the last keeps 1."""
    a = arch("meta-llama--Llama-3.1-8B")
    w = TrainingWorkload(sequence_length=1024, global_batch_size=64)
    plan = ParallelPlan(
        tensor_parallel=2, pipeline_parallel=4, data_parallel=2, sequence_parallel=True
    )
    b = estimate_memory(a, w, plan)
    assert b.details["pipeline_stage"] == 0
    assert b.details["activations.micro_batches_in_flight"] == 4
    # eight layers x four micro-batches of the fused profile (no dropout: Llama trains without
    # it), plus the embedding's int64 token ids
    setup = ActivationSetup(
        sequence=1024,
        batch=1,
        act_bytes=2,
        flash_attention=True,
        kernels=msgspec.structs.replace(MEGATRON, dropout=False),
        tensor_parallel=2,
        sequence_parallel=True,
    )
    per_layer = layer_activations(a, setup, LayerKind()).total
    assert b.details["activations.saved_bytes"] == 4 * (8 * per_layer + 8 * 1024)


def test_lora_frozen_linears_keep_no_inputs():
    """LoRA on q_proj/v_proj only: o_proj, gate/up/down are frozen, so the FFN input and the
    product are not saved; the adapters keep their rank-r intermediates (2 x T x r each)."""
    a = arch("meta-llama--Llama-3.1-8B")
    base = {
        "sequence": 512,
        "batch": 1,
        "act_bytes": 2,
        "flash_attention": True,
        "kernels": kernels_for("llama"),
    }
    full = layer_activations(a, ActivationSetup(**base), LayerKind())
    lora = layer_activations(
        a,
        ActivationSetup(
            **base,
            trainable=Trainable(
                all_linear=False,
                names=frozenset({"q_proj", "v_proj"}),
                lora_rank=16,
                head=False,
                router=False,
            ),
        ),
        LayerKind(),
    )
    tokens = 512
    assert full.block_inputs - lora.block_inputs == 2 * tokens * 4096  # FFN input
    assert full.ffn - lora.ffn == 2 * tokens * 14336  # the down projection's input
    assert lora.lora == 2 * (2 * tokens * 16)


def test_megatron_profile_for_tp_plans_keeps_the_models_dropout():
    from gpu_advisor.core.memory.training import activation_kernels

    tp2 = ParallelPlan(tensor_parallel=2)
    assert activation_kernels(arch("openai-community--gpt2"), tp2).dropout  # GPT-2 trains with 0.1
    assert not activation_kernels(arch("meta-llama--Llama-3.1-8B"), tp2).dropout
    assert activation_kernels(arch("meta-llama--Llama-3.1-8B"), tp2).norm == "fused"
    assert activation_kernels(arch("meta-llama--Llama-3.1-8B"), ParallelPlan()).name == "hf-llama"
