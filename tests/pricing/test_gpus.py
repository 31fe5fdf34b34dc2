"""GPU table and name resolution (DESIGN "GPU capacity", "Pricing catalog and cache")."""

from __future__ import annotations

import csv

import pytest

from gpu_advisor.catalog.gpu_table import load_gpu_catalog
from gpu_advisor.core.gpus import GpuCatalog, resolve_gpu, resolve_gpu_detailed

from .conftest import SHARED_DATA

SPECS = SHARED_DATA / "gpu-specs" / "gpu_specs.csv"
MIB = 2**20
GIB = 2**30


@pytest.fixture(scope="module")
def gpus() -> GpuCatalog:
    return load_gpu_catalog()


@pytest.mark.parametrize(
    ("name", "memory_mib", "hints", "expected"),
    [
        ("H100", None, (), "H100-SXM-80GB"),  # DESIGN: "H100" -> H100-SXM-80GB
        ("h100", None, (), "H100-SXM-80GB"),  # case-insensitive
        ("A100-80GB", None, (), "A100-SXM-80GB"),
        ("A100", 81920, (), "A100-SXM-80GB"),  # DESIGN: "A100" with 81,920 MiB
        ("A100", 40960, (), "A100-SXM-40GB"),
        ("A100", None, (), "A100-SXM-40GB"),  # SkyPilot convention: bare A100 = 40 GB part
        ("NVIDIA A100-SXM4-80GB", None, (), "A100-SXM-80GB"),
        ("NVIDIA A100 80GB PCIe", None, (), "A100-PCIE-80GB"),
        ("A100-80G", None, (), "A100-SXM-80GB"),  # shadeform spelling
        ("A100-80GB-SXM", None, (), "A100-SXM-80GB"),  # runpod spelling
        ("A10G", None, (), "A10G-24GB"),
        ("A10", None, (), "A10-24GB"),  # A10G != A10
        ("H100-NVL", None, (), "H100-NVL-94GB"),
        ("H100", 96256, (), "H100-NVL-94GB"),  # 94 GB x 1024 MiB: cudo's NVL rows
        ("H100", 95830, (), "H100-NVL-94GB"),  # observed driver total of the NVL
        ("H100", None, ("gpu_1x_h100_pcie",), "H100-PCIE-80GB"),  # Lambda
        ("H100", None, ("epyc-genoa-h100-nvl-pcie_1x2v4gb",), "H100-NVL-94GB"),  # NVL > PCIe
        ("H100-MEGA", None, (), "H100-SXM-80GB"),  # GCP a3-megagpu
        ("NVIDIA-H100-80GB-HBM3", 81559, (), "H100-SXM-80GB"),  # hyperbolic
        ("H200", None, (), "H200-SXM-141GB"),
        ("H200-SXM", None, (), "H200-SXM-141GB"),
        ("RTX PRO 6000 96GB", None, (), "RTXPRO6000-96GB"),  # seeweb, with spaces
        ("RTXPro6000", None, (), "RTXPRO6000-96GB"),
        ("RTXPRO6000Blackwell", None, (), "RTXPRO6000-96GB"),
        ("RTX6000-Ada", None, (), "RTX6000ADA-48GB"),
        ("RTX6000Ada", None, (), "RTX6000ADA-48GB"),
        ("RTXA6000", None, (), "RTXA6000-48GB"),
        ("A6000", None, (), "RTXA6000-48GB"),
        ("V100-32GB", None, (), "V100-SXM-32GB"),
        ("V100-32G", None, (), "V100-SXM-32GB"),
        ("V100", 16384, (), "V100-SXM-16GB"),
        ("V100", None, ("p3dn.24xlarge",), "V100-SXM-16GB"),
        ("GH200", 98304, (), "GH200-96GB"),
        ("MI300X", None, (), "MI300X-192GB"),
        ("NVIDIA-GeForce-RTX-4090", 24564, (), "RTX4090-24GB"),
        ("L40S", 45776, (), "L40S-48GB"),  # AWS exposed figure
        ("L4", 22888, (), "L4-24GB"),
        ("B200", 184320, (), "B200-180GB"),
        ("Tesla V100-SXM2-32GB", None, (), "V100-SXM-32GB"),
        # RTX A4000, in every spelling the bundled sources use (one id, not "A4000" and
        # "RTXA4000-16GB")
        ("A4000", None, (), "RTXA4000-16GB"),  # shadeform, paperspace
        ("RTXA4000", None, (), "RTXA4000-16GB"),  # runpod
        ("RTX A4000", None, (), "RTXA4000-16GB"),
        ("NVIDIA RTX A4000", 16376, (), "RTXA4000-16GB"),  # vast's measured size
        ("A4000", 16384, ("cudocompute__1xA4000_16GB",), "RTXA4000-16GB"),  # primeintellect
        ("A16", 16384, ("vultr_A16x4",), "A16-16GB"),  # shadeform
    ],
)
def test_resolve_aliases(
    gpus: GpuCatalog, name: str, memory_mib: int | None, hints: tuple[str, ...], expected: str
) -> None:
    spec = resolve_gpu(gpus, name, memory_mib, hints)
    assert spec is not None
    assert spec.id == expected


