"""Storage formats of weights, KV cache and training states: bits per element, with sources.

A weight format says how many bits one weight costs *including* its quantisation constants
(group scales, zero points, block scales), whether it keeps one scale per output channel on top,
and which parameters it covers. The rule of the common loaders (bitsandbytes, AutoGPTQ/AutoAWQ,
vLLM, transformers' quantizers) is that only the ``nn.Linear`` weights of the transformer blocks
are quantised; token embeddings, the output head, biases and norms stay in 16-bit. GGUF files are
the exception: llama.cpp quantises the embedding and output matrices too, and its published
bits-per-weight figures are whole-file averages, so GGUF formats cover every matrix.

A 4-bit model of N parameters still has N parameters; only the bytes per parameter shrink
(DESIGN "Weights by dtype"; bug report transformers#25978).
"""

from __future__ import annotations

from msgspec import Struct

from gpu_advisor.core.errors import InvalidSpecError


class WeightFormat(Struct, frozen=True, kw_only=True):
    """How one weight element is stored.

    Attributes:
        name: the dtype name used in requests (``bf16``, ``nf4``...).
        bits_per_weight: bits per weight element including group/block constants.
        channel_scale_bits: extra bits per output channel of each quantised matrix
            (per-channel scales of int8/fp8, the scale and zero point of a GPTQ/AWQ format with
            one group per channel; 0 for group-wise formats, whose constants are in
            ``bits_per_weight``).
        covers_embeddings: True when the format also stores the embedding and output head
            (GGUF); False when those stay 16-bit as the common loaders keep them.
        quantized: False for plain floating point (fp32/bf16/fp16).
        source: where the numbers come from.
    """

    name: str
    bits_per_weight: float
    channel_scale_bits: int = 0
    covers_embeddings: bool = False
    quantized: bool = True
    source: str


FP32 = WeightFormat(
    name="fp32", bits_per_weight=32, quantized=False, source="IEEE 754 binary32: 4 bytes"
)
BF16 = WeightFormat(name="bf16", bits_per_weight=16, quantized=False, source="bfloat16: 2 bytes")
FP16 = WeightFormat(
    name="fp16", bits_per_weight=16, quantized=False, source="IEEE 754 binary16: 2 bytes"
)
FP8 = WeightFormat(
    name="fp8",
    bits_per_weight=8,
    channel_scale_bits=32,
    source=(
        "fp8 e4m3 weights, 1 byte, plus one fp32 scale per output channel (vLLM "
        "`fp8` per-channel weight quantisation, compressed-tensors 'channel' strategy)"
    ),
)
FP8_BLOCK128 = WeightFormat(
    name="fp8",
    bits_per_weight=8 + 32 / (128 * 128),
    source=(
        "fp8 e4m3 with one fp32 scale per 128x128 block (DeepSeek-V3 config.json "
        "quantization_config weight_block_size [128, 128]): 8 + 32/16384 bits"
    ),
)
INT8 = WeightFormat(
    name="int8",
    bits_per_weight=8,
    channel_scale_bits=32,
    source=(
        "int8 weights, 1 byte, plus one fp32 absmax scale per output row (bitsandbytes "
        "LLM.int8() Int8Params.SCB; vLLM W8A8 per-channel scales)"
    ),
)
INT4 = WeightFormat(
    name="int4",
    bits_per_weight=4 + 32 / 128,
    source=(
        "GPTQ/AWQ 4-bit, group size 128: 4 bits + one fp16 scale and one zero point stored "
        "at 16 bits per 128 weights = 4 + 32/128 = 4.25 bits (DESIGN; AutoGPTQ/AutoAWQ "
        "qweight/scales/qzeros layout, zeros counted at 16 bits as the conservative bound)"
    ),
)
NF4 = WeightFormat(
    name="nf4",
    bits_per_weight=4 + 8 / 64 + 32 / (64 * 256),
    source=(
        "bitsandbytes NF4 with double quantisation: 4 bits + 8-bit absmax per 64 weights + "
        "fp32 second-level constant per 256 blocks = 4 + 8/64 + 32/(64*256) = 4.127 bits "
        "(Dettmers et al. 2023, QLoRA, arXiv 2305.14314, section 3 'Double Quantization')"
    ),
)
NF4_SINGLE = WeightFormat(
    name="nf4-single-quant",
    bits_per_weight=4 + 32 / 64,
    source=(
        "bitsandbytes 4-bit (nf4 or fp4) without double quantisation, the BitsAndBytesConfig "
        "default: 4 bits + one fp32 absmax per 64 weights = 4.5 bits (QLoRA paper section 3)"
    ),
)
MXFP4 = WeightFormat(
    name="mxfp4",
    bits_per_weight=4 + 8 / 32,
    source=(
        "OCP Microscaling MXFP4: 32 FP4 (E2M1) elements share one 8-bit E8M0 scale = "
        "4 + 8/32 = 4.25 bits (OCP MX Formats Specification v1.0, section 5; gpt-oss "
        "config.json quant_method mxfp4 on the expert weights)"
    ),
)
Q4_K_M = WeightFormat(
    name="q4_k_m",
    bits_per_weight=4.84,
    covers_embeddings=True,
    source=(
        "GGUF Q4_K_M: 4.84 bits per weight averaged over the whole Llama-2-7B file "
        "(llama.cpp tools/quantize/README.md bits-per-weight table); a mix of Q4_K "
        "(4.5 bpw) and Q6_K (6.5625 bpw) tensors, embeddings and output included"
    ),
)
Q8_0 = WeightFormat(
    name="q8_0",
    bits_per_weight=8.5,
    covers_embeddings=True,
    source=(
        "GGUF Q8_0: blocks of 32 int8 weights with one fp16 scale = (32*8 + 16)/32 = 8.5 "
        "bits (ggml block_q8_0 in ggml-common.h); llama.cpp also stores embeddings/output so"
    ),
)

