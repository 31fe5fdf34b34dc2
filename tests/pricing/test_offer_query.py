"""The indexed offer query against a plain filter-and-sort written out here (seeded)."""

from __future__ import annotations

import random
from typing import get_args

import pytest

from gpu_advisor.core.offer_query import OfferIndex, OfferQuery, OfferSort, query_offers
from gpu_advisor.core.offers import Offer

GIB = 2**30
SEED = 20261130
SORTS: list[OfferSort] = list(get_args(OfferSort))  # every sort the API accepts
GPUS = ["H100-SXM-80GB", "A100-SXM-80GB", "L4-24GB", "T4-16GB", "MI300X-192GB"]
MEMORY_GIB = {"H100-SXM-80GB": 80, "A100-SXM-80GB": 80, "L4-24GB": 24, "T4-16GB": 16}


def _offers(n: int, rng: random.Random) -> list[Offer]:
    out = []
    for i in range(n):
        gpu = rng.choice(GPUS)
        count = rng.choice([1, 2, 4, 8])
        # Prices from a short list so that ties (broken by provider, region, type) are common.
        price = rng.choice([0.5, 1.0, 1.25, 2.0, 3.5, 8.0]) * count
        out.append(
            Offer(
                provider=rng.choice(["aws", "GCP", "lambda", "vast"]),
                instance_type=f"type-{rng.randrange(n // 3 + 1)}",
                # Many rare regions: their masks are built on demand, not kept.
                region=rng.choice(["us-east-1", "EU-west-1"]) if i % 3 else f"r{i}",
                gpu=gpu,
                gpu_count=count,
                gpu_memory_bytes=MEMORY_GIB.get(gpu, 192) * GIB,
                gpu_memory_exposed_bytes=MEMORY_GIB.get(gpu, 192) * GIB,
                vcpus=8.0 * count,
                ram_bytes=32 * count * GIB,
                price_per_hour_usd=price,
                spot_price_per_hour_usd=(
                    rng.choice([0.3, 0.4, 0.6]) * price if rng.random() < 0.4 else None
                ),
                source="test",
                fetched_at="2026-11-30T00:00:00Z",
            )
        )
    return out


def _plain(offers: list[Offer], q: OfferQuery) -> tuple[int, list[Offer]]:
    """The query's meaning, one offer at a time (OfferQuery's docstring)."""
    kept = []
    for o in offers:
        if q.gpu_ids is not None and o.gpu.upper() not in {g.upper() for g in q.gpu_ids}:
            continue
        if q.provider is not None and o.provider.lower() != q.provider.lower():
            continue
        if q.region is not None and o.region.lower() != q.region.lower():
            continue
        if q.min_gpus is not None and o.gpu_count < q.min_gpus:
            continue
        if q.max_gpus is not None and o.gpu_count > q.max_gpus:
            continue
        if q.min_gpu_memory_gib is not None and o.gpu_memory_bytes < q.min_gpu_memory_gib * GIB:
            continue
        if q.spot and o.spot_price_per_hour_usd is None:
            continue
        if q.max_price_per_hour_usd is not None:
            price = o.spot_price_per_hour_usd if q.spot else o.price_per_hour_usd
            if price is None or price > q.max_price_per_hour_usd:
                continue
        kept.append(o)

    def key(o: Offer) -> tuple[float, float, str, str, str]:
        field = q.sort.lstrip("-")
        value = {
            "price": o.price_per_hour_usd,
            "price_per_gpu": o.price_per_hour_usd / o.gpu_count,
            "gpu_memory": float(o.gpu_memory_bytes),
            "gpus": float(o.gpu_count),
        }[field]
        # ties by price (the cheapest of equal GPU counts first), then provider, region, type
        signed = -value if q.sort.startswith("-") else value
        return (signed, o.price_per_hour_usd, o.provider, o.region, o.instance_type)

    kept.sort(key=key)
    return len(kept), kept[q.offset : q.offset + q.limit]


def _random_query(rng: random.Random, offers: list[Offer]) -> OfferQuery:
    def maybe(value: object) -> object:
        return value if rng.random() < 0.35 else None

    spot = maybe(rng.choice([True, False]))
    return OfferQuery(
        gpu_ids=maybe(tuple(rng.sample([*GPUS, "h100-sxm-80gb", "B200-180GB"], 2))),  # type: ignore[arg-type]
        provider=maybe(rng.choice(["aws", "gcp", "Lambda", "nowhere"])),  # type: ignore[arg-type]
        region=maybe(rng.choice(["us-east-1", "eu-west-1", rng.choice(offers).region])),  # type: ignore[arg-type]
        min_gpus=maybe(rng.choice([1, 2, 3, 8])),  # type: ignore[arg-type]
        max_gpus=maybe(rng.choice([1, 4, 8])),  # type: ignore[arg-type]
        min_gpu_memory_gib=maybe(rng.choice([16, 24, 24.5, 80, 200])),  # type: ignore[arg-type]
        spot=spot,  # type: ignore[arg-type]
        max_price_per_hour_usd=maybe(rng.choice([0.5, 2.0, 4.0, 10.0, 100.0])),  # type: ignore[arg-type]
        sort=rng.choice(SORTS),
        limit=rng.choice([1, 5, 100]),
        offset=rng.choice([0, 0, 3, 50]),
    )


@pytest.mark.parametrize("n", [0, 1, 7, 300, 3000])
def test_indexed_query_equals_plain_filter_and_sort(n: int) -> None:
    rng = random.Random(SEED + n)
    offers = _offers(n, rng)
    index = OfferIndex(offers)
    for trial in range(300):
        q = _random_query(rng, offers) if offers else OfferQuery()
        got = query_offers(index, q)
        assert got == _plain(offers, q), f"seed {SEED + n}, trial {trial}: {q}"


def test_unfiltered_query_in_every_sort_order() -> None:
    rng = random.Random(SEED)
    offers = _offers(2000, rng)
    index = OfferIndex(offers)
    for sort in SORTS:
        for offset in (0, 1000, 1990):
            q = OfferQuery(sort=sort, limit=50, offset=offset)
            assert query_offers(index, q) == _plain(offers, q), (sort, offset)


def test_the_same_offer_twice_is_counted_twice() -> None:
    (offer,) = _offers(1, random.Random(SEED))
    index = OfferIndex([offer, offer])
    total, page = query_offers(index, OfferQuery())
    assert total == 2
    assert page == [offer, offer]


def test_gpu_ids_present_upper_case() -> None:
    offers = _offers(50, random.Random(SEED))
    assert OfferIndex(offers).gpu_ids() == {o.gpu.upper() for o in offers}
