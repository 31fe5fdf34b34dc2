"""Normalised provider offers (DESIGN "Pricing catalog and cache"). Field names are API."""

from __future__ import annotations

from typing import Literal

from msgspec import Struct

Interconnect = Literal["nvlink", "nvswitch", "pcie", "infinity-fabric", "none", "unknown"]
Fabric = Literal["infiniband", "efa", "roce", "ethernet"]


class Network(Struct, frozen=True, kw_only=True):
    """The cluster network between nodes of an offer.

    Attributes:
        fabric: ``infiniband`` | ``efa`` | ``roce`` | ``ethernet``.
        gbit_per_s: aggregate per-node bandwidth in Gbit/s (10**9 bit/s).
        cluster_grade: True for fabrics multi-node training can use (InfiniBand, EFA, RoCE).
    """

    fabric: Fabric
    gbit_per_s: float
    cluster_grade: bool = True


class Offer(Struct, frozen=True, kw_only=True):
    """One instance type in one region of one provider, normalised.

    Prices are USD per hour per instance (``price_per_hour_usd`` on-demand,
    ``spot_price_per_hour_usd`` or None). Memory is per GPU, in bytes.
    """

    provider: str
    instance_type: str
    region: str
    zone: str | None = None
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
