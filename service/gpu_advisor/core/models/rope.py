"""Checks on a config's ``rope_scaling`` object.

RoPE scaling changes no parameter count and no memory term, but a malformed value means the
config is not what the caller thinks it is, so it is a 422 naming the key rather than ignored
(transformers' ``rope_config_validation`` rejects the same configs). The keys checked are those
of transformers' ``modeling_rope_utils`` rope types (default, linear, dynamic, yarn, longrope,
llama3) and of DeepSeek-V3 and Qwen2-VL configs; other keys pass unchecked.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Final

from gpu_advisor.core.errors import InvalidSpecError
from gpu_advisor.core.models.reader import ConfigReader, show_value

STRING_KEYS: Final = ("rope_type", "type")
"""The scaling kind (``type`` is the older spelling)."""

NUMBER_KEYS: Final = (
    "factor",
    "attention_factor",
    "beta_fast",
    "beta_slow",
    "low_freq_factor",
    "high_freq_factor",
    "mscale",
    "mscale_all_dim",
    "short_mscale",
    "long_mscale",
)
"""Real-valued fields (``factor`` must also be positive)."""

INTEGER_KEYS: Final = ("original_max_position_embeddings",)

NUMBER_LIST_KEYS: Final = ("short_factor", "long_factor")
"""longrope (Phi-3): one factor per rotary dimension pair."""

INTEGER_LIST_KEYS: Final = ("mrope_section",)
"""Qwen2-VL multimodal RoPE sections."""

BOOL_KEYS: Final = ("truncate", "mrope_interleaved")

MAX_LIST: Final = 100_000


def check_rope_scaling(r: ConfigReader) -> None:
    """Check ``rope_scaling`` of the config read by ``r`` (absent or null passes).

    Raises:
        InvalidSpecError: not an object (``"yarn"``), or a known key of the wrong type or out of
            range (``factor: "8"``); ``field`` is ``...rope_scaling`` or the sub-key's path.
    """
    rope = r.opt_object("rope_scaling")
    if rope is None:
        return
    for key in STRING_KEYS:
        rope.opt_string(key)
    for key in NUMBER_KEYS:
        value = rope.raw(key)
        if value is not None and not _is_number(value):
            raise _wrong(rope, key, value, "a number")
    factor = rope.raw("factor")
    if isinstance(factor, int | float) and factor <= 0:  # a number here (checked above)
        raise _wrong(rope, "factor", factor, "a positive number")
    for key in INTEGER_KEYS:
        rope.opt_integer(key, what="the context length RoPE was trained at", maximum=2**40)
    for key in BOOL_KEYS:
        rope.flag(key, default=False)
    for key, check, what in (
        *((k, _is_number, "numbers") for k in NUMBER_LIST_KEYS),
        *((k, _is_integer, "integers") for k in INTEGER_LIST_KEYS),
    ):
        values = rope.opt_list(key, max_length=MAX_LIST)
        for index, value in enumerate(values or ()):
            if not check(value):
                raise InvalidSpecError(
                    f"{rope.path(key)} must be a list of {what}; item {index} is "
                    f"{show_value(value)}.",
                    field=rope.path(key),
                )


def _is_number(value: object) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and math.isfinite(value)


def _is_integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _wrong(rope: ConfigReader, key: str, value: object, what: str) -> InvalidSpecError:
    return InvalidSpecError(
        f"{rope.path(key)} must be {what}, got {show_value(value)}.", field=rope.path(key)
    )


def check_nested_rope_scaling(r: ConfigReader) -> None:
    """:func:`check_rope_scaling` on the config and on its ``text_config`` (Gemma 3 keeps
    ``rope_scaling`` there), when that is an object; a non-object ``text_config`` is left to
    the family parser's own error."""
    check_rope_scaling(r)
    if isinstance(r.raw("text_config"), Mapping):
        nested = r.opt_object("text_config")
        if nested is not None:
            check_rope_scaling(nested)
