"""Measured truth harness (a): parameter counts from transformers on the meta device.

Each Hugging Face config in ``shared/data/hf-configs`` (and a few extra configs the unit tests
use) is instantiated with transformers on PyTorch's meta device (no weights are allocated or
downloaded), its weights tied as ``from_config`` does, and counted with
``model.num_parameters()`` (a tied weight once). The count is compared, to the parameter, with
:func:`gpu_advisor.core.models.parse_hf_config`.

Usage::

    .venv/bin/python bench/harness_param_counts.py [--shared DIR] [--out FILE]

writes the comparison as JSON (default ``docs/data/meta_param_counts.json``) for the accuracy
report. ``tests/harness/test_meta_param_counts.py``
(``@pytest.mark.slow``) runs the same measurement and checks both the agreement and that the
committed JSON is what this script produces.

Needs the ``harness`` extra (``pip install -e ".[harness]"``: torch 2.13.0 CPU, transformers).
Model classes: the config's ``architectures`` entry, except BERT (``BertModel``: encoder and
pooler, no MLM head, as DESIGN and the published figures count it) and configs without one
(OPT: ``OPTForCausalLM``). The 2023 falcon-7b file (``RefinedWebModel``, legacy keys) is
translated to ``FalconConfig`` keys. ``quantization_config`` is dropped before instantiation:
quantisers only act in ``from_pretrained`` and never change the parameter count.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO_ROOT / "docs" / "data" / "meta_param_counts.json"

# Configs the unit tests build by hand (tests/models/test_parse_other_families.py); measuring
# them too checks the hand-written shapes against transformers.
EXTRA_CONFIGS: dict[str, dict[str, Any]] = {
    "extra:deepseek-v2-lite": {
        "model_type": "deepseek_v2",
        "architectures": ["DeepseekV2ForCausalLM"],
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
    },
    "extra:falcon-40b-shapes": {
        "model_type": "falcon",
        "architectures": ["FalconForCausalLM"],
        "hidden_size": 8192,
        "num_attention_heads": 128,
        "num_kv_heads": 8,
        "num_hidden_layers": 60,
        "vocab_size": 65024,
        "new_decoder_architecture": True,
        "parallel_attn": True,
        "bias": False,
    },
    "extra:opt-350m-shapes": {
        "model_type": "opt",
        "architectures": ["OPTForCausalLM"],
        "hidden_size": 1024,
        "num_hidden_layers": 24,
        "num_attention_heads": 16,
        "ffn_dim": 4096,
        "vocab_size": 50272,
        "max_position_embeddings": 2048,
        "word_embed_proj_dim": 512,
        "do_layer_norm_before": False,
    },
    "extra:mt0-large-shapes": {
        "model_type": "mt5",
        "architectures": ["MT5ForConditionalGeneration"],
        "d_model": 1024,
        "d_ff": 2816,
        "d_kv": 64,
        "num_heads": 16,
        "num_layers": 24,
        "num_decoder_layers": 24,
        "vocab_size": 250112,
        "feed_forward_proj": "gated-gelu",
        "tie_word_embeddings": False,
    },
    "extra:gpt2-xl-shapes": {
        "model_type": "gpt2",
        "architectures": ["GPT2LMHeadModel"],
        "n_embd": 1600,
        "n_layer": 48,
        "n_head": 25,
        "n_positions": 1024,
        "vocab_size": 50257,
    },
    "extra:gemma3-text-defaults": {
        "model_type": "gemma3_text",
        "architectures": ["Gemma3ForCausalLM"],
    },
    "extra:qwen3-moe-sparse-step": {
        "model_type": "qwen3_moe",
        "architectures": ["Qwen3MoeForCausalLM"],
        "hidden_size": 512,
        "intermediate_size": 1536,
        "moe_intermediate_size": 256,
        "num_hidden_layers": 6,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "head_dim": 128,
        "num_experts": 16,
        "num_experts_per_tok": 4,
        "decoder_sparse_step": 2,
        "mlp_only_layers": [1],
        "vocab_size": 1000,
    },
}


# Known, explained differences (ours - transformers): each is checked to the parameter.
EXPLAINED: dict[str, tuple[int, str]] = {
    "extra:mt0-large-shapes": (
        250112 * 1024,
        "transformers 5.x forces tie_word_embeddings=True for T5/mT5 (configuration_t5.py: "
        "'we tie weights always'), so it counts no separate head; mT5 checkpoints such as "
        "mt0-large ship an untied lm_head (vocab x d_model), which PEFT's published "
        "1,229,581,312 includes (case F13) and we count.",
    ),
}


def shared_dir() -> Path:
    """The vendored copy of ``shared/`` in ``tests/fixtures/shared`` (see its README)."""
    return Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "shared"


def hf_configs(shared: Path) -> dict[str, dict[str, Any]]:
    """Every config file of ``shared/data/hf-configs``, by file stem."""
    folder = shared / "data" / "hf-configs"
    return {
        path.stem: json.loads(path.read_text())
        for path in sorted(folder.glob("*.json"))
        if path.stem != "transformers_param_counts"
    }


def _transformers_kwargs(config: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """(model_type, model class name, config kwargs) for transformers."""
    kwargs = {
        k: v
        for k, v in config.items()
        if k not in ("_note", "auto_map", "architectures", "model_type", "quantization_config")
    }
    model_type = str(config["model_type"])
    architectures = config.get("architectures") or []
    class_name = architectures[0] if architectures else ""
    if model_type.lower() in ("refinedwebmodel", "refinedweb"):
        renames = {"n_head": "num_attention_heads", "n_layer": "num_hidden_layers"}
        renames |= {"n_head_kv": "num_kv_heads"}
        kwargs = {renames.get(k, k): v for k, v in kwargs.items()}
        model_type, class_name = "falcon", "FalconForCausalLM"
    if model_type == "bert":
        class_name = "BertModel"
    if model_type == "opt" and not class_name:
        class_name = "OPTForCausalLM"
    return model_type, class_name, kwargs


def measure(config: dict[str, Any]) -> tuple[str, int]:
    """(model class, parameter count) of ``config`` instantiated on the meta device."""
    import torch
    import transformers

    model_type, class_name, kwargs = _transformers_kwargs(config)
    with warnings.catch_warnings():
        # Third-party deprecation and config-validation notices are not what is measured.
        warnings.simplefilter("ignore")
        hf_config = transformers.AutoConfig.for_model(model_type, **kwargs)
        model_class = getattr(transformers, class_name)
        with torch.device("meta"):
            model = model_class(hf_config)
        model.tie_weights()
    return class_name, int(model.num_parameters())


def run(shared: Path) -> dict[str, Any]:
    """Measure every config and compare with our parser; the JSON document the report reads."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # import-time notices of third-party packages
        import torch
        import transformers

    sys.path.insert(0, str(REPO_ROOT / "service"))
    from gpu_advisor.core.models import parse_hf_config

    configs = hf_configs(shared) | EXTRA_CONFIGS
    rows = []
    for name, config in configs.items():
        model_class, theirs = measure(config)
        ours = parse_hf_config(config).parameters.total
        expected, why = EXPLAINED.get(name, (0, ""))
        row: dict[str, Any] = {
            "config": name,
            "model_class": model_class,
            "transformers_parameters": theirs,
            "gpu_advisor_parameters": ours,
            "difference": ours - theirs,
            "match": ours == theirs,
        }
        if why:
            row["explained_difference"] = expected
            row["explanation"] = why
        rows.append(row)
    return {
        "about": (
            "Harness (a): parameters of each config instantiated with transformers on the meta "
            "device (model.num_parameters(), tied weights once) vs gpu_advisor's parse_hf_config. "
            "Generated by bench/harness_param_counts.py."
        ),
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
        "results": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=None, help="the shared/ folder")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON file to write")
    args = parser.parse_args()
    document = run(args.shared or shared_dir())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=1) + "\n")
    matches = sum(row["match"] for row in document["results"])
    print(f"{matches}/{len(document['results'])} configs match to the parameter -> {args.out}")
    for row in document["results"]:
        if not row["match"]:
            label = "explained" if "explanation" in row else "MISMATCH"
            print(
                f"  {label} {row['config']}: ours {row['gpu_advisor_parameters']:,} vs "
                f"transformers {row['transformers_parameters']:,}"
            )


if __name__ == "__main__":
    main()
