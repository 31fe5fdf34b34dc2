"""Catalog load and query timings on a synthetic 50,000-offer catalog (seeded).

Usage::

    python bench/bench_catalog.py [--offers 50000] [--seed 7] [--redis redis://127.0.0.1:6379/15]

Measures (median of repeats):
* msgpack decode of the cached catalog blob as read from Redis (the cost a replica pays once
  per catalog version; requests never decode);
* building the query index (once per version);
* a filtered ``GET /v1/offers`` query (gpu + min_gpus + spot + max price, first page).
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

import msgspec

from gpu_advisor.catalog.cache import RedisStore
from gpu_advisor.catalog.service import CachedCatalog, content_version
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
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1000)
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
    blob = msgspec.msgpack.encode(entry)
    store = RedisStore(args.redis, socket_timeout_seconds=5)
    key = "gpu-advisor:bench:catalog"
    await store.set(key, blob, 300)
    samples = []
    for _ in range(7):
        t0 = time.perf_counter()
        raw = await store.get(key)
        assert raw is not None
        msgspec.msgpack.decode(raw, type=CachedCatalog)
        samples.append((time.perf_counter() - t0) * 1000)
    await store.delete(key)
    await store.close()
    decoder = msgspec.msgpack.Decoder(CachedCatalog)
    decode_ms = timed(lambda: decoder.decode(blob), 7)
    index_ms = timed(lambda: OfferIndex(offers), 3)
    index = OfferIndex(offers)
    q = OfferQuery(
        gpu_ids=("H100-SXM-80GB",), min_gpus=4, spot=True, max_price_per_hour_usd=20.0, limit=100
    )
    query_ms = timed(lambda: query_offers(index, q), 50)
    q_all = OfferQuery(min_gpu_memory_gib=80, limit=100)
    query_all_ms = timed(lambda: query_offers(index, q_all), 20)
    print(f"offers: {len(offers)}  blob: {len(blob) / 2**20:.1f} MiB  seed: {args.seed}")
    print(f"redis GET + msgpack decode: {statistics.median(samples):.1f} ms (median of 7)")
    print(f"msgpack decode only:        {decode_ms:.1f} ms")
    print(f"index build (once/version): {index_ms:.1f} ms")
    print(f"filtered query (gpu+count+spot+price): {query_ms:.2f} ms")
    print(f"unindexed filter (memory >= 80 GiB over all offers): {query_all_ms:.2f} ms")


if __name__ == "__main__":
    asyncio.run(main())
