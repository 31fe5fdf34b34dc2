"""Llama / Mistral / Mixtral / Qwen2 / Qwen3 / Qwen3-MoE / Phi-3 configs: exact parameter counts,
linear modules and sliding windows from the real files in shared/data/hf-configs.

Every expected number is a published figure or a hand calculation written out below from the
config's shapes (DESIGN "Parameters").
"""

from __future__ import annotations

import pytest
from hf_data import bug_case, load_hf_config, published_case

from gpu_advisor.core.models import parse_hf_config


def _linear(arch, name, expert="dense"):
    (module,) = [m for m in arch.linears if m.name == name and m.expert == expert]
    return module


def test_llama_31_8b_total_by_hand_and_published():
    arch = parse_hf_config(load_hf_config("meta-llama--Llama-3.1-8B"))
    embed = 128256 * 4096  # vocab x hidden
    attention = 4096 * 4096 + 2 * 4096 * (8 * 128) + 4096 * 4096  # q, k+v (8 KV heads), o
    mlp = 3 * 4096 * 14336  # gate, up, down
    norms = 2 * 4096  # input + post-attention RMSNorm
    total = 2 * embed + 32 * (attention + mlp + norms) + 4096  # untied head, final norm
    assert total == 8_030_261_248  # keras-hub llama3.1_8b; DESIGN's example
    p = arch.parameters
    assert p.total == total
    assert p.embedding == embed
    assert p.lm_head == embed
    assert p.linear == 32 * (attention + mlp)
    assert p.other == 32 * norms + 4096
    assert p.active == p.total
    assert p.total == p.embedding + p.lm_head + p.linear + p.other
    assert arch.family == "llama"
    assert (arch.num_layers, arch.hidden_size, arch.num_attention_heads) == (32, 4096, 32)
    assert (arch.num_kv_heads, arch.head_dim, arch.intermediate_size) == (8, 128, 14336)
    assert arch.gated_mlp is True
    assert arch.tie_word_embeddings is False
    assert arch.max_position_embeddings == 131072
    assert arch.layer_windows == ()
    assert arch.torch_dtype == "bfloat16"
    assert arch.shipped_weight_format is None


def test_llama_31_8b_linear_modules_carry_lora_names_and_shapes():
    arch = parse_hf_config(load_hf_config("meta-llama--Llama-3.1-8B"))
    shapes = {m.name: (m.in_features, m.out_features, m.layers, m.attention) for m in arch.linears}
    assert shapes == {
        "q_proj": (4096, 32 * 128, 32, True),
        "k_proj": (4096, 8 * 128, 32, True),
        "v_proj": (4096, 8 * 128, 32, True),
        "o_proj": (32 * 128, 4096, 32, True),
        "gate_proj": (4096, 14336, 32, False),
        "up_proj": (4096, 14336, 32, False),
        "down_proj": (14336, 4096, 32, False),
    }
    assert not any(m.bias for m in arch.linears)


def test_f01_llama_2_7b_parameter_count():
    case = published_case("F01")
    arch = parse_hf_config(load_hf_config("meta-llama--Llama-2-7b-hf"))
    # MHA: 32 KV heads = 32 query heads; untied head; MLP 11008.
    per_layer = 4 * 4096 * 4096 + 3 * 4096 * 11008 + 2 * 4096
    expected = 2 * 32000 * 4096 + 32 * per_layer + 4096
    assert expected == 6_738_415_616
    assert arch.parameters.total == expected
    assert abs(arch.parameters.total - case["value"]) <= case["value"] * case["tolerance_pct"] / 100


def test_f03_llama_3_8b_parameter_count():
    case = published_case("F03")
    w = case["workload"]
    config = {
        "model_type": "llama",
        "vocab_size": w["vocab_size"],
        "hidden_size": w["hidden_size"],
        "intermediate_size": w["intermediate_size"],
        "num_hidden_layers": w["num_hidden_layers"],
        "num_attention_heads": w["num_attention_heads"],
        "num_key_value_heads": w["num_key_value_heads"],
        "tie_word_embeddings": w["tie_word_embeddings"],
        "max_position_embeddings": w["max_position_embeddings"],
    }
    # Same shapes as Llama-3.1-8B: 2 x 128256 x 4096 + 32 x 218,112,000 + 4096.
    expected = 2 * 128256 * 4096 + 32 * (41_943_040 + 176_160_768 + 8192) + 4096
    assert parse_hf_config(config).parameters.total == expected == case["value"]


