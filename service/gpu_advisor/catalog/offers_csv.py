"""Normalised offers <-> CSV (the bundled snapshot's format; one offer per line).

Columns are the :class:`~gpu_advisor.core.offers.Offer` fields; ``zones`` is ``;``-joined and
``network`` is spread over ``network_fabric``, ``network_gbit_per_s`` and
``network_cluster_grade``. ``origin`` names the row's upstream file (provenance).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from typing import get_args

from gpu_advisor.core.offers import Fabric, Interconnect, Network, Offer

COLUMNS = (
    "provider",
    "instance_type",
    "region",
    "zone",
    "zones",
    "gpu",
    "gpu_known",
    "gpu_count",
    "gpu_memory_bytes",
    "gpu_memory_exposed_bytes",
    "vcpus",
    "ram_bytes",
    "price_per_hour_usd",
    "spot_price_per_hour_usd",
    "interconnect",
    "network_fabric",
    "network_gbit_per_s",
    "network_cluster_grade",
    "billing_increment_seconds",
    "billing_minimum_seconds",
    "source",
    "fetched_at",
)
_INTERCONNECTS = frozenset(get_args(Interconnect))
_FABRICS = frozenset(get_args(Fabric))


def _fmt(value: float) -> str:
    return repr(round(value, 6)) if value != int(value) else str(int(value))


def encode_offers_csv(offers: Iterable[Offer]) -> str:
    """Offers -> CSV text (header first, ``\\n`` line ends)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(COLUMNS)
    for o in offers:
        net = o.network
        writer.writerow(
            [
                o.provider,
                o.instance_type,
                o.region,
                o.zone or "",
                ";".join(o.zones),
                o.gpu,
                "yes" if o.gpu_known else "no",
                o.gpu_count,
                o.gpu_memory_bytes,
                o.gpu_memory_exposed_bytes,
                _fmt(o.vcpus),
                o.ram_bytes,
                _fmt(o.price_per_hour_usd),
                "" if o.spot_price_per_hour_usd is None else _fmt(o.spot_price_per_hour_usd),
                o.interconnect,
                net.fabric if net else "",
                _fmt(net.gbit_per_s) if net else "",
                ("yes" if net.cluster_grade else "no") if net else "",
                o.billing_increment_seconds,
                o.billing_minimum_seconds,
                o.source,
                o.fetched_at,
            ]
        )
    return buf.getvalue()


class OffersCsvError(ValueError):
    """A snapshot/table CSV row that does not decode (names the line)."""


def decode_offers_csv(text: str, *, source: str | None = None) -> tuple[Offer, ...]:
    """CSV text (as written by :func:`encode_offers_csv`) -> offers.

    Args:
        text: the file's content.
        source: when given, replaces each row's ``source`` (e.g. ``bundled``).

    Raises:
        OffersCsvError: a missing column or a bad value, naming the line.
    """
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or ())]
    if missing:
        raise OffersCsvError(f"offers CSV lacks columns {missing}")
    out: list[Offer] = []
    for row in reader:
        try:
            interconnect = row["interconnect"]
            fabric = row["network_fabric"]
            if interconnect not in _INTERCONNECTS or (fabric and fabric not in _FABRICS):
                raise ValueError("unknown interconnect or fabric")
            network = (
                Network(
                    fabric=fabric,  # type: ignore[arg-type]
                    gbit_per_s=float(row["network_gbit_per_s"]),
                    cluster_grade=row["network_cluster_grade"] == "yes",
                )
                if fabric
                else None
            )
            spot = row["spot_price_per_hour_usd"]
            out.append(
                Offer(
                    provider=row["provider"],
                    instance_type=row["instance_type"],
                    region=row["region"],
                    zone=row["zone"] or None,
                    zones=tuple(z for z in row["zones"].split(";") if z),
                    gpu=row["gpu"],
                    gpu_known=row["gpu_known"] == "yes",
                    gpu_count=int(row["gpu_count"]),
                    gpu_memory_bytes=int(row["gpu_memory_bytes"]),
                    gpu_memory_exposed_bytes=int(row["gpu_memory_exposed_bytes"]),
                    vcpus=float(row["vcpus"]),
                    ram_bytes=int(row["ram_bytes"]),
                    price_per_hour_usd=float(row["price_per_hour_usd"]),
                    spot_price_per_hour_usd=float(spot) if spot else None,
                    interconnect=interconnect,  # type: ignore[arg-type]
                    network=network,
                    billing_increment_seconds=int(row["billing_increment_seconds"]),
                    billing_minimum_seconds=int(row["billing_minimum_seconds"]),
                    source=source or row["source"],
                    fetched_at=row["fetched_at"],
                )
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise OffersCsvError(f"line {reader.line_num}: {exc}") from exc
    return tuple(out)
