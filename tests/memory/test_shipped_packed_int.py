"""GPTQ/AWQ checkpoints posted as config.json: their weights are sized from the packed layout.

Expected bytes are worked out per matrix from the AutoGPTQ ``QuantLinear`` buffers of a linear
of ``k`` inputs and ``n`` outputs (``auto_gptq/nn_modules/qlinear/qlinear_cuda_old.py``):
``qweight`` int32 [k/32*bits, n] = k*n*bits/8 B, ``qzeros`` int32 [k/g, n/32*bits] =
(k/g)*n*bits/8 B, ``scales`` fp16 [k/g, n] = (k/g)*n*2 B; ``g = k`` when ``group_size`` is -1.
``g_idx`` (int32 [k]) is not counted (see ``formats.packed_int_format``). Embeddings, head and
norms stay bf16. Shapes are those of meta-llama/Llama-3.1-8B's config.json.
"""

from __future__ import annotations

import pytest
from mem_data import arch_from

from gpu_advisor.core.memory import estimate_memory
from gpu_advisor.core.results import ParallelPlan
from gpu_advisor.core.spec import InferenceWorkload

LLAMA = "meta-llama--Llama-3.1-8B"
LAYERS = 32
# (k inputs, n outputs) of each block linear: q, k, v, o (h 4096, 8 KV heads x 128), gate, up,
# down (FFN 14336).
MATRICES = [
    (4096, 4096),
    (4096, 1024),
    (4096, 1024),
    (4096, 4096),
    (4096, 14336),
    (4096, 14336),
    (14336, 4096),
]
# bf16: embedding and untied head 2 x 128256 x 4096, two RMSNorms per layer and the final one.
REST_BYTES = 2 * (2 * 128256 * 4096 + LAYERS * 2 * 4096 + 4096)  # 2,101,878,784


def _packed_bytes(bits: int, group_size: int) -> int:
    total = 0
    for k, n in MATRICES:
        groups = 1 if group_size == -1 else k // group_size  # every k here divides by g
        qweight = k * n * bits // 8
        qzeros = groups * n * bits // 8
        scales = groups * n * 2
        total += qweight + qzeros + scales
    return LAYERS * total


def _shipped_weights(quant: dict[str, object]) -> int:
    arch = arch_from(LLAMA, quantization_config=quant)
    return estimate_memory(arch, InferenceWorkload(context_length=16), ParallelPlan()).weights_bytes


@pytest.mark.parametrize(
    ("bits", "group_size"),
    [(2, 128), (3, 128), (4, 128), (8, 128), (2, 64), (4, 32), (3, -1), (4, -1), (8, -1)],
)
def test_gptq_weights_follow_the_packed_layout(bits, group_size):
    quant = {"quant_method": "gptq", "bits": bits, "group_size": group_size}
    assert _shipped_weights(quant) == _packed_bytes(bits, group_size) + REST_BYTES


def test_4bit_group_128_by_hand():
    # Block linears: 32 x (2 x 4096^2 + 2 x 4096 x 1024 + 3 x 4096 x 14336) = 6,979,321,856
    # weights; per weight 4 bits + (16-bit scale + 4-bit zero) / 128 = 4.15625 bits:
    # 6,979,321,856 x 4.15625 / 8 = 3,625,975,808 B, plus 2,101,878,784 B of bf16 rest.
    expected = 3_625_975_808 + 2_101_878_784
    assert _packed_bytes(4, 128) + REST_BYTES == expected
    assert _shipped_weights({"quant_method": "gptq", "bits": 4, "group_size": 128}) == expected
    # AWQ's packing stores the same qweight, qzeros and scales (AutoAWQ WQLinear_GEMM).
    assert _shipped_weights({"quant_method": "awq", "bits": 4, "group_size": 128}) == expected


def test_3bit_group_128_by_hand():
    # 6,979,321,856 weights x (3 + 19/128) bits / 8 = 2,746,744,832 B (the tester's case, was
    # 16.06 GB of bf16): 4.85 GB in all.
    expected = 2_746_744_832 + 2_101_878_784
    assert _shipped_weights({"quant_method": "gptq", "bits": 3}) == expected


def test_fewer_bits_and_larger_groups_weigh_less():
    sizes = [
        _shipped_weights({"quant_method": "gptq", "bits": bits, "group_size": 128})
        for bits in (2, 3, 4, 8)
    ]
    assert sizes == sorted(sizes)
    by_group = [
        _shipped_weights({"quant_method": "gptq", "bits": 4, "group_size": g})
        for g in (32, 64, 128, -1)
    ]
    assert by_group == sorted(by_group, reverse=True)
    assert sizes[-1] < 2 * 8_030_261_248  # 8-bit still below bf16


def test_bitsandbytes_4bit_double_quantisation_as_the_config_says():
    # 6,979,321,856 block-linear weights. With bnb_4bit_use_double_quant: 4 + 8/64 +
    # 32/(64 x 256) = 4.126953125 bits -> 3,600,416,768 B; without (transformers' default):
    # 4 bits + one fp32 absmax per 64 weights = 4.5 bits -> 3,925,868,544 B (QLoRA, section 3).
    base = {"quant_method": "bitsandbytes", "load_in_4bit": True}
    double = base | {"bnb_4bit_use_double_quant": True}
    assert _shipped_weights(double) == 3_600_416_768 + REST_BYTES
    assert _shipped_weights(base) == 3_925_868_544 + REST_BYTES
    assert _shipped_weights(base | {"bnb_4bit_use_double_quant": False}) == (
        3_925_868_544 + REST_BYTES
    )
