"""Hardware facts the planner needs: dtype paths, compute rates, NVLink domains, link speeds.

Everything here is a pure function of a :class:`~gpu_advisor.core.gpus.GpuSpec` and an offer's
``interconnect``; every constant names its source.
"""

from __future__ import annotations

from typing import Literal

from msgspec import Struct

from gpu_advisor.core.architecture import Architecture
from gpu_advisor.core.gpus import GpuSpec
from gpu_advisor.core.offers import Interconnect
from gpu_advisor.core.spec import InferenceWorkload, TrainingWorkload

HardwarePath = Literal["fp32", "bf16", "fp16", "fp8", "fp4", "int8"]

PCIE_GEN4_X16_BYTES_PER_S = 31_500_000_000
"""PCIe 4.0 x16, per direction: 16 GT/s x 16 lanes x 128/130 encoding / 8 bits
(PCI-SIG PCIe 4.0 base specification)."""

PCIE_GEN5_X16_BYTES_PER_S = 63_000_000_000
"""PCIe 5.0 x16, per direction: 32 GT/s x 16 lanes x 128/130 / 8 (PCI-SIG PCIe 5.0)."""

PCIE_MAX_TENSOR_PARALLEL = 2
"""Largest TP degree planned over PCIe. Megatron TP all-reduces activations twice per layer in
the forward pass (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU
Clusters Using Megatron-LM", section 3.2); over a ~32 GB/s PCIe link that traffic dominates
beyond a pair of GPUs, so larger splits on PCIe-only GPUs use pipeline parallel instead."""

MINIMUM_ARCHITECTURE = {
    "bf16": "Ampere (compute capability 8.0)",
    "fp8": "Ada Lovelace or Hopper (compute capability 8.9 / 9.0)",
    "fp4": "Blackwell (compute capability 10.0)",
    "int8": "Turing (compute capability 7.5)",
    "fp16": "Volta (compute capability 7.0)",
    "fp32": "any GPU",
}
"""First architecture with a tensor-core path per dtype (NVIDIA architecture whitepapers:
Ampere GA100 introduced BF16, Hopper GH100 / Ada AD102 FP8, Blackwell FP4)."""

_RATE_FIELD: dict[HardwarePath, str] = {
    "fp32": "fp32_tflops",
    "bf16": "bf16_dense_tflops",
    "fp16": "fp16_dense_tflops",
    "fp8": "fp8_dense_tflops",
    "fp4": "fp4_dense_tflops",
    "int8": "int8_dense_tops",
}

# (native path, fallback paths that weight-only kernels dequantise to, fallback is emulation)
_PATHS: dict[str, tuple[tuple[HardwarePath, ...], tuple[HardwarePath, ...]]] = {
    "fp32": (("fp32",), ()),
    "bf16": (("bf16",), ()),
    "fp16": (("fp16",), ()),
    # vLLM runs FP8 checkpoints weight-only (Marlin W8A16) below compute capability 8.9
    # (vLLM docs, "FP8 W8A8": "weight-only FP8 via Marlin on Ampere").
    "fp8": (("fp8",), ("fp16", "bf16")),
    "int8": (("int8",), ("fp16", "bf16")),
    # gpt-oss MXFP4 experts run through dequantising kernels before Blackwell (vLLM gpt-oss
    # recipe: Hopper uses Triton/Marlin MXFP4 kernels, Blackwell native FP4).
    "mxfp4": (("fp4",), ("bf16", "fp16")),
    # Weight-only 4/8-bit formats always dequantise to 16-bit inside the matmul kernel
    # (GPTQ/AWQ Marlin and ExLlama kernels, bitsandbytes NF4): 16-bit compute rate.
    # GPTQ 2/3-bit checkpoints (shipped formats) run through the same GPTQ kernels.
    "int2": ((), ("fp16", "bf16")),
    "int3": ((), ("fp16", "bf16")),
    "int4": ((), ("fp16", "bf16")),
    # GPTQ/AWQ 8-bit checkpoints: weight-only too (W8A16), not the int8 tensor-core path
    "int8-weight-only": ((), ("fp16", "bf16")),
    "nf4": ((), ("bf16", "fp16")),
    "nf4-single-quant": ((), ("bf16", "fp16")),
    "q4_k_m": ((), ("fp16", "bf16")),
    "q8_0": ((), ("fp16", "bf16")),
}

