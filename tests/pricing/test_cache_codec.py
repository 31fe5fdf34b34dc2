"""The cached-catalog layout (catalog/codec.py): exact round trips, and every kind of bad value
fails as CacheFormatError (which the service treats as a miss)."""

from __future__ import annotations

import msgspec
import pytest

from gpu_advisor.catalog.codec import (
    CachedCatalog,
    CacheFormatError,
    decode_catalog,
    encode_catalog,
)
from gpu_advisor.catalog.sources import BundledSource, Provenance
from gpu_advisor.core.normalize import SourceStats
from gpu_advisor.core.offers import Network, Offer

GIB = 2**30


def _offer(**kw: object) -> Offer:
    base: dict[str, object] = {
        "provider": "aws",
        "instance_type": "p5.48xlarge",
        "region": "us-east-1",
        "gpu": "H100-SXM-80GB",
        "gpu_count": 8,
        "gpu_memory_bytes": 80 * GIB,
        "gpu_memory_exposed_bytes": 81_559 * 2**20,
        "vcpus": 192.0,
        "ram_bytes": 2048 * GIB,
        "price_per_hour_usd": 55.04,
        "source": "skypilot",
        "fetched_at": "2026-11-30T00:00:00Z",
    }
    base.update(kw)
    return Offer(**base)  # type: ignore[arg-type]


def _entry(offers: tuple[Offer, ...]) -> CachedCatalog:
    return CachedCatalog(
        version="abc",
        stored_at=1_764_460_800.5,
        offers=offers,
        stats=SourceStats(rows_in=9, offers_out=len(offers), dropped={"no_gpu": 2}),
        provenance=Provenance(source="skypilot", fetched_at="2026-11-30T00:00:00Z"),
    )


def test_every_field_survives_in_order() -> None:
    efa = Network(fabric="efa", gbit_per_s=3200.0)
    offers = (
        _offer(zones=("us-east-1a", "us-east-1b"), spot_price_per_hour_usd=20.1, network=efa),
        _offer(region="us-west-2", zone="us-west-2c", zones=("us-west-2c",), network=efa),
        _offer(instance_type="g6.xlarge", gpu="L4-24GB", gpu_count=1, price_per_hour_usd=0.8),
        _offer(gpu="XYZ-1GB", gpu_known=False, interconnect="pcie", billing_minimum_seconds=60),
        _offer(),  # an exact duplicate of the first shape + location: still two offers
        _offer(),
    )
    entry = _entry(offers)
    assert decode_catalog(encode_catalog(entry)) == entry


def test_bundled_snapshot_round_trips() -> None:
    result = BundledSource().load()
    entry = _entry(result.offers)
    back = decode_catalog(encode_catalog(entry))
    assert back.offers == result.offers


def test_empty_catalog() -> None:
    assert decode_catalog(encode_catalog(_entry(()))) == _entry(())


def _wire(**changes: object) -> bytes:
    """A layout-2 value built by hand (the documented element order), with changes."""
    shape = msgspec.structs.replace(_offer(), instance_type="", region="", price_per_hour_usd=0.0)
    fields: dict[str, object] = {
        "format": 2,
        "version": "v",
        "stored_at": 0.0,
        "stats": SourceStats(),
        "provenance": Provenance(source="x", fetched_at=""),
        "shapes": [shape],
        "names": ["p5.48xlarge"],
        "locations": [("us-east-1", None, [])],
        "shape": [0],
        "name": [0],
        "location": [0],
        "price": [55.04],
        "spot": [None],
    }
    fields.update(changes)
    return msgspec.msgpack.encode(list(fields.values()))


def test_hand_built_value_decodes() -> None:
    (offer,) = decode_catalog(_wire()).offers
    assert offer == _offer()


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"format": 1}, "format"),
        ({"shape": [1]}, "inconsistent"),  # no shape 1
        ({"location": [-1]}, ">= 0"),  # negative index would wrap around
        ({"price": [1.0, 2.0]}, "inconsistent"),  # columns of unequal length
        ({"spot": "none"}, r"Expected `array`, got `str` - at `\$\[12\]`"),
    ],
)
def test_bad_values_are_format_errors(changes: dict[str, object], why: str) -> None:
    with pytest.raises(CacheFormatError, match=why):
        decode_catalog(_wire(**changes))


@pytest.mark.parametrize(
    "blob",
    [
        b"",
        b"\xc1",  # a msgpack byte that is never valid
        _wire()[:-3],  # truncated
        # layout 1: the whole CachedCatalog as a msgpack map (offers as maps)
        msgspec.msgpack.encode(_entry((_offer(),))),
    ],
)
def test_foreign_or_truncated_bytes_are_format_errors(blob: bytes) -> None:
    with pytest.raises(CacheFormatError):
        decode_catalog(blob)
