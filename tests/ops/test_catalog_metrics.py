"""The catalog reports loads, refresh failures and cache results to the Metrics object."""

from __future__ import annotations

import asyncio

from gpu_advisor.catalog.cache import MemoryStore, StoreError
from gpu_advisor.catalog.config import CatalogConfig
from gpu_advisor.catalog.service import CatalogService
from gpu_advisor.catalog.sources import SourceError, SourceResult
from gpu_advisor.metrics import Metrics
from tests.ops.test_metrics import value


class FailingSource:
    name = "gpuhunt"

    async def fetch(self) -> SourceResult:
        raise SourceError("HTTP 503 from the catalog host")


class BrokenStore(MemoryStore):
    async def get(self, key: str) -> bytes | None:
        raise StoreError("connection refused")


async def run(service: CatalogService) -> dict[str, int]:
    """Start, force a refresh, close; the offers per source the snapshot served."""
    await service.start()
    try:
        await service.refresh(force=True)
        snapshot = await service.snapshot()
    finally:
        await service.close()
    return {s.name: s.offers for s in snapshot.sources}


def test_loads_failures_and_cache_misses_reach_the_metrics() -> None:
    metrics = Metrics(clock=lambda: 2_000_000_000.0)
    service = CatalogService(
        CatalogConfig(sources=("bundled", "gpuhunt")),
        sources={"gpuhunt": FailingSource()},
        store=MemoryStore(),
        observer=metrics,
    )
    served = asyncio.run(run(service))
    text = metrics.exposition()[0].decode()
    bundled_offers = served["bundled"]
    assert bundled_offers > 0
    assert value(text, "gpu_advisor_catalog_offers", source="bundled") == bundled_offers
    assert value(text, "gpu_advisor_catalog_refresh_failures_total", source="gpuhunt") >= 1
    assert value(text, "gpu_advisor_cache_requests_total", layer="memory", result="miss") >= 1


def test_store_errors_are_counted() -> None:
    metrics = Metrics()
    service = CatalogService(
        CatalogConfig(sources=("bundled", "gpuhunt")),
        sources={"gpuhunt": FailingSource()},
        store=BrokenStore(),
        observer=metrics,
    )
    asyncio.run(run(service))
    text = metrics.exposition()[0].decode()
    assert value(text, "gpu_advisor_cache_requests_total", layer="memory", result="error") >= 1