FALLBACK_MIN_CAPABILITY: dict[str, tuple[int, int]] = {
    "fp8": (8, 0),
    "mxfp4": (8, 0),
    "int2": (7, 0),
    "int3": (7, 0),
    "int4": (7, 0),
    "int8-weight-only": (7, 0),
    "nf4": (7, 0),
    "nf4-single-quant": (7, 0),
}
"""Oldest NVIDIA compute capability with a dequantising kernel for a dtype whose native path
the GPU lacks; an older GPU has no path for it at all (``dtype_unsupported``). Sources (vLLM):

* ``fp8``: weight-only FP8 runs through FP8 Marlin (W8A16), and
  ``vllm/model_executor/layers/quantization/utils/marlin_utils_fp8.py``
  ``is_fp8_marlin_supported()`` is ``has_device_capability(80)``; the docs' "Supported
  Hardware" table (features/quantization, v0.9-v0.15) marks "Marlin (GPTQ/AWQ/FP8)" Ampere
  and newer only, FP8 W8A8 Ada and newer;
* ``mxfp4``: ``vllm/model_executor/layers/quantization/mxfp4.py``
  ``Mxfp4Config.get_min_capability()`` returns 80 (Marlin / Triton MXFP4 MoE kernels);
* ``int4`` (GPTQ/AWQ-style): Marlin needs 8.0, but the GPTQ (ExLlama) kernels run from Volta
  (the same table: GPTQ Volta and newer, AWQ Turing and newer); ``int2`` / ``int3`` (GPTQ
  checkpoints of 2 or 3 bits, which Marlin does not take) likewise through the GPTQ kernels;
* ``nf4``: bitsandbytes, Volta and newer (the same table).

Other vendors have no compute capability; their paths follow the GPU table's rates as before.
"""

ARCHITECTURE_CAPABILITY: dict[str, tuple[int, int]] = {
    "volta": (7, 0),
    "turing": (7, 5),
    "ampere": (8, 0),
    "ada-lovelace": (8, 9),
    "hopper": (9, 0),
    "blackwell": (10, 0),
    "blackwell-ultra": (10, 3),
}
"""The lowest compute capability of each NVIDIA architecture (CUDA C++ Programming Guide,
"Compute Capabilities"), used where a GPU row leaves ``compute_capability`` empty (A10G:
Ampere, 8.6, reads as 8.0, which every rule here treats alike)."""

_WEIGHT_ONLY = frozenset(
    {"int2", "int3", "int4", "int8-weight-only", "nf4", "nf4-single-quant", "q4_k_m", "q8_0"}
)


class ComputePath(Struct, frozen=True, kw_only=True):
    """How a dtype's matmuls run on one GPU.

    Attributes:
        dtype: the workload's dtype (``bf16``, ``fp8``, ``nf4``...).
        path: the hardware path used (``bf16``, ``fp8``, ``fp4``...).
        tflops: dense peak of that path, TFLOPS (TOPS for int8), from the GPU table.
        emulated: True when the dtype has no native path on this GPU and runs through
            dequantising kernels at the slower 16-bit rate.
    """

    dtype: str
    path: HardwarePath
    tflops: float
    emulated: bool


BF16_AT_FP16_RATE_FROM_CC = (8, 0)
"""From Ampere on, NVIDIA tensor cores run BF16 at the FP16 rate (NVIDIA A100 Tensor Core GPU
Architecture whitepaper, "BF16 ... at the same rate as FP16"; the A100, A10, L4, L40S and H100
datasheets print equal BF16 and FP16 figures). Some datasheets (A16) print only FP16."""


def compute_capability(gpu: GpuSpec) -> tuple[int, int] | None:
    """An NVIDIA GPU's compute capability as ``(major, minor)``: the table's value, else the
    lowest of its architecture (:data:`ARCHITECTURE_CAPABILITY`); None for other vendors or
    an unknown architecture."""
    if gpu.vendor != "nvidia":
        return None
    major, _, minor = (gpu.compute_capability or "").partition(".")
    if major.isdigit() and minor.isdigit():
        return int(major), int(minor)
    return ARCHITECTURE_CAPABILITY.get(gpu.architecture.lower())


