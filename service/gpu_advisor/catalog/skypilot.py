"""SkyPilot catalog v7 ``vms.csv`` -> :class:`RawOffer` rows (parsing only; no I/O here).

Format (``shared/data/skypilot-catalog-v7/README.md``): one CSV per cloud, columns read by
header name because their order differs per cloud: ``InstanceType, AcceleratorName,
AcceleratorCount, vCPUs, MemoryGiB, GpuInfo, Price, SpotPrice, Region, AvailabilityZone``.
``GpuInfo`` is a Python-literal dict (most clouds), JSON (primeintellect), a bare name (runpod,
paperspace, GCP TPUs) or absent; it is read with ``ast.literal_eval`` / ``json`` only, never
evaluated.

Per-cloud semantics applied here (each documented in that README):

* vast and primeintellect put the instance total in ``MemoryInfo.SizeInMiB``; the rows are
  marked ``gpu_memory_mib_is_total`` and the normaliser divides by the count;
* GCP prices the GPU separately from the host VM (skypilot-catalog issue #31): accelerator
  rows (empty ``InstanceType``) are combined with the host machine type in the same zone,
  price = host + accelerator row (the accelerator row's price is for its whole count), spot
  likewise when both have one. Hosts: GPU machine families fixed per accelerator and count
  (A2/A3/A4/G2, per https://cloud.google.com/compute/docs/gpus and SkyPilot
  ``sky/catalog/gcp_catalog.py``); other accelerators (T4, V100, P100, P4) attach to N1 hosts,
  the cheapest N1 in the zone with at least the vCPUs SkyPilot assigns per GPU count and
  4 GiB RAM per vCPU (same file); such an offer is named ``<host>+<accelerator>:<count>``
  (``n1-highmem-8+T4:2``, SkyPilot's accelerator spelling), since one N1 machine type carries
  different GPUs (``gcloud compute instances create --machine-type n1-highmem-8 --accelerator
  type=nvidia-tesla-t4,count=2``). A GPU-family host row that no accelerator row prices is
  dropped ``gcp_host_without_gpu_price``; an accelerator row with no host in its zone is
  dropped ``gcp_gpu_without_host`` - a host-only or GPU-only price is never an offer.
"""

from __future__ import annotations

import ast
import csv
import io
import json
import math
from collections import defaultdict
from typing import Any

from gpu_advisor.core.normalize import RawOffer

MAX_GPUINFO_CHARS = 4096
MEMORY_IS_INSTANCE_TOTAL = frozenset({"vast", "primeintellect"})
REQUIRED_COLUMNS = frozenset({"InstanceType", "AcceleratorName", "AcceleratorCount", "Price"})

# GCP: accelerator -> GPU count -> host machine types that carry exactly those GPUs.
GCP_GPU_HOSTS: dict[str, dict[int, tuple[str, ...]]] = {
    "A100": {
        1: ("a2-highgpu-1g",),
        2: ("a2-highgpu-2g",),
        4: ("a2-highgpu-4g",),
        8: ("a2-highgpu-8g",),
        16: ("a2-megagpu-16g",),
    },
    "A100-80GB": {
        1: ("a2-ultragpu-1g",),
        2: ("a2-ultragpu-2g",),
        4: ("a2-ultragpu-4g",),
        8: ("a2-ultragpu-8g",),
    },
    "L4": {
        1: ("g2-standard-4", "g2-standard-8", "g2-standard-12", "g2-standard-16", "g2-standard-32"),
        2: ("g2-standard-24",),
        4: ("g2-standard-48",),
        8: ("g2-standard-96",),
    },
    "H100": {
        1: ("a3-highgpu-1g",),
        2: ("a3-highgpu-2g",),
        4: ("a3-highgpu-4g",),
        8: ("a3-highgpu-8g",),
    },
    "H100-MEGA": {8: ("a3-megagpu-8g",)},
    "H200": {8: ("a3-ultragpu-8g",)},
    "B200": {8: ("a4-highgpu-8g",)},
}
GCP_GPU_FAMILY_PREFIXES = ("a2-", "a3-", "a4-", "g2-")
GCP_N1_PREFIXES = ("n1-standard-", "n1-highmem-", "n1-highcpu-")
# vCPUs SkyPilot assigns per GPU count on N1 hosts (sky/catalog/gcp_catalog.py _NUM_ACC_TO_NUM_CPU).
GCP_N1_VCPUS: dict[str, dict[int, int]] = {
    "V100": {1: 8, 2: 16, 4: 32, 8: 64},
    "T4": {1: 4, 2: 8, 4: 48},
    "P100": {1: 8, 2: 16, 4: 32, 8: 64},
    "DEFAULT": {1: 8, 2: 16, 4: 32, 8: 64, 16: 128},
}
GCP_N1_RAM_GIB_PER_VCPU = 4


