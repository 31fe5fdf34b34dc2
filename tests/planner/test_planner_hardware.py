"""Dtype paths, NVLink domains and link bandwidths."""

from __future__ import annotations

import pytest

from gpu_advisor.catalog.gpu_table import load_gpu_catalog
from gpu_advisor.core.planner.hardware import compute_path, links, nvlink_domain_size

from .fixtures import GPUS


@pytest.mark.parametrize(
    ("gpu", "dtype", "path", "tflops", "emulated"),
    [
        ("H100-SXM-80GB", "fp8", "fp8", 1979.0, False),
        ("A100-SXM-80GB", "fp8", "fp16", 312.0, True),  # weight-only FP8 (Marlin) on Ampere
        ("A100-SXM-80GB", "bf16", "bf16", 312.0, False),
        ("L4-24GB", "nf4", "bf16", 121.0, False),  # weight-only by design, 16-bit compute
        ("T4-16GB", "int4", "fp16", 65.0, False),
        ("H100-SXM-80GB", "mxfp4", "bf16", 989.5, True),  # FP4 tensor cores from Blackwell on
        ("T4-16GB", "int8", "int8", 130.0, False),
    ],
)
def test_compute_paths(gpu: str, dtype: str, path: str, tflops: float, emulated: bool) -> None:
    found = compute_path(GPUS[gpu], dtype)
    assert found is not None
    assert (found.path, found.tflops, found.emulated) == (path, tflops, emulated)


def test_bf16_has_no_path_before_ampere() -> None:
    assert compute_path(GPUS["T4-16GB"], "bf16") is None


def test_bf16_runs_at_the_fp16_rate_where_an_ampere_datasheet_prints_only_fp16() -> None:
    # NVIDIA A16 datasheet, per board of four GPUs: FP16 tensor 4 x 17.9 TFLOPS dense, no BF16
    # line; compute capability 8.6 (Ampere), whose tensor cores run BF16 at the FP16 rate.
    a16 = load_gpu_catalog().by_id["A16-16GB"]
    assert a16.bf16_dense_tflops is None
    found = compute_path(a16, "bf16")
    assert found is not None
    assert (found.path, found.tflops, found.emulated) == ("bf16", 17.9, False)


@pytest.mark.parametrize(
    ("interconnect", "gpu", "count", "domain"),
    [
        ("nvswitch", "H100-SXM-80GB", 8, 8),
        ("nvlink", "H100-SXM-80GB", 8, 8),  # HGX board
        ("nvlink", "A100-PCIE-40GB", 8, 2),  # bridged pairs
        ("pcie", "L40S-48GB", 8, 1),
        ("unknown", "H100-SXM-80GB", 4, 4),
        ("unknown", "A100-PCIE-40GB", 4, 1),  # a bridge may not be fitted
    ],
)
def test_nvlink_domains(interconnect: str, gpu: str, count: int, domain: int) -> None:
    assert nvlink_domain_size(interconnect, GPUS[gpu], count) == domain  # type: ignore[arg-type]


def test_links_across_nodes_share_the_network_per_gpu() -> None:
    # 3,200 Gbit/s per node = 400e9 B/s, 8 GPUs -> 50e9 B/s each (below NVLink's 450e9).
    found = links(GPUS["H100-SXM-80GB"], 8, 8, 2, 3200.0)
    assert found.dp_bytes_per_s == pytest.approx(50e9)
    assert found.dp_medium == "network"
    assert found.tp_bytes_per_s == pytest.approx(450e9)  # 900 GB/s bidirectional / 2


def test_links_inside_a_pcie_node() -> None:
    found = links(GPUS["L40S-48GB"], 1, 8, 1, None)
    assert (found.tp_medium, found.dp_medium) == ("pcie", "pcie")
    assert found.dp_bytes_per_s == pytest.approx(31.5e9)  # PCIe 4.0 x16 per direction
    assert links(GPUS["H100-SXM-80GB"], 1, 8, 1, None).dp_bytes_per_s == pytest.approx(63e9)