def path_rate_tflops(gpu: GpuSpec, path: HardwarePath) -> float | None:
    """Dense peak rate of ``path`` on ``gpu`` (None = no hardware path or not published).

    An NVIDIA GPU of compute capability 8.0 or later whose row gives FP16 but no BF16 rate runs
    BF16 at the FP16 rate (:data:`BF16_AT_FP16_RATE_FROM_CC`).
    """
    value = getattr(gpu, _RATE_FIELD[path])
    if value:
        return float(value)
    if path == "bf16" and gpu.fp16_dense_tflops:
        capability = compute_capability(gpu)
        if capability is not None and capability >= BF16_AT_FP16_RATE_FROM_CC:
            return float(gpu.fp16_dense_tflops)
    return None


def compute_path(gpu: GpuSpec, dtype: str) -> ComputePath | None:
    """The hardware path ``dtype`` runs on, or None when the GPU cannot run it at all.

    Native paths come first; formats with a documented dequantising kernel fall back to the
    16-bit rate (``emulated`` unless the format is weight-only by design) -- on NVIDIA GPUs
    only from the compute capability that kernel needs (:data:`FALLBACK_MIN_CAPABILITY`: no
    fp8 or mxfp4 on a T4 or V100).
    """
    native, fallback = _PATHS.get(dtype, ((), ("bf16", "fp16")))
    for path in native:
        rate = path_rate_tflops(gpu, path)
        if rate is not None:
            return ComputePath(dtype=dtype, path=path, tflops=rate, emulated=False)
    if not _has_fallback_kernel(gpu, dtype):
        return None
    for path in fallback:
        rate = path_rate_tflops(gpu, path)
        if rate is not None:
            return ComputePath(
                dtype=dtype, path=path, tflops=rate, emulated=dtype not in _WEIGHT_ONLY
            )
    return None


def _has_fallback_kernel(gpu: GpuSpec, dtype: str) -> bool:
    minimum = FALLBACK_MIN_CAPABILITY.get(dtype)
    capability = compute_capability(gpu)
    return minimum is None or capability is None or capability >= minimum


def has_published_rates(gpu: GpuSpec) -> bool:
    """Whether the GPU table gives any dense rate for ``gpu``. A GPU with none (one whose
    vendor publishes no datasheet and no cited source gives its rates) cannot be timed; that
    is a data gap, not a missing hardware path."""
    return any(path_rate_tflops(gpu, path) is not None for path in _RATE_FIELD)


def missing_path_requirement(dtype: str) -> str:
    """What a GPU needs to run ``dtype`` (for rejection sentences): the oldest architecture
    with a native path, or with the dequantising kernel where there is one."""
    native, fallback = _PATHS.get(dtype, ((), ("bf16",)))
    minimum = FALLBACK_MIN_CAPABILITY.get(dtype)
    if minimum is not None and fallback:
        kernel = f"compute capability {minimum[0]}.{minimum[1]} or later"
        if native:
            native_needs = MINIMUM_ARCHITECTURE.get(native[0], "a newer GPU")
            return f"{kernel} (weight-only kernels); its native path needs {native_needs}"
        return f"{kernel} (its dequantising kernels)"
    path = native[0] if native else fallback[-1]
    return MINIMUM_ARCHITECTURE.get(path, "a newer GPU")


def training_compute_dtype(workload: TrainingWorkload) -> str:
    """The matmul dtype of a training run: the precision's 16-bit type, or fp32.

    fp32 runs at the plain FP32 rate: PyTorch leaves ``torch.backends.cuda.matmul.allow_tf32``
    False by default since 1.12 (PyTorch docs, "TensorFloat-32 (TF32) on Ampere devices").
    """
    match workload.precision:
        case "fp16-mixed":
            return "fp16"
        case "fp32":
            return "fp32"
        case _:
            return "bf16"


def inference_weight_dtype(arch: Architecture, workload: InferenceWorkload) -> str:
    """The weight dtype that drives the compute path of a serving plan.

    The request's ``weight_dtype``, else the checkpoint's shipped format when it covers all
    linear layers (DeepSeek-V3 fp8), else bf16 (a format shipped for routed experts only, as
    gpt-oss MXFP4, leaves attention and the dense layers in bf16).
    """
    if workload.weight_dtype is not None:
        return workload.weight_dtype
    if arch.shipped_weight_format and arch.shipped_quantized_modules == "all-linear":
        return arch.shipped_weight_format
    return "bf16"


GpuClass = Literal["datacenter", "workstation", "amd", "gaudi"]