WEIGHT_FORMATS: dict[str, WeightFormat] = {
    f.name: f for f in (FP32, BF16, FP16, FP8, INT8, INT4, NF4, MXFP4, Q4_K_M, Q8_0)
}
"""Request dtype name -> format (the ``Dtype`` vocabulary of :mod:`gpu_advisor.core.spec`)."""

SHIPPED_FORMATS: dict[str, WeightFormat] = {
    "fp8": FP8_BLOCK128,
    "mxfp4": MXFP4,
    "nf4": NF4,
    NF4_SINGLE.name: NF4_SINGLE,
    "int4": INT4,
    "int8": INT8,
    "bf16": BF16,
    "fp16": FP16,
    "fp32": FP32,
}
"""``Architecture.shipped_weight_format`` -> format, for formats without a group size
(GPTQ/AWQ checkpoints: :func:`shipped_format`). A checkpoint shipped in fp8 uses the
DeepSeek-V3 block layout (the only fp8 checkpoint format the presets carry); ``int8`` here is
bitsandbytes LLM.int8()."""

PACKED_INT_BITS: dict[str, int] = {
    "int2": 2,
    "int3": 3,
    "int4": 4,
    "int8": 8,
    "int8-weight-only": 8,
}
"""Shipped GPTQ/AWQ format name -> bits per packed weight."""


def packed_int_format(bits: int, group_size: int) -> WeightFormat:
    """A GPTQ/AWQ checkpoint's packed integer weights with their group constants.

    The AutoGPTQ packing (``auto_gptq/nn_modules/qlinear/qlinear_cuda_old.py``
    ``QuantLinear.__init__``; the checkpoints transformers and vLLM load) stores a linear of
    ``k`` inputs and ``n`` outputs as

    * ``qweight``: int32 ``[k / 32 * bits, n]`` = ``k x n x bits / 8`` bytes,
    * ``qzeros``: int32 ``[ceil(k / g), n / 32 * bits]`` = ``ceil(k/g) x n x bits / 8`` bytes
      (one ``bits``-wide zero point per group and output channel),
    * ``scales``: fp16 ``[ceil(k / g), n]`` = ``ceil(k/g) x n x 2`` bytes,
    * ``g_idx``: int32 ``[k]``, the group of each input row;

    with ``g = k`` for ``group_size = -1`` (``self.group_size = group_size if group_size != -1
    else infeatures``). AutoAWQ's ``WQLinear_GEMM`` (``awq/modules/linear/gemm.py``) packs
    ``qweight`` int32 ``[k, n * bits / 32]``, ``qzeros`` int32 ``[k / g, n * bits / 32]`` and
    ``scales`` fp16 ``[k / g, n]``: the same bytes, without ``g_idx``.

    Per weight that is ``bits + (16 + bits) / g`` bits (4-bit, g = 128: 4 + 20/128 = 4.15625;
    3-bit: 3 + 19/128; 2-bit: 2 + 18/128; 8-bit: 8 + 24/128), exact when ``g`` divides ``k``
    (vLLM's GPTQ and AWQ linear methods require it of every shard). With ``group_size = -1``
    the constants are ``16 + bits`` bits per output channel (:attr:`WeightFormat.
    channel_scale_bits`). ``g_idx`` is not counted: ``4 x k`` bytes per matrix, 32/n bits per
    weight (under 0.01 bits for n >= 4096; about 5 MB for all of Llama-3.1-8B).

    Args:
        bits: 2, 3, 4 or 8.
        group_size: input weights per group, a power of two, or -1 for one group per output
            channel.
    """
    layout = "AutoGPTQ/AutoAWQ packing: qweight bits, qzeros bits + fp16 scales per group"
    if group_size == -1:
        return WeightFormat(
            name=f"int{bits}",
            bits_per_weight=bits,
            channel_scale_bits=16 + bits,
            source=f"{layout}, one group per output channel: {bits} bits + {16 + bits} bits/row",
        )
    return WeightFormat(
        name=f"int{bits}",
        bits_per_weight=bits + (16 + bits) / group_size,
        source=f"{layout}, group size {group_size}: {bits} + {16 + bits}/{group_size} bits",
    )


