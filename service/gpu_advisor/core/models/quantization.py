"""The weight format a checkpoint ships in, read from its ``quantization_config``.

Every ``quantization_config`` either maps to a format the estimator sizes exactly or is an
:class:`~gpu_advisor.core.errors.InvalidSpecError` naming the offending key and listing what is
supported: a quantised checkpoint is never sized silently as 16-bit weights.

Supported (the sizes are in :mod:`gpu_advisor.core.memory.formats`):

* ``gptq`` / ``awq``: packed integer weights of ``bits`` 2, 3, 4 or 8 with one fp16 scale and
  one packed zero point per ``group_size`` input weights (``-1``: one group per output channel),
  on all linear layers of the blocks; 8 bits is ``int8-weight-only`` (dequantised to 16-bit in
  the matmul, unlike W8A8 ``int8``). Defaults follow transformers' ``GPTQConfig`` (``bits``
  required, ``group_size=128``) and ``AwqConfig`` (``bits=4``, ``group_size=128``).
* ``bitsandbytes``: ``nf4`` with ``load_in_4bit`` (``nf4-single-quant`` without
  ``bnb_4bit_use_double_quant``), ``int8`` (LLM.int8()) with ``load_in_8bit``.
  A config with ``load_in_4bit`` / ``load_in_8bit`` and no ``quant_method`` is bitsandbytes, as
  transformers' ``AutoQuantizationConfig.from_dict`` reads it.
* ``fp8`` (DeepSeek-V3, 128x128 block scales) and ``fbgemm_fp8``: ``fp8`` on all block linears.
* ``mxfp4`` (gpt-oss): ``mxfp4`` on the routed experts only; attention, router, embeddings and
  head stay bf16 (its ``modules_to_not_convert``).
"""

from __future__ import annotations

from typing import Final, Literal

from msgspec import Struct

from gpu_advisor.core.errors import InvalidSpecError
from gpu_advisor.core.models.reader import ConfigReader, show_value

WEIGHT_ONLY_INT8: Final = "int8-weight-only"
"""Shipped format of 8-bit GPTQ/AWQ weights: sized as packed 8-bit with group constants
(:func:`gpu_advisor.core.memory.formats.packed_int_format`), run at 16-bit compute."""
NF4_SINGLE_QUANT: Final = "nf4-single-quant"
"""Shipped format of bitsandbytes 4-bit without double quantisation (4.5 bits per weight,
:data:`gpu_advisor.core.memory.formats.NF4_SINGLE`)."""

QuantizedModules = Literal["all-linear", "routed-experts"]

SUPPORTED_METHODS: Final = ("awq", "bitsandbytes", "fbgemm_fp8", "fp8", "gptq", "mxfp4")
"""``quant_method`` values (lower case) that :func:`shipped_quantization` sizes."""

PACKED_INT_BITS: Final = (2, 3, 4, 8)
"""``bits`` of GPTQ/AWQ checkpoints: the widths AutoGPTQ packs and vLLM's GPTQ kernels load
(vLLM ``quantization/gptq.py``: ``GPTQConfig`` accepts ``weight_bits`` 2, 3, 4, 8)."""

MIN_GROUP_SIZE: Final = 8
MAX_GROUP_SIZE: Final = 65_536
"""Group sizes are powers of two in this range (published checkpoints use 32, 64, 128 and
1024) or ``-1``; powers of two keep the bits per weight exact in
:func:`~gpu_advisor.core.memory.formats.elements_bytes`' 2**-16 resolution."""

DEFAULT_GROUP_SIZE: Final = 128
"""transformers ``GPTQConfig`` and ``AwqConfig`` default ``group_size``."""

FP8_BLOCK: Final = [128, 128]
"""The fp8 block layout the estimator models (DeepSeek-V3 ``weight_block_size``)."""


class ShippedQuantization(Struct, frozen=True, kw_only=True):
    """How a checkpoint's weights are stored, as :class:`~gpu_advisor.core.architecture.
    Architecture` records it.

    Attributes:
        weight_format: ``fp8``, ``mxfp4``, ``nf4``, ``int2``/``int3``/``int4``/``int8``, or
            None for an unquantised checkpoint.
        modules: what the format covers (``all-linear`` or ``routed-experts``), or None.
        group_size: input weights per scale of a GPTQ/AWQ format (``-1``: one group per output
            channel); None for every other format.
    """

    weight_format: str | None = None
    modules: QuantizedModules | None = None
    group_size: int | None = None


NOT_QUANTIZED: Final = ShippedQuantization()


def shipped_quantization(r: ConfigReader) -> ShippedQuantization:
    """The shipped weight format of the config read by ``r`` (see the module docstring).

    Raises:
        InvalidSpecError: ``quantization_config`` is not an object, or one of its keys names a
            method, width, group size or layout the estimator cannot size; ``field`` is the
            key's path (``model.config.quantization_config.bits``).
    """
    quant = r.opt_object("quantization_config")
    if quant is None:
        return NOT_QUANTIZED
    method = _method(quant)
    match method:
        case "gptq" | "awq":
            return _packed_int(quant, method)
        case "bitsandbytes":
            return _bitsandbytes(quant)
        case "fp8":
            _check_fp8_block(quant)
            return ShippedQuantization(weight_format="fp8", modules="all-linear")
        case "fbgemm_fp8":
            return ShippedQuantization(weight_format="fp8", modules="all-linear")
        case "mxfp4":
            return ShippedQuantization(weight_format="mxfp4", modules="routed-experts")
        case _:
            raise InvalidSpecError(
                f"{quant.path('quant_method')} {show_value(method)} is not supported; supported "
                f"methods: {', '.join(SUPPORTED_METHODS)}. Remove quantization_config and set "
                "workload.weight_dtype to size the weights in another format.",
                field=quant.path("quant_method"),
            )