def gpu_class(gpu: GpuSpec) -> GpuClass:
    """Coarse class used for efficiency defaults: vendor, then workstation/GeForce by name."""
    if gpu.vendor == "amd":
        return "amd"
    if gpu.vendor == "intel":
        return "gaudi"
    label = f"{gpu.id} {gpu.name}".upper()
    if gpu.id.upper().startswith("RTX") or "GEFORCE" in label or "RTX" in label:
        return "workstation"
    return "datacenter"


NVLINK_DOMAIN_GPUS = 8
"""Largest scale-up domain (GPUs all-to-all over NVLink/NVSwitch, Infinity Fabric or on-chip
RoCE) of a node, unless :data:`NVLINK_DOMAIN_GPUS_BY_FAMILY` says otherwise: an HGX/DGX
H100, H200, B200 or B300 baseboard joins 8 GPUs through NVSwitch (NVIDIA DGX H100/B200 user
guides, "8x GPUs ... NVSwitch"); AMD's MI300X/MI325X platform joins 8 OAMs over Infinity
Fabric (AMD Instinct MI300X platform data sheet); an Intel Gaudi 2/3 server (HLS-2/HLS-Gaudi3)
joins 8 accelerators all-to-all over their integrated RoCE ports (Intel Gaudi 2 white paper,
"21 of 24 100 GbE ports ... all-to-all"). So TP=16 on 16 H100 is not one NVLink domain."""

NVLINK_DOMAIN_GPUS_BY_FAMILY: dict[str, int] = {
    "GB200": 72,  # GB200 NVL72: 72 Blackwell GPUs in one NVLink domain (NVIDIA GB200 NVL72)
    "A100": 16,  # HGX A100 16-GPU: two baseboards over NVSwitch (GCP a2-megagpu-16g)
    "V100": 16,  # HGX-2 / DGX-2: 16 V100 over 12 NVSwitches (NVIDIA DGX-2 data sheet)
}
"""GPU families whose largest scale-up domain differs from :data:`NVLINK_DOMAIN_GPUS`."""

MAX_GPUS_PER_NODE = 16
"""Most GPUs of one node (instance) the planner accepts as hardware: the 16-GPU HGX-2 / DGX-2
and HGX A100 16-GPU class (GCP a2-megagpu-16g; 16 x A16 instances in the bundled catalog);
8-GPU HGX/DGX boards and 8-10-GPU PCIe servers are below it. A GPU with a larger scale-up
domain (GB200 NVL72) may fill it (:func:`max_gpus_per_node`)."""


def nvlink_domain_limit(gpu: GpuSpec) -> int:
    """Largest scale-up domain the GPU is built into (:data:`NVLINK_DOMAIN_GPUS`)."""
    return NVLINK_DOMAIN_GPUS_BY_FAMILY.get(gpu.family.upper(), NVLINK_DOMAIN_GPUS)


def max_gpus_per_node(gpu: GpuSpec) -> int:
    """Most GPUs of ``gpu`` one node may hold: :data:`MAX_GPUS_PER_NODE`, or the GPU's
    scale-up domain where that is larger (72 for a GB200 NVL72 rack)."""
    return max(MAX_GPUS_PER_NODE, nvlink_domain_limit(gpu))


def scale_up_fabric(gpu: GpuSpec) -> str:
    """The vendor's name for the GPU-to-GPU link inside a node: NVLink (NVIDIA), Infinity
    Fabric (AMD Instinct), RoCE (Intel Gaudi's integrated RoCE v2 ports)."""
    match gpu.vendor:
        case "amd":
            return "Infinity Fabric"
        case "intel":
            return "RoCE"
        case _:
            return "NVLink"


def nvlink_domain_size(interconnect: Interconnect, gpu: GpuSpec, gpu_count: int) -> int:
    """GPUs of one node that share an NVLink / NVSwitch / Infinity Fabric / RoCE domain,
    never more than the GPU's own scale-up domain (:func:`nvlink_domain_limit`: 8 on an
    HGX H100 board, whatever ``gpu_count`` says).

    * ``nvswitch``, ``infinity-fabric`` (MI300X OAM platforms: 7 links to every peer, AMD
      MI300 docs) and ``roce`` (Intel Gaudi, all-to-all RoCE ports): the whole node.
    * ``nvlink`` on SXM/OAM/superchip parts: the whole node (HGX boards connect all 8 GPUs).
      On PCIe cards (A100 PCIe, H100 NVL, RTX A6000) NVLink is a bridge between pairs
      (NVIDIA H100 NVL and A100 PCIe product briefs): 2.
    * ``pcie`` / ``none``: 1 (no GPU-to-GPU link).
    * ``unknown``: SXM/OAM/superchip parts with an NVLink rate count as one domain; PCIe cards
      count as 1, since a bridge may not be fitted.
    """
    return min(_domain(interconnect, gpu, gpu_count), nvlink_domain_limit(gpu))


