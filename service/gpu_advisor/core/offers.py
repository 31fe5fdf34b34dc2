"""Normalised provider offers (DESIGN "Pricing catalog and cache"). Field names are API."""

from __future__ import annotations

from typing import Literal

from msgspec import Struct

Interconnect = Literal["nvlink", "nvswitch", "pcie", "infinity-fabric", "roce", "none", "unknown"]
"""GPU-to-GPU link inside a node: NVIDIA NVLink (bridged pairs or HGX boards) or NVSwitch, AMD
Infinity Fabric, Intel Gaudi's integrated RoCE ports (``roce``), PCIe only, none (one GPU)."""
Fabric = Literal["infiniband", "efa", "roce", "ethernet"]


class Network(Struct, frozen=True, kw_only=True, gc=False):
    """The cluster network between nodes of an offer.

    Attributes:
        fabric: ``infiniband`` | ``efa`` | ``roce`` | ``ethernet``.
        gbit_per_s: aggregate per-node bandwidth in Gbit/s (10**9 bit/s).
        cluster_grade: True for fabrics multi-node training can use (InfiniBand, EFA, RoCE).
    """

    fabric: Fabric
    gbit_per_s: float
    cluster_grade: bool = True


class Offer(Struct, frozen=True, kw_only=True, gc=False):
    """One instance type in one region of one provider, normalised (``gc=False``: offers hold
    no reference cycles, and skipping GC tracking cuts catalog decode time by about a third,
    msgspec docs "perf-tips").

    Prices are USD per hour per instance (``price_per_hour_usd`` on-demand,
    ``spot_price_per_hour_usd`` or None). Memory is per GPU, in bytes.

    Rows of one instance type in several zones of a region are collapsed into one offer:
    ``zones`` lists them, ``zone`` is set only when there is exactly one, and the prices are
    the cheapest zone's (on-demand and spot taken separately). ``gpu_known`` is False for a
    GPU that is not in the GPU table (kept, never silently dropped; ``gpu`` is then an id
    built from the source's name and memory).
    """

    provider: str
    instance_type: str
    region: str
    zone: str | None = None
    zones: tuple[str, ...] = ()
    gpu: str
    gpu_known: bool = True
    gpu_count: int
    gpu_memory_bytes: int
    gpu_memory_exposed_bytes: int
    vcpus: float
    ram_bytes: int
    price_per_hour_usd: float
    spot_price_per_hour_usd: float | None = None
    interconnect: Interconnect = "unknown"
    network: Network | None = None
    billing_increment_seconds: int = 1
    billing_minimum_seconds: int = 0
    source: str
    fetched_at: str

    @property
    def price_per_gpu_hour_usd(self) -> float:
        return self.price_per_hour_usd / self.gpu_count


class ProviderInfo(Struct, frozen=True, kw_only=True):
    """Billing and risk facts about one provider, as data with its source.

    Attributes:
        name: provider id as in offers (``aws``, ``gcp``, ``lambda``...).
        billing_increment_seconds: usage is rounded up to a multiple of this.
        billing_minimum_seconds: the least a launch is billed.
        spot_interruptions_per_hour: expected spot/preemption interruptions per instance-hour
            (None where the provider has no spot market).
        storage_price_per_gb_month_usd: object/disk storage price used for checkpoints, if known.
        source: where the numbers come from (pricing page URL and the date read).
    """

    name: str
    billing_increment_seconds: int
    billing_minimum_seconds: int = 0
    spot_interruptions_per_hour: float | None = None
    storage_price_per_gb_month_usd: float | None = None
    source: str = ""
