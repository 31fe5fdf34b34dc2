"""Compare cache encodings of a synthetic 50,000-offer catalog (seeded): size, decode, Redis load.

Usage::

    python bench/bench_cache_encodings.py [--offers 50000] [--seed 7] [--redis URL]

Every option must give back offers equal to the input (checked). Options:

* ``map``: ``msgspec.msgpack`` of the offers as structs (a map per offer, field names
  repeated) - the layout used before ``catalog/codec.py``;
* ``array_like``: rows of an ``array_like=True`` mirror struct, converted to ``Offer`` with
  ``msgspec.convert(from_attributes=True)`` (``Offer`` itself cannot be ``array_like``: its
  JSON form is the API);
* ``columns``: one column per per-row field, each dictionary-encoded (distinct values + indexes),
  the rest in per-group templates, offers rebuilt with ``msgspec.structs.replace``;
* ``grouped``: ``gpu_advisor.catalog.codec`` (shapes + names + locations + price columns).

Figures are the minimum and median of 9 runs in milliseconds; Redis load = GET + decode.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "service"))

import msgspec

from bench_catalog import synthetic
from gpu_advisor.catalog.cache import RedisStore
from gpu_advisor.catalog.codec import CachedCatalog, decode_catalog, encode_catalog
from gpu_advisor.catalog.sources import Provenance
from gpu_advisor.core.normalize import SourceStats
from gpu_advisor.core.offers import Network, Offer

FIELDS = Offer.__struct_fields__


class _Row(msgspec.Struct, array_like=True, gc=False):
    provider: str
    instance_type: str
    region: str
    zone: str | None
    zones: tuple[str, ...]
    gpu: str
    gpu_known: bool
    gpu_count: int
    gpu_memory_bytes: int
    gpu_memory_exposed_bytes: int
    vcpus: float
    ram_bytes: int
    price_per_hour_usd: float
    spot_price_per_hour_usd: float | None
    interconnect: str
    network: Network | None
    billing_increment_seconds: int
    billing_minimum_seconds: int
    source: str
    fetched_at: str


def _map(offers: tuple[Offer, ...]) -> tuple[bytes, Callable[[bytes], Any]]:
    dec = msgspec.msgpack.Decoder(tuple[Offer, ...])
    return msgspec.msgpack.encode(offers), dec.decode


def _array_like(offers: tuple[Offer, ...]) -> tuple[bytes, Callable[[bytes], Any]]:
    rows = [_Row(*(getattr(o, f) for f in FIELDS)) for o in offers]
    dec = msgspec.msgpack.Decoder(list[_Row])

    def load(blob: bytes) -> tuple[Offer, ...]:
        return tuple(msgspec.convert(dec.decode(blob), list[Offer], from_attributes=True))

    return msgspec.msgpack.encode(rows), load


_PER_ROW = ("instance_type", "region", "zone", "zones", "gpu_count", "vcpus", "ram_bytes")


class _Columns(msgspec.Struct, array_like=True):
    templates: list[Offer]
    template: list[int]
    dicts: list[tuple[list[Any], list[int]]]
    price: list[float]
    spot: list[float | None]


def _columns(offers: tuple[Offer, ...]) -> tuple[bytes, Callable[[bytes], Any]]:
    blank = {
        "instance_type": "",
        "region": "",
        "zone": None,
        "zones": (),
        "gpu_count": 1,
        "vcpus": 0.0,
        "ram_bytes": 0,
        "price_per_hour_usd": 0.0,
        "spot_price_per_hour_usd": None,
    }
    templates: dict[Offer, int] = {}
    template = [
        templates.setdefault(msgspec.structs.replace(o, **blank), len(templates)) for o in offers
    ]
    dicts: list[tuple[list[Any], list[int]]] = []
    for f in _PER_ROW:
        seen: dict[Any, int] = {}
        idx = [seen.setdefault(getattr(o, f), len(seen)) for o in offers]
        dicts.append((list(seen), idx))
    wire = _Columns(
        templates=list(templates),
        template=template,
        dicts=dicts,
        price=[o.price_per_hour_usd for o in offers],
        spot=[o.spot_price_per_hour_usd for o in offers],
    )
    dec = msgspec.msgpack.Decoder(_Columns)
    replace = msgspec.structs.replace

    def load(blob: bytes) -> tuple[Offer, ...]:
        w = dec.decode(blob)
        w.dicts[3] = ([tuple(v) for v in w.dicts[3][0]], w.dicts[3][1])  # zones: lists
        cols = [map(vals.__getitem__, idx) for vals, idx in w.dicts]
        return tuple(
            replace(
                t,
                instance_type=it,
                region=r,
                zone=z,
                zones=zs,
                gpu_count=c,
                vcpus=v,
                ram_bytes=ram,
                price_per_hour_usd=p,
                spot_price_per_hour_usd=s,
            )
            for t, it, r, z, zs, c, v, ram, p, s in zip(
                map(w.templates.__getitem__, w.template), *cols, w.price, w.spot, strict=True
            )
        )

    return msgspec.msgpack.encode(wire), load


def _grouped(offers: tuple[Offer, ...]) -> tuple[bytes, Callable[[bytes], Any]]:
    entry = CachedCatalog(
        version="bench",
        stored_at=0.0,
        offers=offers,
        stats=SourceStats(),
        provenance=Provenance(source="bench", fetched_at=""),
    )
    return encode_catalog(entry), lambda blob: decode_catalog(blob).offers


OPTIONS = {"map": _map, "array_like": _array_like, "columns": _columns, "grouped": _grouped}


def _ms(samples: list[float]) -> str:
    return f"min {min(samples):6.1f}  median {statistics.median(samples):6.1f}"


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--offers", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/15")
    args = parser.parse_args()
    offers = synthetic(args.offers, args.seed)
    store = RedisStore(args.redis, socket_timeout_seconds=5)
    key = "gpu-advisor:bench:encodings"
    print(f"offers: {len(offers)}  seed: {args.seed}  (ms: min / median of 9)")
    for name, build in OPTIONS.items():
        blob, load = build(offers)
        if tuple(load(blob)) != offers:
            raise SystemExit(f"{name}: decoded offers differ from the input")
        decode: list[float] = []
        for _ in range(9):
            t0 = time.perf_counter()
            result = load(blob)
            decode.append((time.perf_counter() - t0) * 1000)
            del result  # freeing is not part of loading
        await store.set(key, blob, 300)
        redis: list[float] = []
        for _ in range(9):
            t0 = time.perf_counter()
            raw = await store.get(key)
            result = load(raw or b"")
            redis.append((time.perf_counter() - t0) * 1000)
            del result
        print(
            f"{name:10s} {len(blob) / 2**20:5.1f} MiB  decode {_ms(decode)}  "
            f"redis load {_ms(redis)}"
        )
    await store.delete(key)
    await store.close()


if __name__ == "__main__":
    asyncio.run(main())
