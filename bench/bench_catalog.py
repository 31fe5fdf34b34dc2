"""Catalog load and query timings on a synthetic 50,000-offer catalog (seeded).

Usage::

    python bench/bench_catalog.py [--offers 50000] [--seed 7] [--redis redis://127.0.0.1:6379/15]

Measures (median of repeats):
* loading the cached catalog from Redis: GET + :func:`gpu_advisor.catalog.codec.decode_catalog`
  (the cost a replica pays once per catalog version; requests never decode);
* building the query index (once per version);
* ``GET /v1/offers`` queries (the core query, without HTTP): a filtered one (gpu + min_gpus +
  spot + max price), memory only, provider + region, others.
Targets (issue 4): load < 50 ms, filtered query < 5 ms on the 2-core dev machine.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "service"))

from gpu_advisor.catalog.cache import RedisStore
from gpu_advisor.catalog.codec import CachedCatalog, decode_catalog, encode_catalog
from gpu_advisor.catalog.service import content_version
from gpu_advisor.catalog.sources import Provenance
from gpu_advisor.core.normalize import SourceStats
from gpu_advisor.core.offer_query import OfferIndex, OfferQuery, query_offers
from gpu_advisor.core.offers import Offer

GPUS = [
    "H100-SXM-80GB",
    "A100-SXM-80GB",
    "L4-24GB",
    "L40S-48GB",
    "H200-SXM-141GB",
    "A10G-24GB",
    "RTX4090-24GB",
    "T4-16GB",
    "B200-180GB",
    "MI300X-192GB",
]
PROVIDERS = ["aws", "gcp", "lambda", "runpod", "vast", "nebius", "cudo", "shadeform"]


def synthetic(n: int, seed: int) -> tuple[Offer, ...]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        count = rng.choice([1, 2, 4, 8])
        price = round(rng.uniform(0.2, 5.0) * count, 4)
        out.append(
            Offer(
                provider=rng.choice(PROVIDERS),
                instance_type=f"inst-{i}",
                region=f"region-{rng.randrange(40)}",
                zones=(f"z{rng.randrange(3)}",),
                gpu=rng.choice(GPUS),
                gpu_count=count,
                gpu_memory_bytes=rng.choice([24, 48, 80, 141]) * 2**30,
                gpu_memory_exposed_bytes=rng.choice([24, 48, 80, 141]) * 2**30,
                vcpus=float(8 * count),
                ram_bytes=64 * count * 2**30,
                price_per_hour_usd=price,
                spot_price_per_hour_usd=round(price * 0.4, 4) if rng.random() < 0.5 else None,
                interconnect="nvswitch" if count == 8 else "pcie",
                billing_increment_seconds=1,
                billing_minimum_seconds=60,
                source="bench",
                fetched_at="2026-11-30T00:00:00Z",
            )
        )
    return tuple(out)


def timed(fn, repeats: int) -> float:  # type: ignore[no-untyped-def]
    """Median milliseconds of ``fn()``; each result is freed after its clock stops (freeing a
    catalog is not part of loading it)."""
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        samples.append((time.perf_counter() - t0) * 1000)
        del result
    return statistics.median(samples)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--offers", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/15")
    args = parser.parse_args()
    offers = synthetic(args.offers, args.seed)
    entry = CachedCatalog(
        version=content_version(offers),
        stored_at=time.time(),
        offers=offers,
        stats=SourceStats(),
        provenance=Provenance(source="bench", fetched_at=""),
    )
    blob = encode_catalog(entry)
    store = RedisStore(args.redis, socket_timeout_seconds=5)
    key = "gpu-advisor:bench:catalog"
    await store.set(key, blob, 300)
    samples = []
    for _ in range(9):
        t0 = time.perf_counter()
        raw = await store.get(key)
        assert raw is not None
        loaded = decode_catalog(raw)
        samples.append((time.perf_counter() - t0) * 1000)
        if loaded.offers != offers:
            raise SystemExit("decoded offers differ from the input")
        del loaded
    await store.delete(key)
    await store.close()
    decode_ms = timed(lambda: decode_catalog(blob), 9)
    index_ms = timed(lambda: OfferIndex(offers), 3)
    index = OfferIndex(offers)
    queries = {
        "filtered (gpu+min_gpus+spot+max price)": OfferQuery(
            gpu_ids=("H100-SXM-80GB",),
            min_gpus=4,
            spot=True,
            max_price_per_hour_usd=20.0,
            limit=100,
        ),
        "memory only (>= 80 GiB)": OfferQuery(min_gpu_memory_gib=80, limit=100),
        "provider+region": OfferQuery(provider="aws", region="region-3", limit=100),
        "max price only, sort -gpu_memory": OfferQuery(
            max_price_per_hour_usd=4.0, sort="-gpu_memory", limit=100
        ),
        "unfiltered, offset 40,000, sort price_per_gpu": OfferQuery(
            sort="price_per_gpu", offset=40_000, limit=1000
        ),
    }
    first_sort_ms = timed(lambda: OfferIndex(offers).order("-gpu_memory"), 3) - index_ms
    print(f"offers: {len(offers)}  blob: {len(blob) / 2**20:.1f} MiB  seed: {args.seed}")
    print(f"redis GET + decode (load):  {statistics.median(samples):.1f} ms (median of 9)")
    print(f"decode only:                {decode_ms:.1f} ms (median of 9)")
    print(f"index build (once/version): {index_ms:.1f} ms")
    print(f"a non-price sort order, on first use: about {max(first_sort_ms, 0.0):.0f} ms")
    for name, q in queries.items():
        index.order(q.sort)  # built on first use; measured above
        ms = timed(lambda q=q: query_offers(index, q), 50)  # type: ignore[misc]
        total, _ = query_offers(index, q)
        print(f"query {name}: {ms:.2f} ms (median of 50; {total} match)")


if __name__ == "__main__":
    asyncio.run(main())