def test_lambda_a100_80gb_instance_named_a100_with_40gb_memory(gpus: GpuCatalog) -> None:
    """B16: the instance name's 80gb outranks the row's 40,960 MiB, and the conflict is kept."""
    res = resolve_gpu_detailed(gpus, "A100", 40960, ("gpu_8x_a100_80gb_sxm4",))
    assert res.canonical_id == "A100-SXM-80GB"
    assert res.basis == "hint"
    assert res.conflicts == ("memory_contradicts_name",)
    assert res.spec is not None
    assert res.spec.memory_bytes == 81920 * MIB  # 80 GiB = 81,920 MiB


def test_host_ram_token_in_hint_is_ignored(gpus: GpuCatalog) -> None:
    # "4gb" is host RAM in cudo's instance name; no H100 variant has 4 GB.
    res = resolve_gpu_detailed(gpus, "H100", None, ("epyc-genoa-h100-sxm_1x2v4gb",))
    assert res.canonical_id == "H100-SXM-80GB"


def test_memory_that_matches_no_variant_is_reported(gpus: GpuCatalog) -> None:
    # nebius puts host RAM (200 GiB) in the per-GPU memory field of its H100 rows
    res = resolve_gpu_detailed(gpus, "H100", 204800, ("gpu-h100-sxm_1gpu-16vcpu-200gb",))
    assert res.canonical_id == "H100-SXM-80GB"
    assert res.conflicts == ("memory_matches_no_variant",)


@pytest.mark.parametrize(
    ("name", "memory_mib", "expected_id"),
    [
        ("T4g", 16384, "T4G-16GB"),  # AWS g5g: not in the spec table
        ("RTX6000", 24576, "RTX6000-24GB"),  # Quadro RTX 6000 (Turing), not the 6000 Ada
        ("A30", None, "A30"),
        ("RTX 4000 Ada Generation", 20480, "RTX4000ADA-20GB"),
        # one spelling for the RTX A-series the table lacks: "RTX A5000" is NVIDIA's name
        ("A5000", None, "RTXA5000"),
        ("RTXA5000", 24576, "RTXA5000-24GB"),
        ("A5000-24GB", None, "RTXA5000-24GB"),
        ("RTX A4500", None, "RTXA4500"),
        ("A800", 81920, "A800-80GB"),  # three digits: a data-centre part, no RTX prefix
    ],
)
def test_unknown_gpus_resolve_to_none_with_an_id(
    gpus: GpuCatalog, name: str, memory_mib: int | None, expected_id: str
) -> None:
    res = resolve_gpu_detailed(gpus, name, memory_mib)
    assert res.spec is None
    assert res.canonical_id == expected_id


def test_table_has_every_spec_row_with_source_and_date(gpus: GpuCatalog) -> None:
    with SPECS.open(newline="") as fh:
        spec_ids = {row["gpu_id"] for row in csv.DictReader(fh)}
    assert len(spec_ids) == 34
    from_specs = [s for s in gpus.specs if s.source.startswith("gpu-specs:")]
    extra = [s for s in gpus.specs if not s.source.startswith("gpu-specs:")]
    assert len(from_specs) == 34
    # GPUs of the bundled offers that gpu-specs lacks, each citing a public datasheet copy
    assert sorted(s.id for s in extra) == ["A16-16GB", "RTXA4000-16GB"]
    for spec in extra:
        assert "datasheet" in spec.source
        assert "https://" in spec.source
    assert gpus.as_of == "2026-11-30"


