"""Presets: each one equals the architecture parsed from the model's real config.json, ids and
aliases resolve case-insensitively, and GET /v1/models' listing carries the numbers."""

from __future__ import annotations

import msgspec
import pytest
from hf_data import hf_config_stems, load_hf_config

from gpu_advisor.core.errors import UnknownPresetError
from gpu_advisor.core.models import get_preset, list_presets, parse_hf_config, preset_config

# Presets without a file of their own in shared/data/hf-configs, compared with a sibling file
# whose architecture is the same except for the listed fields (README "Not found verbatim").
SIBLINGS = {
    # Qwen2.5-72B base: only the Instruct file exists; the base model is trained to 131,072
    # tokens, the Instruct config says 32,768.
    "Qwen/Qwen2.5-72B": ("Qwen--Qwen2.5-72B-Instruct", {"max_position_embeddings": 131072}),
}


def _stem(preset_id: str) -> str:
    return preset_id.replace("/", "--")


def _unnamed(arch):
    return msgspec.structs.replace(arch, name="")


PRESET_IDS = [p.id for p in list_presets()]


@pytest.mark.parametrize("preset_id", PRESET_IDS)
def test_preset_equals_the_parsed_real_config(preset_id):
    stems = set(hf_config_stems())
    preset = get_preset(preset_id)
    assert preset.name == preset_id
    if preset_id in SIBLINGS:
        stem, differences = SIBLINGS[preset_id]
        from_file = parse_hf_config(load_hf_config(stem))
        from_file = msgspec.structs.replace(from_file, **differences)
    else:
        stem = _stem(preset_id)
        assert stem in stems, f"no real config for preset {preset_id}"
        from_file = parse_hf_config(load_hf_config(stem))
    assert _unnamed(preset) == _unnamed(from_file)


def test_every_real_config_with_a_preset_name_matches_that_preset():
    """Files named after an alias (Llama-3.2-1B-Instruct) resolve to the same architecture."""
    checked = 0
    for stem in hf_config_stems():
        preset_id = stem.replace("--", "/")
        try:
            preset = get_preset(preset_id)
        except UnknownPresetError:
            continue
        checked += 1
        assert _unnamed(preset) == _unnamed(parse_hf_config(load_hf_config(stem))), stem
    assert checked >= len(PRESET_IDS) - len(SIBLINGS)


def test_issue_2_preset_list_is_covered():
    required = [
        "meta-llama/Llama-2-7b-hf",
        "meta-llama/Llama-2-70b-hf",
        "meta-llama/Llama-3.1-8B",
        "meta-llama/Llama-3.1-70B",
        "meta-llama/Llama-3.1-405B",
        "meta-llama/Llama-3.2-1B",
        "meta-llama/Llama-3.2-3B",
        "mistralai/Mistral-7B-v0.1",
        "mistralai/Mistral-7B-v0.3",
        "mistralai/Mixtral-8x7B-v0.1",
        "mistralai/Mixtral-8x22B-v0.1",
        "Qwen/Qwen2.5-7B",
        "Qwen/Qwen2.5-72B",
        "Qwen/Qwen3-4B",
        "Qwen/Qwen3-8B",
        "Qwen/Qwen3-30B-A3B",
        "microsoft/Phi-3-mini-4k-instruct",
        "microsoft/phi-4",
        "google/gemma-2-9b",
        "google/gemma-3-27b-it",
        "deepseek-ai/DeepSeek-V3",
        "openai/gpt-oss-20b",
        "openai/gpt-oss-120b",
        "openai-community/gpt2",
        "google-bert/bert-base-uncased",
        "tiiuae/falcon-7b",
        "facebook/opt-13b",
        "google-t5/t5-base",
    ]
    assert set(required) <= set(PRESET_IDS)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-8B"),
        ("META-LLAMA/llama-3.1-8b", "meta-llama/Llama-3.1-8B"),
        ("llama-3.1-8b", "meta-llama/Llama-3.1-8B"),
        ("  Llama-3.1-8B  ", "meta-llama/Llama-3.1-8B"),
        ("meta-llama/Meta-Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B"),
        ("llama-2-7b", "meta-llama/Llama-2-7b-hf"),
        ("mixtral-8x7b", "mistralai/Mixtral-8x7B-v0.1"),
        ("mistral-7b", "mistralai/Mistral-7B-v0.1"),
        ("qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B"),
        ("phi-3-mini", "microsoft/Phi-3-mini-4k-instruct"),
        ("gpt2", "openai-community/gpt2"),
        ("bert-base-uncased", "google-bert/bert-base-uncased"),
        ("t5-base", "google-t5/t5-base"),
        ("DeepSeek-V3", "deepseek-ai/DeepSeek-V3"),
        ("gpt-oss-120b", "openai/gpt-oss-120b"),
        ("gemma-3-27b", "google/gemma-3-27b-it"),
        ("falcon-7b-instruct", "tiiuae/falcon-7b"),
    ],
)
def test_ids_and_aliases_resolve_case_insensitively(name, expected):
    assert get_preset(name).name == expected


def test_unknown_preset_names_the_field_and_suggests_close_ids():
    with pytest.raises(UnknownPresetError) as caught:
        get_preset("meta-llama/Llama-3.1-7B")
    assert caught.value.field == "model.preset"
    assert "meta-llama/Llama-3.1-8B" in caught.value.message
    with pytest.raises(UnknownPresetError):
        get_preset("")


def test_no_alias_is_shared_by_two_presets():
    seen: dict[str, str] = {}
    for info in list_presets():
        for key in (info.id, *info.aliases):
            assert seen.setdefault(key.lower(), info.id) == info.id


def test_list_presets_carries_the_numbers():
    by_id = {p.id: p for p in list_presets()}
    mixtral = by_id["mistralai/Mixtral-8x7B-v0.1"]
    assert mixtral.family == "mixtral"
    assert mixtral.total_parameters == 46_702_792_704
    assert mixtral.active_parameters == 12_879_925_248  # case F07
    assert (mixtral.num_layers, mixtral.hidden_size) == (32, 4096)
    assert (mixtral.num_attention_heads, mixtral.num_kv_heads) == (32, 8)
    assert mixtral.context_length == 32768
    assert "mixtral-8x7b" in mixtral.aliases
    llama = by_id["meta-llama/Llama-3.1-8B"]
    assert llama.total_parameters == llama.active_parameters == 8_030_261_248
    assert "Llama-3.1-8B" in llama.aliases
    # JSON-encodable for the HTTP layer.
    assert b'"total_parameters":8030261248' in msgspec.json.encode(llama)


def test_every_preset_is_exact_and_consistent():
    for info in list_presets():
        arch = get_preset(info.id)
        p = arch.parameters
        assert p.total == p.embedding + p.lm_head + p.linear + p.other, info.id
        assert (info.total_parameters, info.active_parameters) == (p.total, p.active)
        assert (p.active < p.total) == arch.is_moe or arch.family == "gemma3", info.id


def test_preset_config_is_a_copy():
    config = preset_config("llama-3.1-8b")
    config["hidden_size"] = 1
    assert preset_config("llama-3.1-8b")["hidden_size"] == 4096
    nested = preset_config("gemma-3-27b")
    nested["text_config"]["hidden_size"] = 1
    assert preset_config("gemma-3-27b")["text_config"]["hidden_size"] == 5376