def shipped_format(name: str | None, group_size: int | None) -> WeightFormat | None:
    """The format of a checkpoint's shipped weights (``Architecture.shipped_weight_format`` and
    ``shipped_group_size``): a GPTQ/AWQ packing (:func:`packed_int_format`) when a group size
    is given, else :data:`SHIPPED_FORMATS`; None for an unquantised checkpoint."""
    if name is None:
        return None
    if group_size is not None and name in PACKED_INT_BITS:
        return packed_int_format(PACKED_INT_BITS[name], group_size)
    return SHIPPED_FORMATS.get(name)


ELEMENT_BYTES: dict[str, int] = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1}
"""Bytes per element of an unquantised tensor (KV cache, gradients, activations)."""


def weight_format(name: str, *, field: str = "workload.weight_dtype") -> WeightFormat:
    """The storage format of a weight dtype name.

    Args:
        name: a ``Dtype`` name (``fp32 bf16 fp16 fp8 int8 int4 nf4 mxfp4 q4_k_m q8_0``).
        field: dotted path reported when the name is unknown.

    Raises:
        InvalidSpecError: unknown dtype name.
    """
    try:
        return WEIGHT_FORMATS[name]
    except KeyError:
        known = ", ".join(sorted(WEIGHT_FORMATS))
        raise InvalidSpecError(
            f"unknown weight dtype {name!r}; use one of {known}", field=field
        ) from None


def element_bytes(name: str, *, field: str = "workload.kv_cache_dtype") -> int:
    """Bytes per element of a plain dtype (fp32 4, bf16/fp16 2, fp8/int8 1).

    Raises:
        InvalidSpecError: the name is not a plain element dtype.
    """
    try:
        return ELEMENT_BYTES[name]
    except KeyError:
        known = ", ".join(sorted(ELEMENT_BYTES))
        raise InvalidSpecError(f"unknown dtype {name!r}; use one of {known}", field=field) from None


def matrix_bytes(rows: int, cols: int, fmt: WeightFormat, *, copies: int = 1) -> int:
    """Bytes of ``copies`` weight matrices of ``rows x cols`` elements in ``fmt``.

    ``rows`` is the output dimension (one channel scale per row). Rounded up to whole bytes.

    Example: one 4096 x 4096 int8 matrix = 4096*4096 * 1 B + 4096 * 4 B (fp32 row scales).
    """
    elements = rows * cols * copies
    data = -(-elements * _bits_numerator(fmt) // (8 * _BITS_DENOMINATOR))
    return data + channel_constant_bytes(rows * copies, fmt)


def channel_constant_bytes(rows: int, fmt: WeightFormat) -> int:
    """Bytes of the per-output-channel constants of ``rows`` channels in ``fmt`` (rounded up):
    ``rows x channel_scale_bits / 8``."""
    return -(-rows * fmt.channel_scale_bits // 8)


# Bits per weight are stored as floats with at most 1/16384 resolution (4.127 = 4 + 8/64 +
# 32/16384); integer arithmetic on a common denominator keeps byte counts exact.
_BITS_DENOMINATOR = 2**16


def _bits_numerator(fmt: WeightFormat) -> int:
    return round(fmt.bits_per_weight * _BITS_DENOMINATOR)


def elements_bytes(elements: int, fmt: WeightFormat) -> int:
    """Bytes of ``elements`` weights in ``fmt`` without channel scales (rounded up)."""
    return -(-elements * _bits_numerator(fmt) // (8 * _BITS_DENOMINATOR))
