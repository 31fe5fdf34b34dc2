"""GPU specifications as domain values (DESIGN "GPU capacity").

The table itself is data (``gpu_advisor/data/gpus.csv``, dated, with a source column per row);
loading it is an adapter's job. The core receives a :class:`GpuCatalog` and never reads files.
"""

from __future__ import annotations

from typing import Literal

from msgspec import Struct

FormFactor = Literal["sxm", "pcie", "nvl", "oam", "superchip", "other"]


class GpuSpec(Struct, frozen=True, kw_only=True):
    """One GPU model, per GPU (never per instance).

    Attributes:
        id: canonical id ``<MODEL>[-<FORM>]-<N>GB`` (``H100-SXM-80GB``).
        name: marketed name.
        vendor: ``nvidia`` | ``amd`` | ``intel``.
        architecture: ``hopper``, ``ampere``, ``ada``, ``blackwell``, ``cdna3``...
        form_factor: SXM / PCIe / NVL / OAM / superchip.
        memory_bytes: marketed capacity: the label N GB taken as N * 2**30 bytes (HBM and
            GDDR parts are built from power-of-two dies; labels and filters use this).
        memory_exposed_bytes: what the driver reports and a process can allocate (nvidia-smi
            total), used by fit checks; e.g. H100 80 GB -> 81,559 MiB.
        memory_bandwidth_bytes_per_s: peak HBM/GDDR bandwidth (datasheet GB/s * 10**9).
        bf16_dense_tflops / fp16_dense_tflops / fp8_dense_tflops / fp4_dense_tflops /
            int8_dense_tops / fp32_tflops / tf32_dense_tflops: dense peak rates (datasheet, sparse
            figures halved); None where the GPU has no such hardware path.
        nvlink_bytes_per_s: GPU-to-GPU link bandwidth (0 without NVLink/Infinity Fabric).
        compute_capability: CUDA compute capability (``"9.0"``), None for AMD/Intel.
        aliases: other names that resolve to this id (case-insensitive).
        source: keys of the sources the row was taken from.
    """

    id: str
    name: str
    vendor: str
    architecture: str
    form_factor: FormFactor
    memory_bytes: int
    memory_exposed_bytes: int
    memory_bandwidth_bytes_per_s: int
    fp32_tflops: float | None = None
    tf32_dense_tflops: float | None = None
    bf16_dense_tflops: float | None = None
    fp16_dense_tflops: float | None = None
    fp8_dense_tflops: float | None = None
    fp4_dense_tflops: float | None = None
    int8_dense_tops: float | None = None
    nvlink_bytes_per_s: int = 0
    compute_capability: str | None = None
    aliases: tuple[str, ...] = ()
    source: str = ""
