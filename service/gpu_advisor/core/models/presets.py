"""Built-in model presets: architecture numbers of popular open models.

Each preset is written as a config-like dict holding the architecture keys of the model's
published Hugging Face ``config.json`` and goes through the same parser as a posted config
(:func:`~gpu_advisor.core.models.parse.parse_hf_config`), so there is one code path. A test
parses the real files in ``shared/data/hf-configs`` and checks each preset gives the same
Architecture, so this table cannot drift from them.

Ids are the Hugging Face repository ids; lookup is case-insensitive and also accepts the
repository name alone (``llama-3.1-8b``) and the listed aliases (instruction-tuned variants
whose architecture is identical to the base model's).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from difflib import get_close_matches
from types import MappingProxyType
from typing import Any, Final

from msgspec import Struct

from gpu_advisor.core.architecture import Architecture
from gpu_advisor.core.errors import UnknownPresetError
from gpu_advisor.core.models.parse import parse_hf_config


class PresetInfo(Struct, frozen=True, kw_only=True):
    """One preset as listed by ``GET /v1/models``.

    Attributes:
        id: Hugging Face repository id (``meta-llama/Llama-3.1-8B``).
        aliases: other names that resolve to it (case-insensitive).
        family: parser family (``llama``, ``mixtral``, ...).
        total_parameters: all parameters resident in memory (all experts).
        active_parameters: parameters used per token (MoE: routed share only).
        num_layers: decoder layers (encoder layers for encoder-only models).
        hidden_size: model width.
        num_attention_heads: query heads.
        num_kv_heads: key/value heads.
        context_length: trained context in tokens (``max_position_embeddings``), if stated.
        shipped_weight_format: quantised format of the published checkpoint, if any.
    """

    id: str
    aliases: tuple[str, ...]
    family: str
    total_parameters: int
    active_parameters: int
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    context_length: int | None
    shipped_weight_format: str | None = None


class _Preset(Struct, frozen=True, kw_only=True):
    id: str
    aliases: tuple[str, ...] = ()
    config: dict[str, Any]


_LLAMA2: Final = {
    "model_type": "llama",
    "vocab_size": 32000,
    "max_position_embeddings": 4096,
    "tie_word_embeddings": False,
    "torch_dtype": "float16",
}
_LLAMA3: Final = {
    "model_type": "llama",
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "num_key_value_heads": 8,
    "torch_dtype": "bfloat16",
}
_MISTRAL: Final = {
    "model_type": "mistral",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "max_position_embeddings": 32768,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}
_MIXTRAL: Final = {
    "model_type": "mixtral",
    "num_key_value_heads": 8,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
    "vocab_size": 32000,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}
_QWEN25: Final = {
    "model_type": "qwen2",
    "vocab_size": 152064,
    "use_sliding_window": False,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}
_QWEN3: Final = {
    "model_type": "qwen3",
    "head_dim": 128,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_hidden_layers": 36,
    "vocab_size": 151936,
    "max_position_embeddings": 40960,
    "use_sliding_window": False,
    "torch_dtype": "bfloat16",
}
_PHI3: Final = {"model_type": "phi3", "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
_GPT_OSS: Final = {
    "model_type": "gpt_oss",
    "hidden_size": 2880,
    "intermediate_size": 2880,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "head_dim": 64,
    "num_experts_per_tok": 4,
    "vocab_size": 201088,
    "max_position_embeddings": 131072,
    "sliding_window": 128,
    "attention_bias": True,
    "tie_word_embeddings": False,
    "quantization_config": {
        "quant_method": "mxfp4",
        "modules_to_not_convert": [
            "model.layers.*.self_attn",
            "model.layers.*.mlp.router",
            "model.embed_tokens",
            "lm_head",
        ],
    },
}

_TABLE: Final[tuple[_Preset, ...]] = (
    # Llama 2 (Touvron et al. 2023; meta-llama/Llama-2-*-hf config.json)
    _Preset(
        id="meta-llama/Llama-2-7b-hf",
        aliases=("llama-2-7b", "meta-llama/Llama-2-7b-chat-hf"),
        config={
            **_LLAMA2,
            "hidden_size": 4096,
            "intermediate_size": 11008,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 32,
        },
    ),
    _Preset(
        id="meta-llama/Llama-2-70b-hf",
        aliases=("llama-2-70b", "meta-llama/Llama-2-70b-chat-hf"),
        config={
            **_LLAMA2,
            "hidden_size": 8192,
            "intermediate_size": 28672,
            "num_hidden_layers": 80,
            "num_attention_heads": 64,
            "num_key_value_heads": 8,
        },
    ),
    # Llama 3.1 / 3.2 (meta-llama/Llama-3.1-*, Llama-3.2-* config.json)
    _Preset(
        id="meta-llama/Llama-3.1-8B",
        aliases=(
            "meta-llama/Meta-Llama-3.1-8B",
            "meta-llama/Llama-3.1-8B-Instruct",
            "meta-llama/Meta-Llama-3.1-8B-Instruct",
            "llama-3.1-8b-instruct",
        ),
        config={
            **_LLAMA3,
            "hidden_size": 4096,
            "intermediate_size": 14336,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "tie_word_embeddings": False,
        },
    ),
    _Preset(
        id="meta-llama/Llama-3.1-70B",
        aliases=(
            "meta-llama/Meta-Llama-3.1-70B",
            "meta-llama/Llama-3.1-70B-Instruct",
            "meta-llama/Meta-Llama-3.1-70B-Instruct",
            "llama-3.1-70b-instruct",
        ),
        config={
            **_LLAMA3,
            "hidden_size": 8192,
            "intermediate_size": 28672,
            "num_hidden_layers": 80,
            "num_attention_heads": 64,
            "tie_word_embeddings": False,
        },
    ),
    _Preset(
        id="meta-llama/Llama-3.1-405B",
        aliases=(
            "meta-llama/Meta-Llama-3.1-405B",
            "meta-llama/Llama-3.1-405B-Instruct",
            "meta-llama/Meta-Llama-3.1-405B-Instruct",
            "llama-3.1-405b-instruct",
        ),
        config={
            **_LLAMA3,
            "hidden_size": 16384,
            "intermediate_size": 53248,
            "num_hidden_layers": 126,
            "num_attention_heads": 128,
            "tie_word_embeddings": False,
        },
    ),
    _Preset(
        id="meta-llama/Llama-3.2-1B",
        aliases=("meta-llama/Llama-3.2-1B-Instruct", "llama-3.2-1b-instruct"),
        config={
            **_LLAMA3,
            "hidden_size": 2048,
            "intermediate_size": 8192,
            "num_hidden_layers": 16,
            "num_attention_heads": 32,
            "head_dim": 64,
            "tie_word_embeddings": True,
        },
    ),
    _Preset(
        id="meta-llama/Llama-3.2-3B",
        aliases=("meta-llama/Llama-3.2-3B-Instruct", "llama-3.2-3b-instruct"),
        config={
            **_LLAMA3,
            "hidden_size": 3072,
            "intermediate_size": 8192,
            "num_hidden_layers": 28,
            "num_attention_heads": 24,
            "head_dim": 128,
            "tie_word_embeddings": True,
        },
    ),
    # Mistral 7B (Jiang et al. 2023, Table 1) and Mixtral (Jiang et al. 2024)
    _Preset(
        id="mistralai/Mistral-7B-v0.1",
        aliases=("mistral-7b", "mistralai/Mistral-7B-Instruct-v0.1"),
        config={**_MISTRAL, "vocab_size": 32000, "sliding_window": 4096},
    ),
    _Preset(
        id="mistralai/Mistral-7B-v0.3",
        aliases=("mistralai/Mistral-7B-Instruct-v0.3", "mistral-7b-instruct-v0.3"),
        config={**_MISTRAL, "vocab_size": 32768, "sliding_window": None},
    ),
    _Preset(
        id="mistralai/Mixtral-8x7B-v0.1",
        aliases=("mixtral-8x7b", "mistralai/Mixtral-8x7B-Instruct-v0.1"),
        config={
            **_MIXTRAL,
            "hidden_size": 4096,
            "intermediate_size": 14336,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "max_position_embeddings": 32768,
        },
    ),
    _Preset(
        id="mistralai/Mixtral-8x22B-v0.1",
        aliases=("mixtral-8x22b",),
        config={
            **_MIXTRAL,
            "hidden_size": 6144,
            "intermediate_size": 16384,
            "num_hidden_layers": 56,
            "num_attention_heads": 48,
            "max_position_embeddings": 65536,
        },
    ),
    # Qwen2.5 (Qwen/Qwen2.5-* config.json)
    _Preset(
        id="Qwen/Qwen2.5-7B",
        config={
            **_QWEN25,
            "hidden_size": 3584,
            "intermediate_size": 18944,
            "num_hidden_layers": 28,
            "num_attention_heads": 28,
            "num_key_value_heads": 4,
            "max_position_embeddings": 131072,
        },
    ),
    _Preset(
        id="Qwen/Qwen2.5-72B",
        config={
            **_QWEN25,
            "hidden_size": 8192,
            "intermediate_size": 29568,
            "num_hidden_layers": 80,
            "num_attention_heads": 64,
            "num_key_value_heads": 8,
            "max_position_embeddings": 131072,
        },
    ),
    _Preset(
        id="Qwen/Qwen2.5-72B-Instruct",
        config={
            **_QWEN25,
            "hidden_size": 8192,
            "intermediate_size": 29568,
            "num_hidden_layers": 80,
            "num_attention_heads": 64,
            "num_key_value_heads": 8,
            "max_position_embeddings": 32768,
        },
    ),
    # Qwen3 (Qwen/Qwen3-* config.json)
    _Preset(
        id="Qwen/Qwen3-4B",
        config={
            **_QWEN3,
            "hidden_size": 2560,
            "intermediate_size": 9728,
            "tie_word_embeddings": True,
        },
    ),
    _Preset(
        id="Qwen/Qwen3-8B",
        config={
            **_QWEN3,
            "hidden_size": 4096,
            "intermediate_size": 12288,
            "tie_word_embeddings": False,
        },
    ),
    _Preset(
        id="Qwen/Qwen3-30B-A3B",
        config={
            **_QWEN3,
            "model_type": "qwen3_moe",
            "hidden_size": 2048,
            "intermediate_size": 6144,
            "moe_intermediate_size": 768,
            "num_hidden_layers": 48,
            "num_key_value_heads": 4,
            "num_experts": 128,
            "num_experts_per_tok": 8,
            "decoder_sparse_step": 1,
            "mlp_only_layers": [],
            "tie_word_embeddings": False,
        },
    ),
    # Phi-3 / Phi-4 (microsoft/Phi-3-mini-4k-instruct, microsoft/phi-4 config.json)
    _Preset(
        id="microsoft/Phi-3-mini-4k-instruct",
        aliases=("phi-3-mini",),
        config={
            **_PHI3,
            "hidden_size": 3072,
            "intermediate_size": 8192,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 32,
            "vocab_size": 32064,
            "max_position_embeddings": 4096,
            "sliding_window": 2047,
        },
    ),
    _Preset(
        id="microsoft/phi-4",
        config={
            **_PHI3,
            "hidden_size": 5120,
            "intermediate_size": 17920,
            "num_hidden_layers": 40,
            "num_attention_heads": 40,
            "num_key_value_heads": 10,
            "vocab_size": 100352,
            "max_position_embeddings": 16384,
            "sliding_window": None,
        },
    ),
    # Gemma 2 / Gemma 3 (google/gemma-2-9b, google/gemma-3-27b-it config.json)
    _Preset(
        id="google/gemma-2-9b",
        aliases=("google/gemma-2-9b-it",),
        config={
            "model_type": "gemma2",
            "hidden_size": 3584,
            "intermediate_size": 14336,
            "num_hidden_layers": 42,
            "num_attention_heads": 16,
            "num_key_value_heads": 8,
            "head_dim": 256,
            "vocab_size": 256000,
            "max_position_embeddings": 8192,
            "sliding_window": 4096,
            "torch_dtype": "float32",
        },
    ),
    _Preset(
        id="google/gemma-3-27b-it",
        aliases=("gemma-3-27b", "google/gemma-3-27b-pt"),
        config={
            "model_type": "gemma3",
            "text_config": {
                "model_type": "gemma3_text",
                "hidden_size": 5376,
                "intermediate_size": 21504,
                "num_hidden_layers": 62,
                "num_attention_heads": 32,
                "num_key_value_heads": 16,
                "head_dim": 128,
                "sliding_window": 1024,
            },
            "vision_config": {
                "model_type": "siglip_vision_model",
                "hidden_size": 1152,
                "intermediate_size": 4304,
                "num_hidden_layers": 27,
                "num_attention_heads": 16,
                "image_size": 896,
                "patch_size": 14,
                "vision_use_head": False,
            },
            "torch_dtype": "bfloat16",
        },
    ),
    # DeepSeek-V3 (deepseek-ai/DeepSeek-V3 config.json; the V3-Base and 0324 checkpoints share it)
    _Preset(
        id="deepseek-ai/DeepSeek-V3",
        aliases=("deepseek-ai/DeepSeek-V3-Base", "deepseek-ai/DeepSeek-V3-0324"),
        config={
            "model_type": "deepseek_v3",
            "hidden_size": 7168,
            "intermediate_size": 18432,
            "moe_intermediate_size": 2048,
            "num_hidden_layers": 61,
            "num_attention_heads": 128,
            "num_key_value_heads": 128,
            "q_lora_rank": 1536,
            "kv_lora_rank": 512,
            "qk_nope_head_dim": 128,
            "qk_rope_head_dim": 64,
            "v_head_dim": 128,
            "n_routed_experts": 256,
            "n_shared_experts": 1,
            "num_experts_per_tok": 8,
            "first_k_dense_replace": 3,
            "moe_layer_freq": 1,
            "num_nextn_predict_layers": 1,
            "vocab_size": 129280,
            "max_position_embeddings": 163840,
            "tie_word_embeddings": False,
            "quantization_config": {
                "quant_method": "fp8",
                "fmt": "e4m3",
                "activation_scheme": "dynamic",
                "weight_block_size": [128, 128],
            },
            "torch_dtype": "bfloat16",
        },
    ),
    # gpt-oss (openai/gpt-oss-20b, openai/gpt-oss-120b config.json)
    _Preset(
        id="openai/gpt-oss-20b",
        config={
            **_GPT_OSS,
            "num_hidden_layers": 24,
            "num_local_experts": 32,
            "layer_types": ["sliding_attention", "full_attention"] * 12,
        },
    ),
    _Preset(
        id="openai/gpt-oss-120b",
        config={
            **_GPT_OSS,
            "num_hidden_layers": 36,
            "num_local_experts": 128,
            "layer_types": ["sliding_attention", "full_attention"] * 18,
        },
    ),
    # Classic decoders and encoders
    _Preset(
        id="openai-community/gpt2",
        aliases=("gpt2-small",),
        config={
            "model_type": "gpt2",
            "n_embd": 768,
            "n_layer": 12,
            "n_head": 12,
            "n_positions": 1024,
            "vocab_size": 50257,
        },
    ),
    _Preset(
        id="google-bert/bert-base-uncased",
        aliases=("bert-base",),
        config={
            "model_type": "bert",
            "hidden_size": 768,
            "num_hidden_layers": 12,
            "num_attention_heads": 12,
            "intermediate_size": 3072,
            "vocab_size": 30522,
            "max_position_embeddings": 512,
            "type_vocab_size": 2,
        },
    ),
    _Preset(
        id="tiiuae/falcon-7b",
        aliases=("tiiuae/falcon-7b-instruct", "falcon-7b-instruct"),
        config={
            "model_type": "falcon",
            "hidden_size": 4544,
            "num_attention_heads": 71,
            "num_hidden_layers": 32,
            "multi_query": True,
            "new_decoder_architecture": False,
            "parallel_attn": True,
            "bias": False,
            "vocab_size": 65024,
            "torch_dtype": "bfloat16",
        },
    ),
    _Preset(
        id="facebook/opt-13b",
        config={
            "model_type": "opt",
            "hidden_size": 5120,
            "num_hidden_layers": 40,
            "num_attention_heads": 40,
            "ffn_dim": 20480,
            "vocab_size": 50272,
            "max_position_embeddings": 2048,
            "word_embed_proj_dim": 5120,
            "do_layer_norm_before": True,
        },
    ),
    _Preset(
        id="google-t5/t5-base",
        config={
            "model_type": "t5",
            "d_model": 768,
            "d_ff": 3072,
            "d_kv": 64,
            "num_heads": 12,
            "num_layers": 12,
            "vocab_size": 32128,
        },
    ),
)


def _build() -> tuple[Mapping[str, Architecture], Mapping[str, str], tuple[PresetInfo, ...]]:
    """Parse every preset once (import time) and index its names, lower case."""
    architectures: dict[str, Architecture] = {}
    names: dict[str, str] = {}
    infos: list[PresetInfo] = []
    for preset in _TABLE:
        arch = parse_hf_config(preset.config, name=preset.id, field=f"preset {preset.id}")
        architectures[preset.id] = arch
        short = preset.id.split("/", 1)[-1]
        aliases = tuple(dict.fromkeys(a for a in (short, *preset.aliases) if a != preset.id))
        for key in (preset.id, *aliases):
            previous = names.setdefault(key.lower(), preset.id)
            if previous != preset.id:
                raise ValueError(f"preset name {key!r} is used by {previous} and {preset.id}")
        infos.append(
            PresetInfo(
                id=preset.id,
                aliases=aliases,
                family=arch.family,
                total_parameters=arch.parameters.total,
                active_parameters=arch.parameters.active,
                num_layers=arch.num_layers,
                hidden_size=arch.hidden_size,
                num_attention_heads=arch.num_attention_heads,
                num_kv_heads=arch.num_kv_heads,
                context_length=arch.max_position_embeddings,
                shipped_weight_format=arch.shipped_weight_format,
            )
        )
    return MappingProxyType(architectures), MappingProxyType(names), tuple(infos)


_ARCHITECTURES, _NAMES, _INFOS = _build()


def list_presets() -> list[PresetInfo]:
    """All presets in table order (for ``GET /v1/models``)."""
    return list(_INFOS)


def preset_config(preset_id: str) -> dict[str, Any]:
    """A copy of the config-like dict a preset is built from (for tests and documentation).

    Raises:
        UnknownPresetError: no preset has this id or alias.
    """
    canonical = _canonical(preset_id, "model.preset")
    return next(copy.deepcopy(p.config) for p in _TABLE if p.id == canonical)


def _canonical(preset_id: str, field: str) -> str:
    key = preset_id.strip().lower()
    canonical = _NAMES.get(key)
    if canonical is None:
        close = get_close_matches(key[:200], list(_NAMES), n=3, cutoff=0.6)
        hint = f" Did you mean {', '.join(_NAMES[c] for c in close)}?" if close else ""
        raise UnknownPresetError(
            f"{preset_id[:100]!r} is not a known preset.{hint} GET /v1/models lists "
            "them; or send the model's config.json as model.config.",
            field=field,
        )
    return canonical


def get_preset(preset_id: str, *, field: str = "model.preset") -> Architecture:
    """The architecture of a preset, by id or alias (case-insensitive).

    Raises:
        UnknownPresetError: no preset has this id or alias; the message suggests close ones.
    """
    return _ARCHITECTURES[_canonical(preset_id, field)]