class SkyPilotFormatError(ValueError):
    """The text is not a SkyPilot v7 vms.csv (missing header columns, not CSV)."""


def _num(text: str | None) -> float | None:
    if text is None:
        return None
    text = text.strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def parse_gpu_info(text: str | None) -> tuple[str | None, int | None, int | None]:
    """``GpuInfo`` -> (name, SizeInMiB, TotalGpuMemoryInMiB); Nones where absent or unreadable."""
    if not text or len(text) > MAX_GPUINFO_CHARS:
        return None, None, None
    text = text.strip()
    data: Any
    try:
        data = json.loads(text) if text.startswith('{"') else ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text, None, None  # a bare name (runpod, paperspace, TPUs)
    if not isinstance(data, dict):
        return str(data), None, None
    gpus = data.get("Gpus")
    name: str | None = None
    size: int | None = None
    if isinstance(gpus, list) and gpus and isinstance(gpus[0], dict):
        first = gpus[0]
        name = str(first["Name"]) if first.get("Name") else None
        memory = first.get("MemoryInfo")
        if isinstance(memory, dict) and isinstance(memory.get("SizeInMiB"), int | float):
            size = int(memory["SizeInMiB"])
    total_raw = data.get("TotalGpuMemoryInMiB")
    total = int(total_raw) if isinstance(total_raw, int | float) else None
    return name, size, total


def _read(text: str) -> list[dict[str, str]]:
    try:
        reader = csv.DictReader(io.StringIO(text))
        header = set(reader.fieldnames or ())
        # Some clouds (DO, v6) spell the keys in lower case; read every header case-insensitively.
        lowered = {h.lower(): h for h in header}
        missing = [c for c in REQUIRED_COLUMNS if c not in header and c.lower() not in lowered]
        if missing:
            raise SkyPilotFormatError(f"vms.csv lacks columns {sorted(missing)}")
        rows: list[dict[str, str]] = []
        canon = {h: next((c for c in _ALL_COLUMNS if c.lower() == h.lower()), h) for h in header}
        for row in reader:
            if None in row:  # more cells than header columns: a broken file
                raise SkyPilotFormatError(f"row {reader.line_num} has extra cells")
            if any(v is None for v in row.values()):  # fewer cells: a truncated file
                raise SkyPilotFormatError(f"row {reader.line_num} is short (truncated file?)")
            rows.append({canon[k]: (v or "") for k, v in row.items()})
        return rows
    except csv.Error as exc:
        raise SkyPilotFormatError(str(exc)) from exc


_ALL_COLUMNS = (
    "InstanceType",
    "AcceleratorName",
    "AcceleratorCount",
    "vCPUs",
    "MemoryGiB",
    "GpuInfo",
    "Price",
    "SpotPrice",
    "Region",
    "AvailabilityZone",
    "UpstreamCloudId",
)


def _row_to_raw(cloud: str, row: dict[str, str], ref: str) -> RawOffer:
    info_name, size, _total = parse_gpu_info(row.get("GpuInfo"))
    hints = tuple(
        h
        for h in (row.get("InstanceType", ""), info_name or "", row.get("UpstreamCloudId", ""))
        if h
    )
    region = " ".join(row.get("Region", "").split()) or "unknown"
    return RawOffer(
        provider=cloud,
        instance_type=row.get("InstanceType", ""),
        region=region,
        zone=row.get("AvailabilityZone") or None,
        accelerator_name=row.get("AcceleratorName") or None,
        accelerator_count=_num(row.get("AcceleratorCount")),
        gpu_memory_mib=size,
        gpu_memory_mib_is_total=cloud in MEMORY_IS_INSTANCE_TOTAL,
        vcpus=_num(row.get("vCPUs")),
        ram_gib=_num(row.get("MemoryGiB")),
        price_per_hour_usd=_num(row.get("Price")),
        spot_price_per_hour_usd=_num(row.get("SpotPrice")),
        hints=hints,
        ref=ref,
    )


def _add(a: float | None, b: float | None) -> float | None:
    return a + b if a is not None and b is not None else None


