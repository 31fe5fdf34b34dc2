"""Filter, sort and page normalised offers (pure; the ``GET /v1/offers`` query).

An :class:`OfferIndex` is built once per catalog version (offers pre-sorted per sort key,
positions by GPU id and by provider), so a filtered query touches only the offers of the
requested GPU/provider: 50,000 offers answer a filtered query in about a millisecond
(``bench/bench_catalog.py``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Literal

from msgspec import Struct

from gpu_advisor.core.offers import Offer

GIB = 2**30
OfferSort = Literal[
    "price", "-price", "price_per_gpu", "-price_per_gpu", "gpu_memory", "-gpu_memory", "gpus"
]


class OfferQuery(Struct, frozen=True, kw_only=True):
    """Filters (all optional, combined with AND) and paging.

    Attributes:
        gpu_ids: canonical GPU ids to keep (an alias already resolved by the caller).
        min_gpu_memory_gib: marketed per-GPU memory at least this (GiB).
        min_gpus / max_gpus: GPUs per instance.
        provider / region: exact, case-insensitive.
        spot: True keeps only offers with a spot price.
        max_price_per_hour_usd: on-demand price per instance-hour at most this (spot price
            when ``spot`` is True).
        sort: key, ``-`` for descending; ties by provider, region, instance type.
        limit / offset: paging.
    """

    gpu_ids: tuple[str, ...] | None = None
    min_gpu_memory_gib: float | None = None
    min_gpus: int | None = None
    max_gpus: int | None = None
    provider: str | None = None
    region: str | None = None
    spot: bool | None = None
    max_price_per_hour_usd: float | None = None
    sort: OfferSort = "price"
    limit: int = 100
    offset: int = 0


def _key(sort: str, offer: Offer) -> tuple[float, str, str, str]:
    field = sort.lstrip("-")
    value: float
    if field == "price":
        value = offer.price_per_hour_usd
    elif field == "price_per_gpu":
        value = offer.price_per_hour_usd / offer.gpu_count
    elif field == "gpu_memory":
        value = float(offer.gpu_memory_bytes)
    else:
        value = float(offer.gpu_count)
    if sort.startswith("-"):
        value = -value
    return (value, offer.provider, offer.region, offer.instance_type)


class OfferIndex:
    """Positions of offers by sort order, GPU id and provider (built once per catalog)."""

    def __init__(self, offers: Sequence[Offer]) -> None:
        self.offers = tuple(offers)
        self.rank: dict[str, list[int]] = {}
        for sort in ("price", "-price", "price_per_gpu", "-price_per_gpu"):
            order = sorted(range(len(self.offers)), key=lambda i: _key(sort, self.offers[i]))
            self.rank[sort] = order
        self.by_gpu: dict[str, list[int]] = defaultdict(list)
        self.by_provider: dict[str, list[int]] = defaultdict(list)
        for i, offer in enumerate(self.offers):
            self.by_gpu[offer.gpu.upper()].append(i)
            self.by_provider[offer.provider.lower()].append(i)

    def gpu_ids(self) -> frozenset[str]:
        return frozenset(self.by_gpu)


def _matches(o: Offer, q: OfferQuery) -> bool:
    if q.min_gpus is not None and o.gpu_count < q.min_gpus:
        return False
    if q.max_gpus is not None and o.gpu_count > q.max_gpus:
        return False
    if q.min_gpu_memory_gib is not None and o.gpu_memory_bytes < q.min_gpu_memory_gib * GIB:
        return False
    if q.provider is not None and o.provider.lower() != q.provider.lower():
        return False
    if q.region is not None and o.region.lower() != q.region.lower():
        return False
    if q.spot and o.spot_price_per_hour_usd is None:
        return False
    if q.max_price_per_hour_usd is not None:
        price = o.spot_price_per_hour_usd if q.spot else o.price_per_hour_usd
        if price is None or price > q.max_price_per_hour_usd:
            return False
    return True


def query_offers(index: OfferIndex, q: OfferQuery) -> tuple[int, list[Offer]]:
    """Apply a query: (total matching, the requested page in sort order)."""
    candidates: list[int] | None = None
    if q.gpu_ids is not None:
        candidates = sorted(i for g in q.gpu_ids for i in index.by_gpu.get(g.upper(), ()))
    if q.provider is not None:
        by_provider = index.by_provider.get(q.provider.lower(), [])
        if candidates is None or len(by_provider) < len(candidates):
            candidates = by_provider
    offers = index.offers
    if q.sort in index.rank:
        if candidates is None:
            ordered: Sequence[int] = index.rank[q.sort]
        else:
            position = index.rank[q.sort]
            if len(candidates) * 8 < len(offers):
                ordered = sorted(candidates, key=lambda i: _key(q.sort, offers[i]))
            else:
                wanted = set(candidates)
                ordered = [i for i in position if i in wanted]
    else:
        pool = range(len(offers)) if candidates is None else candidates
        ordered = sorted(pool, key=lambda i: _key(q.sort, offers[i]))
    matched = [offers[i] for i in ordered if _matches(offers[i], q)]
    return len(matched), matched[q.offset : q.offset + q.limit]
