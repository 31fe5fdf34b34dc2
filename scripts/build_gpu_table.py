"""Build ``service/gpu_advisor/data/gpus.csv`` from the shared GPU fact table.

Usage::

    python scripts/build_gpu_table.py [--specs PATH] [--out PATH]

Input: ``shared/data/gpu-specs/gpu_specs.csv`` (34 rows, each with its sources; see that
folder's README) plus ``EXTRA_ROWS`` below (GPUs of the bundled offers that gpu-specs lacks,
each from a cited public copy of the vendor datasheet). Output: one row per GPU with the
canonical id ``<MODEL>[-<FORM>]-<N>GB`` (DESIGN "Pricing catalog and cache"), the resolver's
family/form keys, aliases, the exposed memory used by fit checks and where that number comes
from, and the row's sources.

Exposed memory (what fit checks use, DESIGN "GPU capacity"), in this order:

1. ``observed`` - the driver-reported total (nvidia-smi) from the spec file's
   ``observed_total_mib`` (H100 80 GB -> 81,559 MiB; A10 -> 23,028 MiB; L40S -> 46,068 MiB),
   or ``DRIVER_REPORTED_MIB`` below where the spec file has none (T4 with ECC -> 15,360 MiB).
2. ``cloud-reported`` - a cloud's per-GPU figure below the label, where no driver figure is
   known: L4 and A10G 22,888 MiB (AWS DescribeInstanceTypes ``MemoryInfo.SizeInMiB``, as
   carried in SkyPilot catalog v7 ``aws/vms.csv``; the gpu-specs README quotes ~22.35 GiB
   usable for both).
3. ``nominal`` - the label read as GiB (N * 1024 MiB), where neither is known (A100 SXM,
   B200, MI300X...). The estimator's runtime-overhead term and the caller's headroom cover
   the difference; the basis column says the figure is nominal.

The spec row for GH200 96 GB carries 98,304 MiB, which the README calls a nominal listing
(Lambda), so its basis is ``nominal``.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

AS_OF = "2026-11-30"
SPECS_DEFAULT = (
    Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "shared" / "data" / "gpu-specs"
)

# spec gpu_id -> (canonical id, family, form, form_factor, default-of-family, extra aliases).
# ``family`` is the resolver's model key (upper case, no separators); ``form`` is the variant
# token (SXM / PCIE / NVL) or "" where the model has one form. Aliases are matched
# case-insensitively after the same normalisation as names (see core/gpus.py).
VARIANTS: dict[str, tuple[str, str, str, str, bool, tuple[str, ...]]] = {
    "h200_sxm": ("H200-SXM-141GB", "H200", "SXM", "sxm", True, ("H200-SXM5",)),
    "h100_sxm5_80gb": (
        "H100-SXM-80GB",
        "H100",
        "SXM",
        "sxm",
        True,
        ("NVIDIA H100 80GB HBM3", "H100-MEGA", "H100-80GB-HBM3", "H100-SXM5-80GB"),
    ),
    "h100_pcie_80gb": ("H100-PCIE-80GB", "H100", "PCIE", "pcie", False, ("NVIDIA H100 PCIe",)),
    "h100_nvl_94gb": ("H100-NVL-94GB", "H100", "NVL", "nvl", False, ("H100 NVL",)),
    "gh200_96gb": ("GH200-96GB", "GH200", "", "superchip", True, ()),
    "gh200_144gb": ("GH200-144GB", "GH200", "", "superchip", False, ()),
    "b200_hgx": ("B200-180GB", "B200", "", "sxm", True, ("HGX B200",)),
    "b300_hgx": ("B300-270GB", "B300", "", "sxm", True, ("HGX B300",)),
    "gb200_per_gpu": ("GB200-186GB", "GB200", "", "superchip", True, ()),
    "a100_sxm4_80gb": (
        "A100-SXM-80GB",
        "A100",
        "SXM",
        "sxm",
        False,
        ("A100-80GB-SXM", "NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"),
    ),
    "a100_sxm4_40gb": (
        "A100-SXM-40GB",
        "A100",
        "SXM",
        "sxm",
        True,
        ("NVIDIA A100-SXM4-40GB", "A100-SXM4-40GB"),
    ),
    "a100_pcie_80gb": ("A100-PCIE-80GB", "A100", "PCIE", "pcie", False, ("NVIDIA A100 80GB PCIe",)),
    "a100_pcie_40gb": ("A100-PCIE-40GB", "A100", "PCIE", "pcie", False, ("NVIDIA A100 40GB PCIe",)),
    "l40s": ("L40S-48GB", "L40S", "", "pcie", True, ()),
    "l40": ("L40-48GB", "L40", "", "pcie", True, ()),
    "l4": ("L4-24GB", "L4", "", "pcie", True, ()),
    "a10": ("A10-24GB", "A10", "", "pcie", True, ()),
    "a10g": ("A10G-24GB", "A10G", "", "pcie", True, ()),
    "a40": ("A40-48GB", "A40", "", "pcie", True, ()),
    "rtx_a6000": ("RTXA6000-48GB", "RTXA6000", "", "pcie", True, ("A6000", "RTX A6000")),
    "rtx_6000_ada": (
        "RTX6000ADA-48GB",
        "RTX6000ADA",
        "",
        "pcie",
        True,
        ("RTX 6000 Ada Generation", "RTX6000-Ada", "6000ADA"),
    ),
    "rtx_4090": ("RTX4090-24GB", "RTX4090", "", "pcie", True, ("RTX 4090", "GeForce RTX 4090")),
    "rtx_3090": ("RTX3090-24GB", "RTX3090", "", "pcie", True, ("RTX 3090",)),
    "rtx_5090": ("RTX5090-32GB", "RTX5090", "", "pcie", True, ("RTX 5090",)),
    "v100_sxm2_16gb": ("V100-SXM-16GB", "V100", "SXM", "sxm", True, ("Tesla V100-SXM2-16GB",)),
    "v100_sxm2_32gb": ("V100-SXM-32GB", "V100", "SXM", "sxm", False, ("Tesla V100-SXM2-32GB",)),
    "t4": ("T4-16GB", "T4", "", "pcie", True, ("Tesla T4",)),
    "rtx_pro_6000_blackwell": (
        "RTXPRO6000-96GB",
        "RTXPRO6000",
        "",
        "pcie",
        True,
        (
            "RTX PRO 6000 Blackwell",
            "RTXPRO6000Blackwell",
            "RTX PRO 6000 Blackwell Workstation Edition",
            "PRO6000",
        ),
    ),
    "mi300x": ("MI300X-192GB", "MI300X", "", "oam", True, ("AMD Instinct MI300X",)),
    "mi325x": ("MI325X-256GB", "MI325X", "", "oam", True, ()),
    "mi250x": ("MI250X-128GB", "MI250X", "", "oam", True, ()),
    "mi210": ("MI210-64GB", "MI210", "", "pcie", True, ()),
    "gaudi2": ("GAUDI2-96GB", "GAUDI2", "", "other", True, ("Gaudi 2", "HL-225")),
    "gaudi3": ("GAUDI3-128GB", "GAUDI3", "", "oam", True, ("Gaudi 3",)),
}

# GPUs whose exposed memory comes from a cloud's report (see the module docstring).
CLOUD_REPORTED_MIB: dict[str, tuple[int, str]] = {
    "l4": (22888, "SKY-AWS: aws/vms.csv MemoryInfo.SizeInMiB for g6 (L4)"),
    "a10g": (22888, "SKY-AWS: aws/vms.csv MemoryInfo.SizeInMiB for g5 (A10G)"),
}
NOMINAL_DESPITE_OBSERVED = {"gh200_96gb"}

# Driver-reported totals the spec file lacks (its README: "no ... T4 ... observation"), each
# with its evidence; they take the ``observed`` basis.
DRIVER_REPORTED_MIB: dict[str, tuple[int, str]] = {
    "t4": (
        15360,
        "T4 ECC (on by default in clouds) reserves 1/16 of the GDDR6: 16,384 x 15/16 = 15,360 "
        "MiB in nvidia-smi; CUDA itself reports less still (deviceQuery 15,843,721,216 B = "
        "15,110 MiB, chiemon.github.io/2024/12/25; TensorFlow 'deviceMemorySize: 14.75GiB', "
        "NVIDIA/DALI#1813), never the 16,384 MiB AWS lists for g4dn",
    ),
}

# Values a spec row leaves empty, filled from a source the gpu-specs README keys (a fill never
# replaces a value the spec row gives). spec gpu_id -> (column -> value, citation).
SOURCE_FILLS: dict[str, tuple[dict[str, str], str]] = {
    "a10g": (
        {
            "fp32_tflops": "31.2",
            "bf16_dense_tflops": "125",
            "fp16_dense_tflops": "125",
            "compute_capability": "8.6",
        },
        "LIGHT: Lightning-AI/pytorch-lightning src/lightning/fabric/utilities/throughput.py "
        "(commit 0810121f) _CUDA_FLOPS['a10g'] = {float32: 31.2e12, bfloat16: 125e12, "
        "float16: 125e12}, dense (the table halves NVIDIA's sparse figures), citing the A10 "
        "datasheet a10-datasheet.pdf; TF32 and INT8 not listed there; compute capability 8.6: "
        "facebookincubator/AITemplate#279 ('A10G has compute capability 8.6', g5.2xlarge), "
        "GA102 like the A10 (N-CC: 8.6)",
    ),
}

VENDORS = {"NVIDIA": "nvidia", "AMD": "amd", "Intel": "intel"}

COLUMNS = [
    "id",
    "family",
    "form",
    "default_variant",
    "name",
    "vendor",
    "architecture",
    "form_factor",
    "memory_gb_marketed",
    "memory_exposed_mib",
    "memory_exposed_basis",
    "memory_bandwidth_gb_per_s",
    "fp32_tflops",
    "tf32_dense_tflops",
    "bf16_dense_tflops",
    "fp16_dense_tflops",
    "fp8_dense_tflops",
    "fp4_dense_tflops",
    "int8_dense_tops",
    "nvlink_gb_per_s",
    "compute_capability",
    "aliases",
    "spec_row",
    "source",
    "as_of",
]


def _architecture(raw: str) -> str:
    base = raw.split("(")[0].strip().lower()
    return base.replace(" ", "-")


def build_rows(spec_rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """Map each spec row to a gpus.csv row (pure; raises KeyError for an unmapped row)."""
    out: list[dict[str, str]] = []
    for row in spec_rows:
        gpu_id = row["gpu_id"]
        canonical, family, form, form_factor, default, aliases = VARIANTS[gpu_id]
        gb = int(row["memory_gb_marketed"])
        nominal_mib = gb * 1024
        source = row["sources"]
        if gpu_id in CLOUD_REPORTED_MIB:
            exposed, note = CLOUD_REPORTED_MIB[gpu_id]
            basis = "cloud-reported"
            source = f"{source};{note}"
        elif gpu_id in DRIVER_REPORTED_MIB:
            exposed, note = DRIVER_REPORTED_MIB[gpu_id]
            basis = "observed"
            source = f"{source};{note}"
        elif row["observed_total_mib"] and gpu_id not in NOMINAL_DESPITE_OBSERVED:
            exposed, basis = int(row["observed_total_mib"]), "observed"
        else:
            exposed, basis = nominal_mib, "nominal"
        link = row["interconnect_gb_per_s"].strip()
        if gpu_id in SOURCE_FILLS:
            fills, citation = SOURCE_FILLS[gpu_id]
            row = {**row, **{k: v for k, v in fills.items() if not row[k].strip()}}
            source = f"{source};{citation}"
        out.append(
            {
                "id": canonical,
                "family": family,
                "form": form,
                "default_variant": "yes" if default else "no",
                "name": row["gpu_name"],
                "vendor": VENDORS[row["vendor"]],
                "architecture": _architecture(row["architecture"]),
                "form_factor": form_factor,
                "memory_gb_marketed": str(gb),
                "memory_exposed_mib": str(exposed),
                "memory_exposed_basis": basis,
                "memory_bandwidth_gb_per_s": row["memory_bandwidth_gb_per_s"],
                "fp32_tflops": row["fp32_tflops"],
                "tf32_dense_tflops": row["tf32_dense_tflops"],
                "bf16_dense_tflops": row["bf16_dense_tflops"],
                "fp16_dense_tflops": row["fp16_dense_tflops"],
                "fp8_dense_tflops": row["fp8_dense_tflops"],
                "fp4_dense_tflops": row["fp4_dense_tflops"],
                "int8_dense_tops": row["int8_dense_tops"],
                "nvlink_gb_per_s": link if link else "0",
                "compute_capability": row["compute_capability"],
                "aliases": ";".join(aliases),
                "spec_row": gpu_id,
                "source": f"gpu-specs:{gpu_id} ({source})",
                "as_of": AS_OF,
            }
        )
    return out


# GPUs that appear in the bundled offers but not in gpu-specs, added from public copies of
# the vendor's datasheet (cited per row, as the gpu-specs README cites its sources; a value
# the source does not state is left empty). Bundled GPUs with no such source are dropped from
# the snapshot instead (``gpu_spec_unknown``, scripts/build_offers_snapshot.py).
EXTRA_ROWS: list[dict[str, str]] = [
    {
        "id": "RTXA4000-16GB",
        "family": "RTXA4000",
        "form": "",
        "default_variant": "yes",
        "name": "NVIDIA RTX A4000",
        "vendor": "nvidia",
        "architecture": "ampere",
        "form_factor": "pcie",
        "memory_gb_marketed": "16",
        "memory_exposed_mib": "16376",
        "memory_exposed_basis": "observed",
        "memory_bandwidth_gb_per_s": "448",
        "fp32_tflops": "19.2",
        "tf32_dense_tflops": "",
        "bf16_dense_tflops": "76.7",
        "fp16_dense_tflops": "76.7",
        "fp8_dense_tflops": "",
        "fp4_dense_tflops": "",
        "int8_dense_tops": "",
        "nvlink_gb_per_s": "0",
        "compute_capability": "8.6",
        "aliases": "RTX A4000;A4000;NVIDIA RTX A4000",
        "spec_row": "",
        "source": (
            "N-A4000: NVIDIA RTX A4000 datasheet (16GB GDDR6 with ECC, 256-bit, 448 GB/s, "
            "6,144 CUDA cores, 192 Tensor Cores, single-precision 19.2 TFLOPS, tensor 153.4 "
            "TFLOPS (footnote: with sparsity), PCIe 4.0 x16, no NVLink listed, 140 W) - public "
            "copy https://www.ecer.com/corp/details-uuuedqa-p1bsb03-pci-express-3-0-x16-nvidia-"
            "rtx-a4000-16g-graphics-card-for-professional-video-editing.html (read 2026-11-30); "
            "BF16/FP16 dense = 153.4 / 2, as for the RTX A6000 datasheet (gpu-specs README "
            "Trap 2); TF32/INT8 not stated; N-CC: RTX A4000 8.6 (NVIDIA CUDA GPUs list, copy in "
            "HeKun-NVIDIA/AI-Blog 89.GPU算力一览); SKY: vast 4x-RTX_A4000 "
            "TotalGpuMemoryInMiB 65504 / 4 = 16376 MiB observed"
        ),
        "as_of": AS_OF,
    },
    {
        "id": "A16-16GB",
        "family": "A16",
        "form": "",
        "default_variant": "yes",
        "name": "NVIDIA A16 (one of the board's four GPUs)",
        "vendor": "nvidia",
        "architecture": "ampere",
        "form_factor": "pcie",
        "memory_gb_marketed": "16",
        "memory_exposed_mib": "16384",
        "memory_exposed_basis": "nominal",
        "memory_bandwidth_gb_per_s": "200",
        "fp32_tflops": "4.5",
        "tf32_dense_tflops": "9",
        "bf16_dense_tflops": "",
        "fp16_dense_tflops": "17.9",
        "fp8_dense_tflops": "",
        "fp4_dense_tflops": "",
        "int8_dense_tops": "35.9",
        "nvlink_gb_per_s": "0",
        "compute_capability": "8.6",
        "aliases": "NVIDIA A16",
        "spec_row": "",
        "source": (
            "N-A16: NVIDIA A16 datasheet spec table, per board of four GPUs (4x 16GB GDDR6, "
            "4x 200 GB/s, FP32 4x 4.5, TF32 4x 9 | 4x 18 sparsity, FP16 4x 17.9 | 4x 35.9 "
            "sparsity, INT8 4x 35.9 | 4x 71.8 sparsity TOPS, PCIe Gen4, 250 W per board) - "
            "public copy https://panchaea.com/products/graphics-cards/nvidia-a16 (read "
            "2026-11-30); one GPU = a quarter of the board; BF16 not stated; N-CC: NVIDIA A16 "
            "8.6 (NVIDIA CUDA GPUs list, copy in HeKun-NVIDIA/AI-Blog 89.GPU算力一览)"
        ),
        "as_of": AS_OF,
    },
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--specs", type=Path, default=SPECS_DEFAULT / "gpu_specs.csv")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parents[1] / "service/gpu_advisor/data/gpus.csv",
    )
    args = parser.parse_args()
    with args.specs.open(newline="", encoding="utf-8") as fh:
        spec_rows = list(csv.DictReader(fh))
    rows = build_rows(spec_rows) + EXTRA_ROWS
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {len(rows)} GPUs to {args.out}")


if __name__ == "__main__":
    main()