def _gcp_rows(rows: list[dict[str, str]], path: str) -> list[RawOffer]:
    hosts: dict[str, list[tuple[int, dict[str, str]]]] = defaultdict(list)
    accelerators: list[tuple[int, dict[str, str]]] = []
    out: list[RawOffer] = []
    for line, row in enumerate(rows, start=2):
        if row.get("InstanceType"):
            hosts[row.get("AvailabilityZone", "")].append((line, row))
        else:
            accelerators.append((line, row))
    paired: set[int] = set()
    for line, acc in accelerators:
        ref = f"{path}:{line}"
        name = acc.get("AcceleratorName", "")
        count_f = _num(acc.get("AcceleratorCount"))
        zone_hosts = hosts.get(acc.get("AvailabilityZone", ""), [])
        if not name or name.lower().startswith("tpu") or count_f is None:
            out.append(_row_to_raw("gcp", acc, ref))  # dropped as tpu / no_gpu downstream
            continue
        count = int(count_f)
        chosen: list[tuple[int, dict[str, str]]]
        if name in GCP_GPU_HOSTS:
            wanted = GCP_GPU_HOSTS[name].get(count, ())
            chosen = [(ln, h) for ln, h in zone_hosts if h["InstanceType"] in wanted]
        else:
            table = GCP_N1_VCPUS.get(name, GCP_N1_VCPUS["DEFAULT"])
            cpus = table.get(count)
            candidates = [
                (ln, h)
                for ln, h in zone_hosts
                if cpus is not None
                and h["InstanceType"].startswith(GCP_N1_PREFIXES)
                and (_num(h.get("vCPUs")) or 0) >= cpus
                and (_num(h.get("MemoryGiB")) or 0) >= cpus * GCP_N1_RAM_GIB_PER_VCPU
                and _num(h.get("Price")) is not None
            ]
            candidates.sort(key=lambda lh: (_num(lh[1].get("Price")) or 0.0, lh[1]["InstanceType"]))
            chosen = candidates[:1]
        if not chosen:
            out.append(
                RawOffer(
                    provider="gcp",
                    instance_type="",
                    region=acc.get("Region", ""),
                    zone=acc.get("AvailabilityZone") or None,
                    accelerator_name=name,
                    drop_reason="gcp_gpu_without_host",
                    ref=ref,
                )
            )
            continue
        _info, size, _total = parse_gpu_info(acc.get("GpuInfo"))
        for host_line, host in chosen:
            paired.add(host_line)
            host_type = host["InstanceType"]
            out.append(
                RawOffer(
                    provider="gcp",
                    instance_type=(
                        host_type
                        if name in GCP_GPU_HOSTS
                        else f"{host_type}+{name}:{count}"  # N1 + attached GPUs
                    ),
                    region=acc.get("Region", ""),
                    zone=acc.get("AvailabilityZone") or None,
                    accelerator_name=name,
                    accelerator_count=count_f,
                    gpu_memory_mib=size,
                    vcpus=_num(host.get("vCPUs")),
                    ram_gib=_num(host.get("MemoryGiB")),
                    price_per_hour_usd=_add(_num(host.get("Price")), _num(acc.get("Price"))),
                    spot_price_per_hour_usd=_add(
                        _num(host.get("SpotPrice")), _num(acc.get("SpotPrice"))
                    ),
                    hints=(host_type,),
                    ref=f"{ref}+{host_line}",
                )
            )
    for zone_hosts in hosts.values():
        for line, host in zone_hosts:
            if line in paired and not host["InstanceType"].startswith(GCP_N1_PREFIXES):
                continue
            if host["InstanceType"].startswith(GCP_GPU_FAMILY_PREFIXES) and line not in paired:
                out.append(
                    RawOffer(
                        provider="gcp",
                        instance_type=host["InstanceType"],
                        region=host.get("Region", ""),
                        zone=host.get("AvailabilityZone") or None,
                        drop_reason="gcp_host_without_gpu_price",
                        ref=f"{path}:{line}",
                    )
                )
            else:
                out.append(_row_to_raw("gcp", host, f"{path}:{line}"))  # CPU row: no_gpu
    return out


def parse_vms_csv(text: str, cloud: str, *, path: str | None = None) -> list[RawOffer]:
    """Parse one cloud's ``vms.csv`` text into raw rows.

    Args:
        text: the file's content.
        cloud: the provider id (the folder name: ``aws``, ``gcp``, ``lambda``...).
        path: name used in row references (default ``<cloud>/vms.csv``).

    Returns:
        One :class:`RawOffer` per row (GCP: per combined host + accelerator pairing, plus one
        per unusable row).

    Raises:
        SkyPilotFormatError: not a v7 vms.csv (header columns missing, malformed CSV).
    """
    ref_path = path or f"{cloud}/vms.csv"
    rows = _read(text)
    if cloud == "gcp":
        return _gcp_rows(rows, ref_path)
    return [_row_to_raw(cloud, row, f"{ref_path}:{i}") for i, row in enumerate(rows, start=2)]