def test_added_rows_carry_the_datasheet_figures(gpus: GpuCatalog) -> None:
    a4000 = gpus.get("RTXA4000-16GB")
    assert a4000 is not None
    assert a4000.memory_bytes == 16 * GIB
    assert a4000.memory_bandwidth_bytes_per_s == 448 * 10**9  # datasheet: 448 GB/s
    assert a4000.fp32_tflops == 19.2
    assert a4000.fp16_dense_tflops == 153.4 / 2  # "Tensor performance 153.4" is sparse
    assert a4000.memory_exposed_bytes == 65504 // 4 * MIB  # vast: 4 GPUs, 65,504 MiB
    assert a4000.tf32_dense_tflops is None  # not stated: left empty
    a16 = gpus.get("A16-16GB")
    assert a16 is not None
    # the A16 datasheet is per board of four GPUs: 4 x 16 GB, 4 x 200 GB/s, 4 x 4.5 TFLOPS
    assert a16.memory_bytes == 16 * GIB
    assert a16.memory_bandwidth_bytes_per_s == 200 * 10**9
    assert (a16.fp32_tflops, a16.tf32_dense_tflops, a16.fp16_dense_tflops) == (4.5, 9, 17.9)
    assert a16.bf16_dense_tflops is None


def test_a10g_rates_come_from_lightnings_table(gpus: GpuCatalog) -> None:
    # gpu-specs leaves the A10G's rates empty (no NVIDIA datasheet); Lightning's _CUDA_FLOPS
    # (LIGHT, src/lightning/fabric/utilities/throughput.py) lists "a10g": float32 31.2e12,
    # bfloat16 125e12, float16 125e12 -- dense, halved from the A10 datasheet's sparse 250.
    a10g = gpus.get("A10G-24GB")
    assert a10g is not None
    assert (a10g.fp32_tflops, a10g.bf16_dense_tflops, a10g.fp16_dense_tflops) == (31.2, 125, 125)
    # the table lists no TF32 or INT8 for the A10G: left empty
    assert a10g.tf32_dense_tflops is None
    assert a10g.int8_dense_tops is None
    assert "LIGHT: Lightning-AI/pytorch-lightning" in a10g.source
    # GA102 like the A10 (NVIDIA's CUDA GPUs list: 8.6); AITemplate#279 reads 8.6 on g5
    assert a10g.compute_capability == "8.6"


def test_every_nvidia_gpu_has_a_compute_capability(gpus: GpuCatalog) -> None:
    # dtype paths (fp8 and mxfp4 need 8.0+, native FP8 8.9+) are decided by it: a missing
    # value would let a GPU through, or turn it away, on no evidence
    missing = [
        s.id for s in gpus.by_id.values() if s.vendor == "nvidia" and not s.compute_capability
    ]
    assert missing == []


@pytest.mark.parametrize(
    ("gpu_id", "exposed_mib", "basis"),
    [
        ("H100-SXM-80GB", 81559, "observed"),  # gpu-specs README: nvidia-smi 81559MiB
        ("H200-SXM-141GB", 143771, "observed"),
        ("L4-24GB", 22888, "cloud-reported"),  # AWS g6 MemoryInfo
        ("A10G-24GB", 22888, "cloud-reported"),
        ("A100-SXM-80GB", 80 * 1024, "nominal"),
        ("L40S-48GB", 46068, "observed"),
        # ECC on GDDR6 (on by default in clouds) keeps 1/16 for check bits: 16,384 * 15 / 16
        ("T4-16GB", 16384 * 15 // 16, "observed"),
    ],
)
def test_exposed_memory(gpus: GpuCatalog, gpu_id: str, exposed_mib: int, basis: str) -> None:
    spec = gpus.get(gpu_id)
    assert spec is not None
    assert spec.memory_exposed_bytes == exposed_mib * MIB
    assert spec.memory_exposed_basis == basis


def test_no_gpu_exposes_more_than_its_label_read_as_gib(gpus: GpuCatalog) -> None:
    # The label "N GB" read as N GiB is an upper bound on what the driver reports: reserved
    # memory (ECC, firmware) only ever comes off it. A fit check against more than that would
    # pass a plan that runs out of memory.
    for spec in gpus.by_id.values():
        assert spec.memory_exposed_bytes <= spec.memory_bytes, spec.id


def test_marketed_memory_and_rates(gpus: GpuCatalog) -> None:
    h100 = gpus.get("h100-sxm-80gb")
    assert h100 is not None
    assert h100.memory_bytes == 80 * GIB
    assert h100.memory_bandwidth_bytes_per_s == 3350 * 10**9  # datasheet 3.35 TB/s
    assert h100.bf16_dense_tflops == 989.5  # 1,979 with sparsity, halved
    assert h100.nvlink_bytes_per_s == 900 * 10**9
