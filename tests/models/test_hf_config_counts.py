"""Every file in shared/data/hf-configs parses, and its total equals (a) the count transformers
5.24.0 measures on the meta device (transformers_param_counts.json) and (b) the published total
stated in the folder's README, where it states an exact one."""

from __future__ import annotations

import pytest
from hf_data import hf_config_stems, load_hf_config, transformers_counts

from gpu_advisor.core.models import parse_hf_config

STEMS = hf_config_stems()

# README "Files": exact published totals (keras-hub preset metadata unless noted).
PUBLISHED = {
    "meta-llama--Llama-3.1-8B": 8_030_261_248,
    "meta-llama--Llama-2-7b-hf": 6_738_415_616,
    "mistralai--Mistral-7B-v0.1": 7_241_732_096,
    "mistralai--Mixtral-8x7B-v0.1": 46_702_792_704,
    "Qwen--Qwen2.5-72B-Instruct": 72_706_203_648,
    "Qwen--Qwen3-8B": 8_190_735_360,
    "Qwen--Qwen3-30B-A3B": 30_532_122_624,
    "Qwen--Qwen3-4B": 4_022_468_096,
    "google--gemma-2-9b": 9_241_705_984,
    "microsoft--Phi-3-mini-4k-instruct": 3_821_079_552,
    "openai--gpt-oss-20b": 20_914_757_184,
    "openai--gpt-oss-120b": 116_829_156_672,
    "openai-community--gpt2": 124_439_808,
    "google-bert--bert-base-uncased": 109_482_240,
    "google-t5--t5-base": 222_903_552,
}

# README: model-card figures stated to the billion (or to 0.01B for Qwen2.5-7B's "7.61B").
ROUNDED = {
    "meta-llama--Llama-3.1-70B": (70e9, 0.01),
    "meta-llama--Llama-3.1-405B": (405e9, 0.01),
    "Qwen--Qwen2.5-7B": (7.61e9, 0.001),
    "deepseek-ai--DeepSeek-V3": (671e9, 0.001),
    "microsoft--phi-4": (14.7e9, 0.01),
    "facebook--opt-13b": (13e9, 0.02),
}


def test_the_folder_holds_the_expected_files():
    assert len(STEMS) == 30
    assert set(transformers_counts()) == set(STEMS)


@pytest.mark.parametrize("stem", STEMS)
def test_total_equals_transformers_meta_device_count(stem):
    arch = parse_hf_config(load_hf_config(stem))
    p = arch.parameters
    assert p.total == transformers_counts()[stem]
    assert p.total == p.embedding + p.lm_head + p.linear + p.other
    assert 0 < p.active <= p.total


@pytest.mark.parametrize("stem", sorted(PUBLISHED))
def test_total_equals_published_exact_figure(stem):
    assert parse_hf_config(load_hf_config(stem)).parameters.total == PUBLISHED[stem]


@pytest.mark.parametrize("stem", sorted(ROUNDED))
def test_total_matches_rounded_model_card_figure(stem):
    figure, tolerance = ROUNDED[stem]
    total = parse_hf_config(load_hf_config(stem)).parameters.total
    assert abs(total - figure) <= figure * tolerance


def test_gemma3_27b_published_figures_differ_only_by_the_padded_vocabulary():
    """keras-hub counts gemma-3-27b with a 262,144-row vocabulary; the config (transformers'
    Gemma3TextConfig default) has 262,208 rows: 64 x 5,376 = 344,064 parameters more, the whole
    difference the README reports."""
    arch = parse_hf_config(load_hf_config("google--gemma-3-27b-it"))
    padding = (262208 - 262144) * 5376
    assert arch.parameters.total - padding == 27_432_062_576  # keras-hub gemma3_instruct_27b
    assert arch.parameters.active - padding == 27_009_002_240  # ..._27b_text (text only)


def test_falcon_7b_index_total_size_stores_the_tied_head_twice():
    arch = parse_hf_config(load_hf_config("tiiuae--falcon-7b"))
    index_values = 14_434_379_520 // 2  # bf16 bytes -> values
    assert index_values - arch.parameters.total == 65024 * 4544  # the tied head, again
