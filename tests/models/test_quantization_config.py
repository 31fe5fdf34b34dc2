"""``quantization_config`` and ``rope_scaling`` of a posted config.json: what the estimator
sizes is read exactly; anything else is an InvalidSpecError naming the key (a 422), never a
checkpoint silently sized as bf16 weights."""

from __future__ import annotations

from typing import Any

import pytest
from hf_data import hf_config_stems, load_hf_config

from gpu_advisor.core.errors import InvalidSpecError
from gpu_advisor.core.models import parse_hf_config

LLAMA = "meta-llama--Llama-3.1-8B"
QUANT = "model.config.quantization_config"
ROPE = "model.config.rope_scaling"


def _llama(**changes: Any) -> dict[str, Any]:
    return load_hf_config(LLAMA) | changes


def _error(config: dict[str, Any]) -> InvalidSpecError:
    with pytest.raises(InvalidSpecError) as caught:
        parse_hf_config(config)
    assert caught.value.field is not None
    assert caught.value.field in caught.value.message  # the message names the path too
    return caught.value


@pytest.mark.parametrize(
    ("bits", "group_size", "expected"),
    [
        (2, 128, ("int2", 128)),
        (3, 128, ("int3", 128)),
        (4, 128, ("int4", 128)),
        (8, 128, ("int8-weight-only", 128)),
        (4, 32, ("int4", 32)),
        (3, -1, ("int3", -1)),
        (8, -1, ("int8-weight-only", -1)),
        (4.0, 64.0, ("int4", 64)),  # integral floats read as integers, as everywhere
    ],
)
def test_gptq_widths_and_group_sizes_are_read(bits, group_size, expected):
    quant = {"quant_method": "gptq", "bits": bits, "group_size": group_size}
    arch = parse_hf_config(_llama(quantization_config=quant))
    assert (arch.shipped_weight_format, arch.shipped_group_size) == expected
    assert arch.shipped_quantized_modules == "all-linear"
    assert arch.parameters.total == 8_030_261_248  # a quantised model keeps its parameters


def test_defaults_follow_transformers_configs():
    # GPTQConfig and AwqConfig default group_size to 128; AwqConfig defaults bits to 4.
    gptq = parse_hf_config(_llama(quantization_config={"quant_method": "GPTQ", "bits": 3}))
    assert (gptq.shipped_weight_format, gptq.shipped_group_size) == ("int3", 128)
    awq = parse_hf_config(_llama(quantization_config={"quant_method": "awq"}))
    assert (awq.shipped_weight_format, awq.shipped_group_size) == ("int4", 128)
    # A legacy bitsandbytes config has no quant_method (AutoQuantizationConfig.from_dict).
    legacy = parse_hf_config(_llama(quantization_config={"load_in_4bit": True}))
    assert (legacy.shipped_weight_format, legacy.shipped_group_size) == ("nf4-single-quant", None)


@pytest.mark.parametrize(
    ("quant", "field", "says"),
    [
        ({"quant_method": "zzz"}, "quant_method", "gptq"),
        ({"quant_method": "hqq", "nbits": 4}, "quant_method", "supported methods"),
        ({"quant_method": "compressed-tensors"}, "quant_method", "awq"),
        ({"quant_method": 4}, "quant_method", "string"),
        ({"bits": 4}, "quant_method", "is missing"),
        ({"quant_method": "gptq", "bits": 3.5}, "bits", "integer"),
        ({"quant_method": "gptq", "bits": "four"}, "bits", "integer"),
        ({"quant_method": "gptq", "bits": "8"}, "bits", "integer"),
        ({"quant_method": "gptq", "bits": True}, "bits", "integer"),
        ({"quant_method": "gptq"}, "bits", "missing"),
        ({"quant_method": "gptq", "bits": 5}, "bits", "2, 3, 4, 8"),
        ({"quant_method": "gptq", "bits": 16}, "bits", "2, 3, 4, 8"),
        ({"quant_method": "awq", "bits": 0}, "bits", "between"),
        ({"quant_method": "gptq", "bits": 4, "group_size": "128"}, "group_size", "integer"),
        ({"quant_method": "gptq", "bits": 4, "group_size": 0}, "group_size", "power of two"),
        ({"quant_method": "gptq", "bits": 4, "group_size": 100}, "group_size", "power of two"),
        ({"quant_method": "gptq", "bits": 4, "group_size": -2}, "group_size", "between"),
        ({"quant_method": "gptq", "bits": 4, "group_size": 4}, "group_size", "power of two"),
        ({"quant_method": "gptq", "bits": 4, "lm_head": True}, "lm_head", "16-bit"),
        ({"quant_method": "gptq", "bits": 4, "lm_head": "no"}, "lm_head", "true or false"),
        ({"quant_method": "bitsandbytes"}, "load_in_4bit", "must be true"),
        ({"quant_method": "bitsandbytes", "load_in_4bit": "true"}, "load_in_4bit", "true or"),
        (
            {"quant_method": "bitsandbytes", "load_in_4bit": True, "load_in_8bit": True},
            "load_in_4bit",
            "both true",
        ),
        ({"quant_method": "fp8", "weight_block_size": [64, 64]}, "weight_block_size", "128"),
        ({"quant_method": "mxfp4"}, "quant_method", "routed experts"),  # a dense model
    ],
)
def test_what_cannot_be_sized_is_a_422_naming_the_key(quant, field, says):
    error = _error(_llama(quantization_config=quant))
    assert error.field == f"{QUANT}.{field}"
    assert says in error.message


