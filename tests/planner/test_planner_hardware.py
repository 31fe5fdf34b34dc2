"""Dtype paths, NVLink domains and link bandwidths."""

from __future__ import annotations

import pytest

from gpu_advisor.catalog.gpu_table import load_gpu_catalog
from gpu_advisor.core.memory import WorkloadEstimator
from gpu_advisor.core.models.resolve import resolve_model
from gpu_advisor.core.planner import MEMORY_CAPACITY_RULE, recommend
from gpu_advisor.core.planner.hardware import (
    compute_path,
    links,
    max_gpus_per_node,
    nvlink_domain_size,
)
from gpu_advisor.core.spec import InferenceWorkload, ModelSpec

from .fixtures import GPUS, make_arch, make_offer, make_request, toy_estimate


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
        # 8-bit GPTQ/AWQ dequantise to 16-bit in the matmul: H100's fp16 rate (989.5 TFLOPS,
        # datasheet), not its int8 1,979 TOPS
        ("H100-SXM-80GB", "int8-weight-only", "fp16", 989.5, False),
        ("L4-24GB", "nf4-single-quant", "bf16", 121.0, False),
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


# --- scale-up domains and GPUs per node (QA finding 6) ---------------------------------------

CATALOG = load_gpu_catalog()


@pytest.mark.parametrize(
    ("gpu", "interconnect", "count", "domain"),
    [
        # an HGX/DGX H100 board joins 8 GPUs through NVSwitch: 16 H100 are two domains
        ("H100-SXM-80GB", "nvswitch", 16, 8),
        ("H100-SXM-80GB", "nvlink", 16, 8),
        ("H100-SXM-80GB", "nvswitch", 6, 6),
        # HGX A100 16-GPU (two baseboards over NVSwitch, GCP a2-megagpu-16g): one domain
        ("A100-SXM-40GB", "nvswitch", 16, 16),
        # GB200 NVL72: 72 GPUs in one NVLink domain
        ("GB200-186GB", "nvswitch", 72, 72),
        # MI300X platform: 8 OAMs over Infinity Fabric; Gaudi 2: 8 over on-chip RoCE
        ("MI300X-192GB", "infinity-fabric", 8, 8),
        ("GAUDI2-96GB", "roce", 8, 8),
    ],
)
def test_domains_never_exceed_the_gpus_own_scale_up_domain(
    gpu: str, interconnect: str, count: int, domain: int
) -> None:
    spec = CATALOG.by_id[gpu]
    assert nvlink_domain_size(interconnect, spec, count) == domain  # type: ignore[arg-type]


def test_gpus_per_node_cap() -> None:
    # 16 for the HGX-2 / DGX-2 class; a GB200 NVL72 rack holds 72 in one NVLink domain
    assert max_gpus_per_node(CATALOG.by_id["H100-SXM-80GB"]) == 16
    assert max_gpus_per_node(CATALOG.by_id["L40S-48GB"]) == 16
    assert max_gpus_per_node(CATALOG.by_id["GB200-186GB"]) == 72


def test_sixteen_h100_in_one_node_keep_tp_inside_the_8_gpu_domain() -> None:
    # Llama-3.1-405B serving: bf16 weights alone are 2 x 405.9e9 B = 811.7e9 B; 8 x 79.6 GiB
    # = 684 GiB (734.6e9 B) cannot hold them, so a replica needs all 16 GPUs: TP stays at 8
    # (the NVLink domain) and PP=2 carries the rest, never TP=16.
    arch = resolve_model(ModelSpec(preset="meta-llama/Llama-3.1-405B"))
    workload = InferenceWorkload(concurrency=1, context_length=4096)
    offer = make_offer("H100-SXM-80GB", 16, interconnect="nvswitch")
    result = recommend(
        arch,
        make_request(workload),
        [offer],
        {"H100-SXM-80GB": CATALOG.by_id["H100-SXM-80GB"]},
        {},
        WorkloadEstimator(arch, workload),
        capacity_rule=MEMORY_CAPACITY_RULE,
    )
    [best] = result.recommendations
    assert (best.plan.tensor_parallel, best.plan.pipeline_parallel) == (8, 2)
    assert "TP=8 inside one NVLink domain" in [r.text for r in best.rationale]