def test_f05_mistral_7b_parameter_count_and_window():
    case = published_case("F05")
    arch = parse_hf_config(load_hf_config("mistralai--Mistral-7B-v0.1"))
    per_layer = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096
    expected = 2 * 32000 * 4096 + 32 * per_layer + 4096
    assert arch.parameters.total == expected == case["value"]
    # Mistral-7B-v0.1 declares sliding_window 4096 and applies it on every layer.
    assert arch.layer_windows == (4096,) * 32


def test_mistral_v03_has_no_window_and_a_larger_vocabulary():
    arch = parse_hf_config(load_hf_config("mistralai--Mistral-7B-v0.3"))
    assert arch.layer_windows == ()
    # v0.3 only grows the vocabulary 32000 -> 32768 (embedding and head).
    assert arch.parameters.total == 7_241_732_096 + 2 * (32768 - 32000) * 4096


def test_f07_mixtral_8x7b_total_and_active_parameters():
    """Fault kind "MoE sized by active parameters" (bug B02, case F07): all 8 experts are resident,
    2 are used per token."""
    case = published_case("F07")
    arch = parse_hf_config(load_hf_config("mistralai--Mixtral-8x7B-v0.1"))
    expert = 3 * 4096 * 14336  # w1, w3, w2 of one expert
    attention = 2 * 4096 * 4096 + 2 * 4096 * 1024
    router = 4096 * 8
    norms = 2 * 4096
    non_expert = 2 * 32000 * 4096 + 32 * (attention + router + norms) + 4096
    total = non_expert + 32 * 8 * expert
    active = non_expert + 32 * 2 * expert
    assert total == 46_702_792_704  # keras-hub mixtral_8_7b_en
    assert arch.parameters.total == total
    assert arch.parameters.active == active
    assert arch.parameters.routed_expert == 32 * 8 * expert
    assert abs(active - case["value"]) <= case["value"] * case["tolerance_pct"] / 100
    assert (arch.num_experts, arch.num_experts_per_token, arch.num_moe_layers) == (8, 2, 32)
    assert arch.is_moe
    w1 = _linear(arch, "w1", "routed")
    assert (w1.in_features, w1.out_features, w1.copies_per_layer) == (4096, 14336, 8)


def test_b02_mixtral_bf16_weights_need_total_not_active_parameters():
    case = bug_case("B02")
    arch = parse_hf_config(load_hf_config("mistralai--Mixtral-8x7B-v0.1"))
    # 46.70e9 x 2 bytes = 93.4 GB does not fit one 80 GB GPU; 12.9e9 x 2 = 25.8 GB would.
    assert round(arch.parameters.total * 2 / 1e9, 1) == case["expected"]["mixtral_bf16_weights_GB"]
    assert round(arch.parameters.active / 1e9, 1) == case["expected"]["mixtral_active_params"] / 1e9


def test_mixtral_8x22b_total_and_active():
    arch = parse_hf_config(load_hf_config("mistralai--Mixtral-8x22B-v0.1"))
    expert = 3 * 6144 * 16384
    attention = 2 * 6144 * 6144 + 2 * 6144 * 1024
    non_expert = 2 * 32000 * 6144 + 56 * (attention + 6144 * 8 + 2 * 6144) + 6144
    assert arch.parameters.total == non_expert + 56 * 8 * expert == 140_620_634_112
    assert arch.parameters.active == non_expert + 56 * 2 * expert  # "39B active" (Mistral AI)


