"""The bytes a source's normalised catalog is cached as (Redis or the in-process store).

A catalog repeats most of each offer: one instance type appears in many regions with the same
GPU, memory, vCPUs, interconnect, billing, source and fetch time. Encoding every offer as a
msgpack map (field names included) made a 50,000-offer catalog 18.6 MiB, 45-55 ms to decode
and 70-90 ms to load from Redis. Here offers are stored grouped (3.3 MiB; about 30 ms to
decode, 35 ms to load - ``bench/bench_catalog.py`` on the 2-core dev machine):

* ``shapes``: the distinct offers with their per-row fields blanked (instance type, region,
  zones, prices) - each decoded once as an :class:`~gpu_advisor.core.offers.Offer`;
* ``names`` and ``locations``: the distinct instance types and (region, zone, zones) triples;
* per offer, five columns: shape index, name index, location index, on-demand price, spot
  price (msgpack arrays of ints and floats, cheap to decode).

Each offer is rebuilt with :func:`msgspec.structs.replace` on its shape (C, no validation:
the values were typed by the decoder), so repeated strings are shared, not re-allocated.
``bench/bench_cache_encodings.py`` compares this with map-encoded offers, ``array_like``
rows and per-column dictionaries; ``bench/bench_catalog.py`` measures the chosen one.

A value in another layout (an older replica's, or not ours) fails to decode with
:class:`CacheFormatError`, which the service treats as a cache miss.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta, Struct

from gpu_advisor.catalog.sources import Provenance
from gpu_advisor.core.normalize import SourceStats
from gpu_advisor.core.offers import Offer

__all__ = ["FORMAT", "CacheFormatError", "CachedCatalog", "decode_catalog", "encode_catalog"]

FORMAT: Literal[2] = 2
"""Layout number, the blob's first element (1 was a map per offer)."""

_Index = Annotated[int, Meta(ge=0)]
_Location = tuple[str, str | None, tuple[str, ...]]


class CachedCatalog(Struct, frozen=True, kw_only=True):
    """What is cached per source: version = content hash of the offers."""

    version: str
    stored_at: float
    offers: tuple[Offer, ...]
    stats: SourceStats
    provenance: Provenance


class CacheFormatError(ValueError):
    """The bytes are not a catalog in this layout (corrupt, foreign, or another FORMAT)."""


class _Wire(Struct, frozen=True, array_like=True):
    format: Literal[2]
    version: str
    stored_at: float
    stats: SourceStats
    provenance: Provenance
    shapes: list[Offer]
    names: list[str]
    locations: list[_Location]
    shape: list[_Index]
    name: list[_Index]
    location: list[_Index]
    price: list[float]
    spot: list[float | None]


_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(_Wire)


def _blank(offer: Offer) -> Offer:
    return msgspec.structs.replace(
        offer,
        instance_type="",
        region="",
        zone=None,
        zones=(),
        price_per_hour_usd=0.0,
        spot_price_per_hour_usd=None,
    )


def encode_catalog(entry: CachedCatalog) -> bytes:
    """A cached catalog -> bytes (deterministic for equal entries)."""
    shapes: dict[Offer, int] = {}
    names: dict[str, int] = {}
    locations: dict[_Location, int] = {}
    shape: list[int] = []
    name: list[int] = []
    location: list[int] = []
    for o in entry.offers:
        shape.append(shapes.setdefault(_blank(o), len(shapes)))
        name.append(names.setdefault(o.instance_type, len(names)))
        location.append(locations.setdefault((o.region, o.zone, o.zones), len(locations)))
    wire = _Wire(
        format=FORMAT,
        version=entry.version,
        stored_at=entry.stored_at,
        stats=entry.stats,
        provenance=entry.provenance,
        shapes=list(shapes),
        names=list(names),
        locations=list(locations),
        shape=shape,
        name=name,
        location=location,
        price=[o.price_per_hour_usd for o in entry.offers],
        spot=[o.spot_price_per_hour_usd for o in entry.offers],
    )
    return _ENCODER.encode(wire)


def decode_catalog(blob: bytes) -> CachedCatalog:
    """Bytes from :func:`encode_catalog` -> the cached catalog (offers in stored order).

    Raises:
        CacheFormatError: not this layout, an index out of range, or columns of unequal length.
    """
    try:
        wire = _DECODER.decode(blob)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise CacheFormatError(f"not a cached catalog (format {FORMAT}): {exc}") from exc
    replace = msgspec.structs.replace
    try:
        offers = [
            replace(
                shape,
                instance_type=name,
                region=region,
                zone=zone,
                zones=zones,
                price_per_hour_usd=price,
                spot_price_per_hour_usd=spot,
            )
            for shape, name, (region, zone, zones), price, spot in zip(
                map(wire.shapes.__getitem__, wire.shape),
                map(wire.names.__getitem__, wire.name),
                map(wire.locations.__getitem__, wire.location),
                wire.price,
                wire.spot,
                strict=True,
            )
        ]
    except (IndexError, ValueError) as exc:
        raise CacheFormatError(f"cached catalog is inconsistent: {exc}") from exc
    return CachedCatalog(
        version=wire.version,
        stored_at=wire.stored_at,
        offers=tuple(offers),
        stats=wire.stats,
        provenance=wire.provenance,
    )