# --- dtype paths per GPU (QA finding 7) -----------------------------------------------------


@pytest.mark.parametrize(
    ("gpu", "dtype"),
    [
        ("T4-16GB", "fp8"),  # 7.5 < 8.0 (FP8 Marlin: has_device_capability(80))
        ("T4-16GB", "mxfp4"),  # vLLM Mxfp4Config.get_min_capability() == 80
        ("V100-SXM-32GB", "fp8"),
        ("V100-SXM-32GB", "mxfp4"),
    ],
)
def test_weight_only_fallbacks_need_compute_capability_8(gpu: str, dtype: str) -> None:
    assert compute_path(CATALOG.by_id[gpu], dtype) is None


@pytest.mark.parametrize(
    ("gpu", "dtype", "path", "tflops"),
    [
        ("V100-SXM-32GB", "int4", "fp16", 125.0),  # GPTQ kernels run from Volta
        ("V100-SXM-32GB", "nf4", "fp16", 125.0),  # bitsandbytes from Volta
        # A10G's row has no compute capability: its architecture (Ampere, >= 8.0) stands in
        ("A10G-24GB", "fp8", "fp16", 125.0),
        ("RTXA6000-48GB", "mxfp4", "bf16", 154.8),
    ],
)
def test_older_gpus_keep_the_fallbacks_they_have(
    gpu: str, dtype: str, path: str, tflops: float
) -> None:
    found = compute_path(CATALOG.by_id[gpu], dtype)
    assert found is not None
    assert (found.path, found.tflops) == (path, tflops)


def test_fp8_on_a_t4_is_rejected_naming_dtype_gpu_and_capability() -> None:
    arch = make_arch(7 * 10**9)
    workload = InferenceWorkload(weight_dtype="fp8")
    offer = make_offer("T4-16GB", 1, interconnect="none")
    result = recommend(arch, make_request(workload), [offer], GPUS, {}, toy_estimate)
    assert result.recommendations == []
    [group] = result.rejected
    assert group.code == "dtype_unsupported"
    assert group.text == (
        "fp8 needs compute capability 8.0 or later (weight-only kernels); its native path "
        "needs Ada Lovelace or Hopper (compute capability 8.9 / 9.0); T4-16GB (compute "
        "capability 7.5) has no fp8 path"
    )


# --- interconnect names per vendor (QA finding 19) ------------------------------------------


@pytest.mark.parametrize(
    ("gpu", "interconnect", "fabric"),
    [
        ("H100-SXM-80GB", "nvswitch", "NVLink"),
        ("MI300X-192GB", "infinity-fabric", "Infinity Fabric"),
        ("GAUDI2-96GB", "roce", "RoCE"),
    ],
)
def test_tensor_parallel_is_described_with_the_vendors_fabric(
    gpu: str, interconnect: str, fabric: str
) -> None:
    # 300e9 params: 600e9 B of weights need at least 8 GPUs of <= 192 GB: TP=8 in one domain
    spec = CATALOG.by_id[gpu]
    arch = make_arch(300 * 10**9, layers=80, hidden=8192, heads=64)
    workload = InferenceWorkload(concurrency=1, context_length=4096)
    offer = make_offer(gpu, 8, interconnect=interconnect)
    result = recommend(arch, make_request(workload), [offer], {gpu: spec}, {}, toy_estimate)
    [best] = result.recommendations
    texts = [r.text for r in best.rationale]
    assert f"TP=8 inside one {fabric} domain" in texts
    if fabric != "NVLink":
        assert not any("NVLink" in t for t in texts)
