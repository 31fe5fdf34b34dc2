"""Bad configs: every fault is an InvalidSpecError (or UnsupportedModelError) naming the key's
dotted path, never a crash; random JSON thrown at the parser only ever yields DomainError."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hf_data import hf_config_stems, load_hf_config
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_advisor.core.architecture import Architecture
from gpu_advisor.core.errors import DomainError, InvalidSpecError, UnsupportedModelError
from gpu_advisor.core.models import parse_hf_config

LLAMA = "meta-llama--Llama-3.1-8B"


def _llama(**changes: Any) -> dict[str, Any]:
    config = load_hf_config(LLAMA)
    for key, value in changes.items():
        if value is ...:
            config.pop(key, None)
        else:
            config[key] = value
    return config


def _field_of(config: Any) -> str | None:
    with pytest.raises(InvalidSpecError) as caught:
        parse_hf_config(config)
    assert caught.value.field is not None
    assert caught.value.field in caught.value.message  # the message names the path too
    return caught.value.field


@pytest.mark.parametrize(
    "key",
    [
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "intermediate_size",
        "vocab_size",
    ],
)
def test_missing_shape_key_is_named(key):
    assert _field_of(_llama(**{key: ...})) == f"model.config.{key}"


def test_missing_key_message_says_what_to_set():
    with pytest.raises(InvalidSpecError) as caught:
        parse_hf_config(_llama(num_attention_heads=...))
    assert "attention (query) heads" in caught.value.message


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("hidden_size", 0),
        ("hidden_size", -4096),
        ("num_hidden_layers", 0),
        ("num_attention_heads", -1),
        ("num_key_value_heads", 0),
        ("intermediate_size", 0),
        ("vocab_size", 0),
        ("head_dim", 0),
        ("hidden_size", 10**7),  # absurd width
        ("vocab_size", 10**8),  # absurd vocabulary (> 10**7)
        ("num_hidden_layers", 10**6),
        ("max_position_embeddings", 10**12),
        ("hidden_size", True),
        ("hidden_size", "4096"),
        ("hidden_size", 4096.5),
        ("hidden_size", float("inf")),
        ("hidden_size", float("nan")),
        ("hidden_size", 1e300),
        ("hidden_size", [4096]),
        ("tie_word_embeddings", "no"),
        ("mlp_bias", 0),
    ],
)
def test_bad_values_are_named(key, value):
    assert _field_of(_llama(**{key: value})) == f"model.config.{key}"


def test_integral_floats_are_accepted():
    arch = parse_hf_config(_llama(hidden_size=4096.0))
    assert arch.hidden_size == 4096
    assert isinstance(arch.hidden_size, int)


def test_heads_must_divide_hidden_when_no_head_dim():
    assert _field_of(_llama(num_attention_heads=30, num_key_value_heads=10)) == (
        "model.config.num_attention_heads"
    )
    # With an explicit head_dim the heads need not divide the hidden size (Qwen3, Gemma).
    arch = parse_hf_config(_llama(num_attention_heads=30, num_key_value_heads=10, head_dim=128))
    assert arch.head_dim == 128


def test_kv_heads_must_divide_heads():
    assert _field_of(_llama(num_key_value_heads=5)) == "model.config.num_key_value_heads"


def test_absurd_total_is_rejected_on_the_config():
    # 10,000 layers of width 1,000,000 describe ~1.2e17 parameters (> 1e14).
    config = _llama(
        hidden_size=1_000_000,
        num_hidden_layers=10_000,
        num_attention_heads=1000,
        num_key_value_heads=1000,
    )
    assert _field_of(config) == "model.config"


def test_not_an_object():
    assert _field_of([1, 2, 3]) == "model.config"


def test_unsupported_family_and_missing_model_type():
    with pytest.raises(UnsupportedModelError) as caught:
        parse_hf_config({"model_type": "mamba", "hidden_size": 768})
    assert caught.value.field == "model.config.model_type"
    assert "llama" in caught.value.message  # lists what is supported
    with pytest.raises(UnsupportedModelError) as caught:
        parse_hf_config({"hidden_size": 768})
    assert caught.value.field == "model.config.model_type"
    with pytest.raises(UnsupportedModelError):
        parse_hf_config({"architectures": ["MambaForCausalLM"]})


def test_architectures_stand_in_for_a_missing_model_type():
    arch = parse_hf_config(_llama(model_type=...))
    assert arch.family == "llama"
    assert arch.parameters.total == 8_030_261_248


def test_field_prefix_is_configurable():
    with pytest.raises(InvalidSpecError) as caught:
        parse_hf_config(_llama(hidden_size=0), field="body.model.config")
    assert caught.value.field == "body.model.config.hidden_size"


def test_moe_experts_per_token_cannot_exceed_experts():
    config = load_hf_config("mistralai--Mixtral-8x7B-v0.1") | {"num_experts_per_tok": 9}
    assert _field_of(config) == "model.config.num_experts_per_tok"


def test_layer_types_must_match_the_layer_count():
    config = load_hf_config("Qwen--Qwen2.5-7B") | {"layer_types": ["full_attention"] * 3}
    assert _field_of(config) == "model.config.layer_types"
    config = load_hf_config("Qwen--Qwen2.5-7B") | {"layer_types": [1] * 28}
    assert _field_of(config) == "model.config.layer_types"


# --- fuzzing ---------------------------------------------------------------------------------

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**20), max_value=10**20)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5)
    ),
    max_leaves=20,
)
SIZES = st.one_of(
    st.integers(min_value=-3, max_value=70),
    st.sampled_from([128, 4096, 10**6, 10**7, 10**9, 10**15]),
    st.floats(allow_nan=True),
    JSON,
)
STEMS = hf_config_stems()
KEYS = sorted({key for stem in STEMS for key in load_hf_config(stem)})


def _valid(arch: Architecture) -> None:
    p = arch.parameters
    assert p.total == p.embedding + p.lm_head + p.linear + p.other
    assert 0 < p.active <= p.total
    assert arch.layer_windows == () or len(arch.layer_windows) == arch.num_layers


@settings(max_examples=300, derandomize=True, deadline=None)
@given(config=st.dictionaries(st.sampled_from([*KEYS, "text_config"]), JSON, max_size=12))
def test_random_json_objects_only_raise_domain_errors(config):
    with contextlib.suppress(DomainError):
        _valid(parse_hf_config(config))


@settings(max_examples=500, derandomize=True, deadline=None)
@given(
    stem=st.sampled_from(STEMS),
    changes=st.dictionaries(st.sampled_from(KEYS), SIZES, min_size=1, max_size=4),
    removed=st.sets(st.sampled_from(KEYS), max_size=3),
)
def test_mutated_real_configs_only_raise_domain_errors(stem, changes, removed):
    config = load_hf_config(stem)
    for key in removed:
        config.pop(key, None)
    config.update(changes)
    field: str | None = "not raised"
    try:
        _valid(parse_hf_config(config))
    except DomainError as error:
        field = error.field
    assert field is not None  # every error names a field


@settings(max_examples=100, derandomize=True, deadline=None)
@given(value=JSON)
def test_any_json_value_as_config(value):
    with contextlib.suppress(DomainError):
        _valid(parse_hf_config(value))
