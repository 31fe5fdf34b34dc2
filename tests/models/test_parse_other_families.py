"""Gemma 2/3, DeepSeek-V2/V3, gpt-oss, Falcon, GPT-2, OPT, BERT and T5: exact counts, linear
modules, MLA dims, sliding windows and shipped formats, from the real configs in
shared/data/hf-configs or from published shapes, with the arithmetic written out."""

from __future__ import annotations

from hf_data import bug_case, load_hf_config, published_case

from gpu_advisor.core.architecture import MlaDims
from gpu_advisor.core.models import parse_hf_config
from gpu_advisor.core.units import GIB


def _names(arch, **filters):
    return [m.name for m in arch.linears if all(getattr(m, k) == v for k, v in filters.items())]


# --- Gemma -----------------------------------------------------------------------------------


def test_gemma2_9b_total_head_dim_and_alternating_windows():
    arch = parse_hf_config(load_hf_config("google--gemma-2-9b"))
    # head_dim 256 (config), not 3584 / 16 = 224.
    attention = 3584 * (16 * 256) + 2 * 3584 * (8 * 256) + (16 * 256) * 3584
    per_layer = attention + 3 * 3584 * 14336 + 4 * 3584  # four RMSNorms per layer
    expected = 256000 * 3584 + 42 * per_layer + 3584  # tied head (class default)
    assert arch.parameters.total == expected == 9_241_705_984  # keras-hub gemma2_9b_en
    assert arch.head_dim == 256
    assert arch.tie_word_embeddings is True
    assert arch.parameters.lm_head == 0
    # Even layers slide over 4096 tokens, odd layers are global.
    assert arch.layer_windows == (4096, None) * 21