def test_qwen25_7b_biases_on_qkv_only_and_no_window():
    arch = parse_hf_config(load_hf_config("Qwen--Qwen2.5-7B"))
    # Qwen2 attention: q, k, v carry biases (no key in the config: the class hard-codes it).
    q = 3584 * 3584 + 3584
    kv = 2 * (3584 * 512 + 512)  # 4 KV heads x 128
    o = 3584 * 3584
    per_layer = q + kv + o + 3 * 3584 * 18944 + 2 * 3584
    assert arch.parameters.total == 2 * 152064 * 3584 + 28 * per_layer + 3584 == 7_615_616_512
    assert {m.name: m.bias for m in arch.linears if m.attention} == {
        "q_proj": True,
        "k_proj": True,
        "v_proj": True,
        "o_proj": False,
    }
    # sliding_window 131072 is set but use_sliding_window is false: every layer is full.
    assert arch.layer_windows == ()


def test_qwen25_sliding_window_when_switched_on_covers_layers_above_max_window_layers():
    config = load_hf_config("Qwen--Qwen2.5-7B") | {
        "use_sliding_window": True,
        "sliding_window": 4096,
        "max_window_layers": 20,
    }
    arch = parse_hf_config(config)
    assert arch.layer_windows == (None,) * 20 + (4096,) * 8


def test_qwen25_72b_instruct_published_total():
    arch = parse_hf_config(load_hf_config("Qwen--Qwen2.5-72B-Instruct"))
    per_layer = (8192 * 8192 + 8192) + 2 * (8192 * 1024 + 1024) + 8192 * 8192
    per_layer += 3 * 8192 * 29568 + 2 * 8192
    assert arch.parameters.total == 2 * 152064 * 8192 + 80 * per_layer + 8192
    assert arch.parameters.total == 72_706_203_648  # keras-hub qwen2.5_instruct_72b_en


def test_qwen3_4b_explicit_head_dim_is_used():
    """Fault kind "explicit head_dim ignored": Qwen3-4B has head_dim 128, not 2560 / 32 = 80."""
    arch = parse_hf_config(load_hf_config("Qwen--Qwen3-4B"))
    assert arch.head_dim == 128
    attention = 2560 * (32 * 128) + 2 * 2560 * (8 * 128) + (32 * 128) * 2560
    per_layer = attention + 3 * 2560 * 9728 + 2 * 2560 + 2 * 128  # + q_norm, k_norm
    expected = 151936 * 2560 + 36 * per_layer + 2560  # tied: embedding counted once
    assert arch.parameters.total == expected == 4_022_468_096  # keras-hub qwen3_4b_en
    q = _linear(arch, "q_proj")
    assert (q.in_features, q.out_features) == (2560, 4096)


def test_qwen3_8b_published_total():
    arch = parse_hf_config(load_hf_config("Qwen--Qwen3-8B"))
    per_layer = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 12288 + 2 * 4096 + 2 * 128
    assert arch.parameters.total == 2 * 151936 * 4096 + 36 * per_layer + 4096 == 8_190_735_360


def test_qwen3_30b_a3b_moe_total_and_active():
    arch = parse_hf_config(load_hf_config("Qwen--Qwen3-30B-A3B"))
    attention = 2048 * 4096 + 2 * 2048 * 512 + 4096 * 2048  # head_dim 128 (not 2048 / 32 = 64)
    expert = 3 * 2048 * 768  # moe_intermediate_size 768; intermediate_size 6144 is unused
    non_expert = 2 * 151936 * 2048 + 48 * (attention + 2048 * 128 + 2 * 2048 + 2 * 128) + 2048
    assert arch.parameters.total == non_expert + 48 * 128 * expert == 30_532_122_624
    assert arch.parameters.active == non_expert + 48 * 8 * expert  # "3.3B activated"
    assert round(arch.parameters.active / 1e9, 1) == 3.4
    assert (arch.num_experts, arch.num_experts_per_token, arch.moe_intermediate_size) == (
        128,
        8,
        768,
    )
    assert not any(m.name == "gate_proj" and m.expert == "dense" for m in arch.linears)