def _method(quant: ConfigReader) -> str:
    method = quant.opt_string("quant_method")
    if method is not None:
        return method.lower()
    # transformers AutoQuantizationConfig.from_dict: legacy bitsandbytes configs have no
    # quant_method, only load_in_4bit / load_in_8bit.
    if quant.raw("load_in_4bit") is True or quant.raw("load_in_8bit") is True:
        return "bitsandbytes"
    raise InvalidSpecError(
        f"{quant.path('quant_method')} is missing; set it to one of "
        f"{', '.join(SUPPORTED_METHODS)}.",
        field=quant.path("quant_method"),
    )


def _packed_int(quant: ConfigReader, method: str) -> ShippedQuantization:
    """GPTQ/AWQ: ``bits`` in :data:`PACKED_INT_BITS`, ``group_size`` -1 or a power of two."""
    bits = quant.integer(
        "bits",
        what=f"the {method} weight width, one of {', '.join(map(str, PACKED_INT_BITS))}",
        default=4 if method == "awq" else None,
        maximum=64,
    )
    if bits not in PACKED_INT_BITS:
        raise InvalidSpecError(
            f"{quant.path('bits')} {bits} is not supported for {method}; supported widths: "
            f"{', '.join(map(str, PACKED_INT_BITS))} bits.",
            field=quant.path("bits"),
        )
    group_size = quant.integer(
        "group_size",
        what="the input weights per scale, -1 for one group per output channel",
        default=DEFAULT_GROUP_SIZE,
        minimum=-1,
        maximum=MAX_GROUP_SIZE,
    )
    if group_size != -1 and (group_size < MIN_GROUP_SIZE or group_size & (group_size - 1)):
        raise InvalidSpecError(
            f"{quant.path('group_size')} {group_size:,} is not supported; use -1 (one group per "
            f"output channel) or a power of two from {MIN_GROUP_SIZE} to {MAX_GROUP_SIZE:,} "
            "(published checkpoints use 32, 64, 128 or 1024).",
            field=quant.path("group_size"),
        )
    if quant.flag("lm_head", default=False):
        raise InvalidSpecError(
            f"{quant.path('lm_head')} is true (a quantised output head), which is not "
            "modelled: the estimator keeps embeddings and the head in 16-bit, as AutoGPTQ and "
            "AutoAWQ checkpoints do.",
            field=quant.path("lm_head"),
        )
    # 8-bit GPTQ/AWQ is weight-only (the kernels dequantise to 16-bit), unlike W8A8 int8
    name = WEIGHT_ONLY_INT8 if bits == 8 else f"int{bits}"
    return ShippedQuantization(weight_format=name, modules="all-linear", group_size=group_size)


def _bitsandbytes(quant: ConfigReader) -> ShippedQuantization:
    """``nf4`` with ``load_in_4bit`` -- 4.127 bits with ``bnb_4bit_use_double_quant``, else
    4.5 (``nf4-single-quant``: transformers' ``BitsAndBytesConfig`` defaults the flag to
    False) -- and ``int8`` with ``load_in_8bit``; exactly one of them."""
    four = quant.flag("load_in_4bit", default=False)
    eight = quant.flag("load_in_8bit", default=False)
    if four and eight:
        raise InvalidSpecError(
            f"{quant.path('load_in_4bit')} and {quant.path('load_in_8bit')} are both true; a "
            "bitsandbytes checkpoint is either 4-bit or 8-bit.",
            field=quant.path("load_in_4bit"),
        )
    if four:
        double = quant.flag("bnb_4bit_use_double_quant", default=False)
        name = "nf4" if double else NF4_SINGLE_QUANT
        return ShippedQuantization(weight_format=name, modules="all-linear")
    if eight:
        return ShippedQuantization(weight_format="int8", modules="all-linear")
    raise InvalidSpecError(
        f"{quant.path('load_in_4bit')} or {quant.path('load_in_8bit')} must be true for a "
        "bitsandbytes checkpoint (4-bit NF4 or 8-bit LLM.int8()).",
        field=quant.path("load_in_4bit"),
    )


def _check_fp8_block(quant: ConfigReader) -> None:
    """fp8 is sized with 128x128 block scales; another ``weight_block_size`` is a 422."""
    block = quant.raw("weight_block_size")
    if block is not None and block != FP8_BLOCK:
        raise InvalidSpecError(
            f"{quant.path('weight_block_size')} {show_value(block)} is not supported; fp8 "
            "checkpoints are sized with 128x128 block scales ([128, 128], DeepSeek-V3).",
            field=quant.path("weight_block_size"),
        )
