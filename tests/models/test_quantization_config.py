"""``quantization_config`` of a posted config.json: what the estimator sizes is read exactly;
anything else is an InvalidSpecError naming the key (a 422), never a checkpoint silently sized
as bf16 weights."""

from __future__ import annotations

from typing import Any

import pytest
from hf_data import hf_config_stems, load_hf_config

from gpu_advisor.core.errors import InvalidSpecError
from gpu_advisor.core.models import parse_hf_config

LLAMA = "meta-llama--Llama-3.1-8B"
QUANT = "model.config.quantization_config"


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
        (8, 128, ("int8", 128)),
        (4, 32, ("int4", 32)),
        (3, -1, ("int3", -1)),
        (8, -1, ("int8", -1)),
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
    assert (legacy.shipped_weight_format, legacy.shipped_group_size) == ("nf4", None)


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


@pytest.mark.parametrize("stem", hf_config_stems())
def test_every_real_config_still_parses(stem):
    # Their quantization_config (DeepSeek-V3 fp8 128x128, gpt-oss mxfp4) is accepted.
    parse_hf_config(load_hf_config(stem))