def test_qwen3_moe_dense_layers_from_mlp_only_layers_and_sparse_step():
    config = load_hf_config("Qwen--Qwen3-30B-A3B") | {
        "mlp_only_layers": [0, 1],
        "decoder_sparse_step": 2,
    }
    arch = parse_hf_config(config)
    # MoE where i not in {0, 1} and (i + 1) % 2 == 0: i = 3, 5, ..., 47 -> 23 layers.
    assert arch.num_moe_layers == 23
    dense = _linear(arch, "gate_proj")
    assert (dense.out_features, dense.layers) == (6144, 48 - 23)


def test_phi3_mini_fused_projections_and_window():
    arch = parse_hf_config(load_hf_config("microsoft--Phi-3-mini-4k-instruct"))
    qkv = 3072 * (3072 + 2 * 3072)  # fused qkv_proj, 32 KV heads of 96
    per_layer = qkv + 3072 * 3072 + 3072 * 2 * 8192 + 8192 * 3072 + 2 * 3072
    assert arch.parameters.total == 2 * 32064 * 3072 + 32 * per_layer + 3072 == 3_821_079_552
    assert {m.name for m in arch.linears} == {"qkv_proj", "o_proj", "gate_up_proj", "down_proj"}
    assert arch.layer_windows == (2047,) * 32


def test_phi4_gqa_and_total():
    arch = parse_hf_config(load_hf_config("microsoft--phi-4"))
    qkv = 5120 * (40 * 128 + 2 * 10 * 128)
    per_layer = qkv + 5120 * 5120 + 5120 * 2 * 17920 + 17920 * 5120 + 2 * 5120
    assert arch.parameters.total == 2 * 100352 * 5120 + 40 * per_layer + 5120 == 14_659_507_200
    assert arch.layer_windows == ()


@pytest.mark.parametrize(
    ("stem", "untied_published"),
    [("meta-llama--Llama-3.2-1B", 1_498_482_688), ("meta-llama--Llama-3.2-3B", 3_606_752_256)],
)
def test_tied_embeddings_counted_once(stem, untied_published):
    """Fault kind "tied vs untied": Llama-3.2 ties the head to the embedding; keras-hub's figure
    counts the head separately, so it exceeds ours by exactly vocab x hidden."""
    config = load_hf_config(stem)
    arch = parse_hf_config(config)
    assert arch.tie_word_embeddings is True
    assert arch.parameters.lm_head == 0
    head = config["vocab_size"] * config["hidden_size"]
    assert arch.parameters.total + head == untied_published


def test_llama_attention_and_mlp_bias_flags():
    config = load_hf_config("meta-llama--Llama-3.2-1B") | {
        "attention_bias": True,
        "mlp_bias": True,
    }
    arch = parse_hf_config(config)
    # biases: q 2048, k 512, v 512, o 2048; gate 8192, up 8192, down 2048 per layer.
    extra = 16 * (2048 + 512 + 512 + 2048 + 8192 + 8192 + 2048)
    assert arch.parameters.total == 1_235_814_400 + extra


def test_b03_kv_heads_not_attention_heads_from_the_llama_3_config():
    """Fault kind "GQA ignored" (bug B03): the architecture carries the config's 8 KV heads, so
    KV bytes per token = 2 x layers x kv_heads x head_dim x 2 B, a quarter of the MHA figure."""
    case = bug_case("B03")
    arch = parse_hf_config(load_hf_config("meta-llama--Llama-3.1-8B"))
    assert (arch.num_attention_heads, arch.num_kv_heads) == (32, 8)
    per_token = 2 * arch.num_layers * arch.num_kv_heads * arch.head_dim * 2
    assert per_token == 2 * 32 * 8 * 128 * 2 == case["expected"]["kv_bytes_per_token"]
    with_all_heads = 2 * arch.num_layers * arch.num_attention_heads * arch.head_dim * 2
    assert with_all_heads * 8 * 8192 / 2**30 == case["expected"]["wrong_mha_formula_GiB"]


def test_qwen3_moe_window_when_switched_on_covers_every_layer():
    config = load_hf_config("Qwen--Qwen3-30B-A3B") | {
        "use_sliding_window": True,
        "sliding_window": 4096,
    }
    assert parse_hf_config(config).layer_windows == (4096,) * 48