def test_gemma3_27b_text_vision_split_and_defaults():
    arch = parse_hf_config(load_hf_config("google--gemma-3-27b-it"))
    # Text: text_config omits vocab_size -> Gemma3TextConfig default 262,208.
    attention = 5376 * (32 * 128) + 2 * 5376 * (16 * 128) + (32 * 128) * 5376
    per_layer = attention + 3 * 5376 * 21504 + 4 * 5376 + 2 * 128  # + q_norm, k_norm
    text = 262208 * 5376 + 62 * per_layer + 5376
    assert text == 27_009_346_304  # README: text part with HF's 262,208-row embedding
    # SigLIP tower: patch conv, 64 x 64 positions, 27 layers, post-LN; no pooling head;
    # projector 1152 x 5376 plus its RMSNorm.
    siglip_layer = 4 * (1152 * 1152 + 1152) + 4 * 1152 + (1152 * 4304 + 4304) + (4304 * 1152 + 1152)
    vision = (3 * 14 * 14 * 1152 + 1152) + (896 // 14) ** 2 * 1152 + 27 * siglip_layer + 2 * 1152
    vision += 1152 * 5376 + 1152
    assert arch.parameters.total == text + vision == 27_432_406_640  # transformers count
    assert arch.parameters.active == text  # the vision tower sees no text token
    assert arch.vocab_size == 262208
    assert arch.max_position_embeddings == 131072  # Gemma3TextConfig default
    # 5 of every 6 layers slide over 1024 tokens: layers 5, 11, ..., 59 are global (10 of 62).
    assert arch.layer_windows.count(None) == 10
    assert arch.layer_windows.count(1024) == 52
    assert arch.layer_windows[5] is None
    assert arch.layer_windows[6] == 1024


def test_b07_gemma3_sliding_windows_shrink_the_kv_cache_sixfold():
    """Fault kind "sliding windows ignored" (bug B07), from the real gemma-3-27b config."""
    case = bug_case("B07")
    arch = parse_hf_config(load_hf_config("google--gemma-3-27b-it"))
    per_layer_token = 2 * arch.num_kv_heads * arch.head_dim * 2  # K,V x 16 x 128 x bf16
    assert per_layer_token == 2 * 16 * 128 * 2 == 8192
    context = 131072
    kv = sum(
        per_layer_token * (context if w is None else min(w, context)) for w in arch.layer_windows
    )
    assert kv == 10 * 8192 * 131072 + 52 * 8192 * 1024
    assert round(kv / GIB, 1) == case["expected"]["kv_GiB"]
    naive = 62 * 8192 * context
    assert round(naive / GIB) == case["expected"]["naive_all_full_GiB"]


def test_gemma3_text_only_config_takes_class_defaults():
    arch = parse_hf_config({"model_type": "gemma3_text"})
    # Gemma3TextConfig(): 26 layers, hidden 2304, 8 heads, 4 KV heads, head_dim 256, FFN 9216.
    per_layer = 2304 * 2048 + 2 * 2304 * 1024 + 2048 * 2304 + 3 * 2304 * 9216 + 4 * 2304 + 2 * 256
    assert arch.parameters.total == 262208 * 2304 + 26 * per_layer + 2304
    assert arch.layer_windows == ((4096,) * 5 + (None,)) * 4 + (4096, 4096)


# --- DeepSeek --------------------------------------------------------------------------------


def test_deepseek_v3_mla_moe_total_and_mtp_excluded():
    config = load_hf_config("deepseek-ai--DeepSeek-V3")
    arch = parse_hf_config(config)
    h, heads = 7168, 128
    mla = (
        h * 1536  # q_a_proj
        + 1536 * heads * (128 + 64)  # q_b_proj
        + h * (512 + 64)  # kv_a_proj_with_mqa
        + 512 * heads * (128 + 128)  # kv_b_proj
        + heads * 128 * h  # o_proj
        + 1536
        + 512  # q_a_layernorm, kv_a_layernorm
        + 2 * h  # input / post-attention RMSNorm
    )
    dense_mlp = 3 * h * 18432  # first_k_dense_replace = 3 layers
    expert = 3 * h * 2048
    moe = 256 * expert + 1 * expert + 256 * h  # routed, 1 shared, router (no correction bias)
    non_embedding = 61 * mla + 3 * dense_mlp + 58 * moe + h
    total = 2 * 129280 * h + non_embedding
    assert total == 671_026_404_352  # transformers' count; DeepSeek: "671B"
    assert arch.parameters.total == total
    assert arch.parameters.active == total - 58 * 248 * expert  # 8 of 256 routed experts
    assert round(arch.parameters.active / 1e9, 1) == 37.6  # "37B activated"
    # The MTP layer (num_nextn_predict_layers) is not part of the main model's count.
    assert parse_hf_config(config | {"num_nextn_predict_layers": 3}).parameters.total == total
    assert (arch.num_experts, arch.num_shared_experts, arch.num_experts_per_token) == (256, 1, 8)
    assert arch.num_moe_layers == 58
    assert _names(arch, expert="shared") == ["gate_proj", "up_proj", "down_proj"]
    assert _names(arch, attention=True) == [
        "q_a_proj",
        "q_b_proj",
        "kv_a_proj_with_mqa",
        "kv_b_proj",
        "o_proj",
    ]


def test_b05_deepseek_v3_mla_dims_size_the_kv_cache():
    """Fault kind "MLA sized as MHA/GQA" (bug B05): the cache holds one latent of
    kv_lora_rank + qk_rope_head_dim per token and layer."""
    case = bug_case("B05")
    arch = parse_hf_config(load_hf_config("deepseek-ai--DeepSeek-V3"))
    assert arch.mla == MlaDims(
        q_lora_rank=1536,
        kv_lora_rank=512,
        qk_nope_head_dim=128,
        qk_rope_head_dim=64,
        v_head_dim=128,
    )
    per_token = (arch.mla.kv_lora_rank + arch.mla.qk_rope_head_dim) * 2 * arch.num_layers
    assert per_token == (512 + 64) * 2 * 61 == case["expected"]["kv_bytes_per_token"]
    # The generic formula with the config's 128 KV heads and hidden / heads = 56 is ~25x more.
    generic = 2 * 61 * arch.num_kv_heads * (7168 // 128) * 2
    assert generic == case["expected"]["wrong_generic_bytes_per_token"]
    assert arch.head_dim == 128 + 64  # the query/key head width


def test_deepseek_v3_ships_fp8_on_all_linears():
    arch = parse_hf_config(load_hf_config("deepseek-ai--DeepSeek-V3"))
    assert (arch.shipped_weight_format, arch.shipped_quantized_modules) == ("fp8", "all-linear")
    assert arch.torch_dtype == "bfloat16"  # declared, but the checkpoint is fp8


def test_deepseek_v2_lite_without_query_compression():
    """DeepSeek-V2-Lite (DeepSeek-V2 paper, appendix B: 15.7B total, 2.4B activated; config
    deepseek-ai/DeepSeek-V2-Lite): q_lora_rank null gives a plain q_proj."""
    config = {
        "model_type": "deepseek_v2",
        "hidden_size": 2048,
        "intermediate_size": 10944,
        "moe_intermediate_size": 1408,
        "num_hidden_layers": 27,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "q_lora_rank": None,
        "kv_lora_rank": 512,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
        "n_routed_experts": 64,
        "n_shared_experts": 2,
        "num_experts_per_tok": 6,
        "first_k_dense_replace": 1,
        "vocab_size": 102400,
        "tie_word_embeddings": False,
    }
    arch = parse_hf_config(config)
    h = 2048
    mla = h * 16 * 192 + h * 576 + 512 * 16 * 256 + 16 * 128 * h + 512 + 2 * h
    expert = 3 * h * 1408
    moe = 64 * expert + 3 * h * (2 * 1408) + 64 * h  # routed, shared (2 fused), router
    total = 2 * 102400 * h + 27 * mla + 3 * h * 10944 + 26 * moe + h
    assert arch.parameters.total == total
    assert round(total / 1e9, 1) == 15.7
    # Published "activated" figures leave out the input-embedding lookup (no FLOPs).
    active = total - 26 * 58 * expert
    assert arch.parameters.active == active
    assert 2.4e9 <= active - 102400 * h < 2.5e9  # "2.4B" (2.45B, truncated)
    assert "q_proj" in _names(arch, attention=True)


# --- gpt-oss ---------------------------------------------------------------------------------


def test_gpt_oss_20b_total_active_windows_and_mxfp4_experts():
    arch = parse_hf_config(load_hf_config("openai--gpt-oss-20b"))
    h, experts, width = 2880, 32, 2880
    attention = (h * 4096 + 4096) + 2 * (h * 512 + 512) + (4096 * h + h)  # biased, head_dim 64
    expert = (h * 2 * width + 2 * width) + (width * h + h)  # gate_up_proj, down_proj + biases
    per_layer = attention + 64 + 2 * h + (experts * h + experts) + experts * expert
    total = 2 * 201088 * h + 24 * per_layer + h  # sinks 64 per layer, router with bias
    assert arch.parameters.total == total == 20_914_757_184  # keras-hub gpt_oss_20b_en
    assert arch.parameters.active == total - 24 * (experts - 4) * expert
    # OpenAI's "3.6B active" leaves out the input embedding.
    assert round((arch.parameters.active - 201088 * h) / 1e9, 2) == 3.61
    assert arch.layer_windows == (128, None) * 12
    assert (arch.shipped_weight_format, arch.shipped_quantized_modules) == (
        "mxfp4",
        "routed-experts",
    )
    assert _names(arch, expert="routed") == ["gate_up_proj", "down_proj"]


def test_gpt_oss_120b_total():
    arch = parse_hf_config(load_hf_config("openai--gpt-oss-120b"))
    h = 2880
    expert = (h * 5760 + 5760) + (2880 * h + h)
    attention = (h * 4096 + 4096) + 2 * (h * 512 + 512) + (4096 * h + h)
    per_layer = attention + 64 + 2 * h + (128 * h + 128) + 128 * expert
    assert arch.parameters.total == 2 * 201088 * h + 36 * per_layer + h == 116_829_156_672
    assert round((arch.parameters.active - 201088 * h) / 1e9, 2) == 5.13  # "5.1B active"


# --- Falcon, GPT-2, OPT ----------------------------------------------------------------------


def test_falcon_7b_multi_query_legacy_keys_and_index_size():
    arch = parse_hf_config(load_hf_config("tiiuae--falcon-7b"))
    h, head = 4544, 4544 // 71
    per_layer = h * (h + 2 * head) + h * h + 2 * h * 4 * h + 2 * h  # fused qkv, dense, MLP, 1 LN
    total = 65024 * h + 32 * per_layer + 2 * h  # tied head, ln_f
    assert arch.parameters.total == total == 6_921_720_704
    assert (arch.num_attention_heads, arch.num_kv_heads, arch.head_dim) == (71, 1, 64)
    # The checkpoint index stores the tied head again: 14,434,379,520 bf16 bytes.
    assert (total + 65024 * h) * 2 == 14_434_379_520
    assert arch.family == "falcon"
    assert arch.gated_mlp is False


def test_falcon_7b_instruct_dump_with_num_kv_heads_71_is_still_multi_query():
    arch = parse_hf_config(load_hf_config("tiiuae--falcon-7b-instruct"))
    assert arch.num_kv_heads == 1
    assert arch.parameters.total == 6_921_720_704


def test_falcon_new_decoder_architecture_uses_grouped_kv_heads():
    # Falcon-40B shapes (tiiuae/falcon-40b config.json, RefinedWeb): 60 layers, 8 KV groups.
    config = {
        "model_type": "RefinedWeb",
        "hidden_size": 8192,
        "n_head": 128,
        "n_head_kv": 8,
        "n_layer": 60,
        "vocab_size": 65024,
        "parallel_attn": True,
        "bias": False,
    }
    arch = parse_hf_config(config)
    per_layer = 8192 * (2 * 8 + 128) * 64 + 8192 * 8192 + 2 * 8192 * 32768 + 2 * 2 * 8192
    assert arch.parameters.total == 65024 * 8192 + 60 * per_layer + 2 * 8192
    assert arch.num_kv_heads == 8


def test_gpt2_total_and_conv1d_names():
    arch = parse_hf_config(load_hf_config("openai-community--gpt2"))
    per_layer = (768 * 2304 + 2304) + (768 * 768 + 768) + (768 * 3072 + 3072) + (3072 * 768 + 768)
    per_layer += 2 * 2 * 768  # ln_1, ln_2 (weight + bias)
    total = 50257 * 768 + 1024 * 768 + 12 * per_layer + 2 * 768  # wte, wpe, blocks, ln_f
    assert arch.parameters.total == total == 124_439_808  # keras-hub gpt2_base_en
    assert arch.parameters.embedding == 50257 * 768 + 1024 * 768
    assert sorted(_names(arch)) == ["c_attn", "c_fc", "c_proj", "c_proj"]


def test_f09_gpt2_xl():
    case = published_case("F09")
    w = case["workload"]
    config = {
        "model_type": "gpt2",
        "n_embd": w["n_embd"],
        "n_layer": w["n_layer"],
        "n_head": w["n_head"],
        "n_positions": w["n_positions"],
        "vocab_size": w["vocab_size"],
    }
    h = 1600
    per_layer = 12 * h * h + 13 * h  # c_attn, c_proj, c_fc, c_proj weights + biases + 2 LNs
    expected = 50257 * h + 1024 * h + 48 * per_layer + 2 * h
    assert parse_hf_config(config).parameters.total == expected == 1_557_611_200
    assert abs(expected - 1.558e9) <= 1.558e9 * case["tolerance_pct"] / 100


def test_opt_13b_learned_positions_with_offset():
    arch = parse_hf_config(load_hf_config("facebook--opt-13b"))
    h = 5120
    per_layer = 4 * (h * h + h) + (h * 20480 + 20480) + (20480 * h + h) + 2 * 2 * h
    total = 50272 * h + (2048 + 2) * h + 40 * per_layer + 2 * h  # final LayerNorm
    assert arch.parameters.total == total == 12_853_473_280


def test_opt_350m_projections_and_post_norm():
    # facebook/opt-350m shapes: 512-wide embeddings projected to 1024, post-LN, no final norm.
    config = {
        "model_type": "opt",
        "hidden_size": 1024,
        "num_hidden_layers": 24,
        "num_attention_heads": 16,
        "ffn_dim": 4096,
        "vocab_size": 50272,
        "max_position_embeddings": 2048,
        "word_embed_proj_dim": 512,
        "do_layer_norm_before": False,
    }
    per_layer = 4 * (1024 * 1024 + 1024) + (1024 * 4096 + 4096) + (4096 * 1024 + 1024) + 4 * 1024
    total = 50272 * 512 + 2050 * 1024 + 2 * 512 * 1024 + 24 * per_layer
    assert parse_hf_config(config).parameters.total == total
    assert round(total / 1e6) == 331  # the 350M model's real size


# --- BERT, T5 --------------------------------------------------------------------------------


def test_bert_base_uncased_is_bert_model_with_pooler():
    arch = parse_hf_config(load_hf_config("google-bert--bert-base-uncased"))
    per_layer = 4 * (768 * 768 + 768) + (768 * 3072 + 3072) + (3072 * 768 + 768) + 2 * 2 * 768
    embeddings = (30522 + 512 + 2) * 768 + 2 * 768  # word, position, token type, LayerNorm
    total = embeddings + 12 * per_layer + 768 * 768 + 768  # pooler
    assert arch.parameters.total == total == 109_482_240  # keras-hub bert_base_en_uncased
    assert arch.encoder_only is True
    assert arch.parameters.lm_head == 0
    assert {m.stack for m in arch.linears} == {"encoder"}
    assert sorted(_names(arch)) == ["dense", "dense", "dense", "key", "query", "value"]


def test_f11_bert_base_cased():
    case = published_case("F11")
    w = case["workload"]
    config = {"model_type": "bert", **{k: v for k, v in w.items() if k != "model"}}
    # Same as bert-base-uncased with a 28,996-row vocabulary: 109,482,240 - 1,526 x 768.
    expected = 109_482_240 - (30522 - 28996) * 768
    assert parse_hf_config(config).parameters.total == expected == case["value"]


def test_t5_base_encoder_decoder():
    arch = parse_hf_config(load_hf_config("google-t5--t5-base"))
    d, inner, ff = 768, 12 * 64, 3072
    encoder = 12 * (4 * d * inner + 2 * d * ff + 2 * d) + d + 32 * 12
    decoder = 12 * (8 * d * inner + 2 * d * ff + 3 * d) + d + 32 * 12  # + cross-attention
    total = 32128 * d + encoder + decoder  # shared embedding, tied head
    assert arch.parameters.total == total == 222_903_552  # keras-hub t5_base_multi
    assert (arch.num_layers, arch.num_encoder_layers) == (12, 12)
    assert {m.stack for m in arch.linears} == {"encoder", "decoder"}
    assert sorted(set(_names(arch))) == ["k", "o", "q", "v", "wi", "wo"]


def test_f13_mt0_large_gated_untied_mt5():
    case = published_case("F13")
    config = {
        "model_type": "mt5",
        "d_model": 1024,
        "d_ff": 2816,
        "d_kv": 64,
        "num_heads": 16,
        "num_layers": 24,
        "num_decoder_layers": 24,
        "vocab_size": 250112,
        "feed_forward_proj": "gated-gelu",
        "tie_word_embeddings": False,
    }
    d, ff = 1024, 2816
    encoder = 24 * (4 * d * d + 3 * d * ff + 2 * d) + d + 32 * 16
    decoder = 24 * (8 * d * d + 3 * d * ff + 3 * d) + d + 32 * 16
    expected = 2 * 250112 * d + encoder + decoder  # untied head
    arch = parse_hf_config(config)
    assert arch.parameters.total == expected == case["value"]
    assert arch.gated_mlp is True
    assert "wi_0" in _names(arch)


def test_shipped_quantisation_from_quantization_config():
    base = load_hf_config("meta-llama--Llama-3.1-8B")

    def shipped(quant):
        arch = parse_hf_config(base | {"quantization_config": quant})
        return arch.shipped_weight_format, arch.shipped_quantized_modules

    assert shipped({"quant_method": "gptq", "bits": 4, "group_size": 128}) == ("int4", "all-linear")
    # 8-bit GPTQ is weight-only: not the W8A8 int8 of bitsandbytes' LLM.int8() below
    assert shipped({"quant_method": "gptq", "bits": 8}) == ("int8-weight-only", "all-linear")
    assert shipped({"quant_method": "awq", "bits": 4}) == ("int4", "all-linear")
    # transformers' BitsAndBytesConfig defaults bnb_4bit_use_double_quant to False
    four_bit = {"quant_method": "bitsandbytes", "load_in_4bit": True}
    assert shipped(four_bit) == ("nf4-single-quant", "all-linear")
    double = four_bit | {"bnb_4bit_use_double_quant": True}
    assert shipped(double) == ("nf4", "all-linear")
    assert shipped({"quant_method": "bitsandbytes", "load_in_8bit": True}) == ("int8", "all-linear")
    assert shipped({"quant_method": "fbgemm_fp8"}) == ("fp8", "all-linear")
    # An unknown method is a 422, not bf16 weights: tests/models/test_quantization_config.py.
    # The count never changes: a 4-bit model of N parameters has N parameters (bug B14).
    quantised = parse_hf_config(base | {"quantization_config": {"quant_method": "awq", "bits": 4}})
    assert quantised.parameters.total == 8_030_261_248
