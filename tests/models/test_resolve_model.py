"""resolve_model: exactly one of preset / config / parameters; a bare parameter count gives an
approximate generic decoder of exactly that size."""

from __future__ import annotations

import msgspec
import pytest
from hf_data import load_hf_config

from gpu_advisor.core.errors import InvalidSpecError, UnknownPresetError, UnsupportedModelError
from gpu_advisor.core.models import resolve_model
from gpu_advisor.core.spec import ModelSpec


def _spec(**fields):
    """Decode like the HTTP layer does, so the schema's constraints apply."""
    return msgspec.json.decode(msgspec.json.encode(fields), type=ModelSpec)


def test_preset():
    arch = resolve_model(_spec(preset="meta-llama/Llama-3.1-8B"))
    assert arch.parameters.total == 8_030_261_248
    assert arch.approximate is False


def test_config_is_parsed_with_model_config_paths():
    arch = resolve_model(_spec(config=load_hf_config("Qwen--Qwen3-8B")))
    assert arch.parameters.total == 8_190_735_360
    bad = load_hf_config("Qwen--Qwen3-8B")
    del bad["num_attention_heads"]
    with pytest.raises(InvalidSpecError) as caught:
        resolve_model(_spec(config=bad))
    assert caught.value.field == "model.config.num_attention_heads"


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"preset": "llama-3.1-8b", "parameters": 7e9},
        {"preset": "llama-3.1-8b", "config": {"model_type": "llama"}},
        {"config": {"model_type": "llama"}, "parameters": 7e9},
    ],
)
def test_exactly_one_source(fields):
    with pytest.raises(InvalidSpecError) as caught:
        resolve_model(_spec(**fields))
    assert caught.value.field == "model"


def test_architecture_numbers_only_refine_a_parameter_count():
    with pytest.raises(InvalidSpecError) as caught:
        resolve_model(_spec(preset="llama-3.1-8b", num_layers=10))
    assert caught.value.field == "model.num_layers"


def test_unknown_preset_and_unsupported_family():
    with pytest.raises(UnknownPresetError):
        resolve_model(_spec(preset="no-such-model"))
    with pytest.raises(UnsupportedModelError) as caught:
        resolve_model(_spec(config={"model_type": "mamba", "hidden_size": 768}))
    assert caught.value.field == "model.config.model_type"


def test_bare_7b_is_llama_2_7b_shaped_and_exactly_7e9():
    arch = resolve_model(_spec(parameters=7e9))
    assert arch.approximate is True
    assert arch.family == "generic"
    p = arch.parameters
    assert p.total == 7_000_000_000
    assert p.active == p.total
    assert p.total == p.embedding + p.lm_head + p.linear + p.other
    # Hidden: 12 h^3 / 128 + 2 x 32000 x h = 7e9 -> h ~ 4,165, rounded to 4,096 (x 128).
    # Layers: budget / per-layer at the default width 256 x ceil(8/3 x 4096 / 256) = 11,008.
    budget = 7_000_000_000 - 2 * 32000 * 4096 - 4096  # minus embedding, head, final norm
    per_layer = 4 * 4096**2 + 2 * 4096 + 3 * 4096 * 11008  # MHA attention, norms, MLP
    assert round(budget / per_layer) == 33
    assert (arch.hidden_size, arch.num_layers) == (4096, 33)
    assert (arch.num_attention_heads, arch.num_kv_heads, arch.head_dim) == (32, 32, 128)
    # Width fitted to the budget: (budget - 33 x (attention + norms)) // (3 x 4096 x 33).
    width = (budget - 33 * (4 * 4096**2 + 2 * 4096)) // (3 * 4096 * 33)
    assert arch.intermediate_size == width == 11153
    assert 0 <= p.other - (33 * 2 * 4096 + 4096) < 3 * 4096 * 33  # norms + < one MLP column
    assert arch.vocab_size == 32000


def test_bare_count_with_overrides():
    arch = resolve_model(
        _spec(parameters=8.03e9, num_layers=32, hidden_size=4096, num_kv_heads=8, vocab_size=128256)
    )
    assert (arch.num_layers, arch.hidden_size, arch.num_kv_heads) == (32, 4096, 8)
    assert arch.parameters.total == 8_030_000_000
    # Llama-3.1-8B's MLP is 14,336 wide; the fitted width lands within one percent of it.
    assert abs(arch.intermediate_size - 14336) / 14336 < 0.01


@pytest.mark.parametrize("count", [1e7, 1.3e8, 1e9, 7e10, 4.05e11, 1e12, 1e14])
def test_bare_counts_across_the_range_are_exact(count):
    arch = resolve_model(_spec(parameters=count))
    assert arch.parameters.total == round(count)
    assert arch.parameters.other >= 0
    assert arch.num_layers >= 1
    assert arch.intermediate_size >= 1


def test_bare_count_too_small_for_the_vocabulary():
    with pytest.raises(InvalidSpecError) as caught:
        resolve_model(_spec(parameters=1000))
    assert caught.value.field == "model.parameters"
    arch = resolve_model(_spec(parameters=1e6, vocab_size=256, hidden_size=64))
    assert arch.parameters.total == 1_000_000


def test_bare_count_smaller_than_the_given_architecture():
    with pytest.raises(InvalidSpecError) as caught:
        resolve_model(
            _spec(parameters=1e9, num_layers=80, hidden_size=8192, intermediate_size=28672)
        )
    assert caught.value.field == "model.parameters"


def test_bare_count_heads_must_divide_hidden_without_head_dim():
    with pytest.raises(InvalidSpecError) as caught:
        resolve_model(_spec(parameters=7e9, hidden_size=4096, num_attention_heads=30))
    assert caught.value.field == "model.num_attention_heads"
    with pytest.raises(InvalidSpecError) as caught:
        resolve_model(_spec(parameters=7e9, num_attention_heads=32, num_kv_heads=5))
    assert caught.value.field == "model.num_kv_heads"


def test_bare_count_with_too_many_layers_names_num_layers():
    # 1e9 at hidden 8,192 (given): embeddings + head 2 x 32,000 x 8,192 = 524,288,000 and the
    # final norm 8,192 leave 475,703,808; the thinnest layer (MLP width 1) is attention
    # 4 x 8,192^2 = 268,435,456 + norms 16,384 + MLP 3 x 8,192 = 268,476,416, so one layer fits.
    with pytest.raises(InvalidSpecError) as caught:
        resolve_model(_spec(parameters=1e9, num_layers=2, hidden_size=8192))
    assert caught.value.field == "model.num_layers"
    assert "num_layers <= 1" in caught.value.message
    assert resolve_model(_spec(parameters=1e9, num_layers=1, hidden_size=8192)).num_layers == 1


def test_bare_count_below_a_fully_given_architecture_names_every_field():
    with pytest.raises(InvalidSpecError) as caught:
        resolve_model(
            _spec(parameters=1e9, num_layers=80, hidden_size=8192, intermediate_size=28672)
        )
    assert caught.value.field == "model.parameters"
    for name in ("num_layers", "hidden_size", "intermediate_size"):
        assert f"model.{name}" in caught.value.message