def test_quantization_config_must_be_an_object():
    assert _error(_llama(quantization_config="gptq")).field == QUANT


@pytest.mark.parametrize(
    ("rope", "field"),
    [
        ("yarn", ROPE),
        ([8.0], ROPE),
        (8.0, ROPE),
        ({"rope_type": "llama3", "factor": "8"}, f"{ROPE}.factor"),
        ({"rope_type": "linear", "factor": True}, f"{ROPE}.factor"),
        ({"rope_type": "linear", "factor": 0}, f"{ROPE}.factor"),
        ({"rope_type": "linear", "factor": -2.0}, f"{ROPE}.factor"),
        ({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": "1"}, f"{ROPE}.low_freq_factor"),
        ({"type": "yarn", "factor": 40, "beta_fast": [32]}, f"{ROPE}.beta_fast"),
        (
            {"rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": "4096"},
            f"{ROPE}.original_max_position_embeddings",
        ),
        (
            {"rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 4096.5},
            f"{ROPE}.original_max_position_embeddings",
        ),
        ({"rope_type": 3, "factor": 8.0}, f"{ROPE}.rope_type"),
        ({"type": ["yarn"], "factor": 8.0}, f"{ROPE}.type"),
        ({"rope_type": "yarn", "factor": 32.0, "truncate": "false"}, f"{ROPE}.truncate"),
        ({"rope_type": "longrope", "short_factor": [1.0, "2"]}, f"{ROPE}.short_factor"),
        ({"rope_type": "longrope", "long_factor": 1.0}, f"{ROPE}.long_factor"),
        ({"rope_type": "default", "mrope_section": [16, 24.5]}, f"{ROPE}.mrope_section"),
    ],
)
def test_malformed_rope_scaling_is_a_422_naming_the_key(rope, field):
    assert _error(_llama(rope_scaling=rope)).field == field


def test_rope_scaling_inside_text_config_is_checked():
    config = load_hf_config("google--gemma-3-27b-it")
    config["text_config"] = config["text_config"] | {"rope_scaling": "linear"}
    assert _error(config).field == "model.config.text_config.rope_scaling"


def test_well_formed_rope_scaling_is_accepted():
    for rope in (
        None,
        {"rope_type": "linear", "factor": 8},
        {"rope_type": "longrope", "short_factor": [1.0, 1], "long_factor": [1.5], "factor": 4.0},
        {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768.0},
        {"rope_type": "dynamic", "factor": 2.0, "unknown_new_key": "kept"},
    ):
        assert parse_hf_config(_llama(rope_scaling=rope)).parameters.total == 8_030_261_248


@pytest.mark.parametrize("stem", hf_config_stems())
def test_every_real_config_still_parses(stem):
    # Their rope_scaling (llama3, yarn, linear, null) and quantization_config (DeepSeek-V3 fp8
    # 128x128, gpt-oss mxfp4) are all accepted.
    parse_hf_config(load_hf_config(stem))