def _domain(interconnect: Interconnect, gpu: GpuSpec, gpu_count: int) -> int:
    board = gpu.form_factor in ("sxm", "oam", "superchip")
    match interconnect:
        case "nvswitch" | "infinity-fabric" | "roce":
            return gpu_count
        case "nvlink":
            return gpu_count if board else min(2, gpu_count)
        case "pcie" | "none":
            return 1
        case _:
            return gpu_count if board and gpu.nvlink_bytes_per_s > 0 else 1


def max_tensor_parallel(domain_size: int) -> int:
    """Largest TP planned: the NVLink domain, or ``PCIE_MAX_TENSOR_PARALLEL`` over PCIe."""
    return max(domain_size, PCIE_MAX_TENSOR_PARALLEL)


def pcie_bytes_per_s(gpu: GpuSpec) -> float:
    """Per-direction host link: PCIe 5.0 on Hopper and newer (CC >= 9.0), else PCIe 4.0."""
    try:
        major = float(gpu.compute_capability or "0")
    except ValueError:
        major = 0.0
    return float(PCIE_GEN5_X16_BYTES_PER_S if major >= 9.0 else PCIE_GEN4_X16_BYTES_PER_S)


def nvlink_bytes_per_s_per_direction(gpu: GpuSpec) -> float:
    """NVLink rate per direction: half the vendor's bidirectional total (H100: 900 GB/s total,
    450 GB/s each way; NVIDIA H100 datasheet, shared/data/gpu-specs README)."""
    return gpu.nvlink_bytes_per_s / 2


class Links(Struct, frozen=True, kw_only=True):
    """Per-direction bandwidth, bytes/s, that one GPU sees for each kind of collective.

    Attributes:
        tp_bytes_per_s: link used by tensor-parallel all-reduces.
        tp_medium: ``nvlink`` or ``pcie``.
        dp_bytes_per_s: bottleneck link of the data-parallel gradient collective.
        dp_medium: ``nvlink``, ``pcie`` or ``network``.
    """

    tp_bytes_per_s: float
    tp_medium: Literal["nvlink", "pcie"]
    dp_bytes_per_s: float
    dp_medium: Literal["nvlink", "pcie", "network"]


def links(
    gpu: GpuSpec,
    domain_size: int,
    gpus_per_node: int,
    nodes: int,
    network_gbit_per_s: float | None,
) -> Links:
    """Bandwidths of a plan's collectives.

    Inside a node, GPUs of one NVLink domain talk over NVLink, others over PCIe. Across nodes
    the data-parallel ring is limited by the node's network share per GPU: NCCL runs one ring
    per NIC rail, so each GPU gets ``network / gpus_per_node`` (NCCL docs, "Performance";
    nccl-tests PERFORMANCE.md bus bandwidth).
    """
    nvlink = nvlink_bytes_per_s_per_direction(gpu)
    intra_nvlink = domain_size > 1 and nvlink > 0
    tp_bw = nvlink if intra_nvlink else pcie_bytes_per_s(gpu)
    tp_medium: Literal["nvlink", "pcie"] = "nvlink" if intra_nvlink else "pcie"
    whole_node_nvlink = intra_nvlink and domain_size >= gpus_per_node
    intra_bw = nvlink if whole_node_nvlink else pcie_bytes_per_s(gpu)
    if nodes > 1 and network_gbit_per_s:
        per_gpu = network_gbit_per_s * 1e9 / 8 / gpus_per_node
        return Links(
            tp_bytes_per_s=tp_bw,
            tp_medium=tp_medium,
            dp_bytes_per_s=min(intra_bw, per_gpu),
            dp_medium="network",
        )
    return Links(
        tp_bytes_per_s=tp_bw,
        tp_medium=tp_medium,
        dp_bytes_per_s=intra_bw,
        dp_medium="nvlink" if whole_node_nvlink else "pcie",
    )
