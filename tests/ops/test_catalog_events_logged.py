"""What an operator must see in the log about the catalog: a source whose refresh fails (with
the reason) and the shared cache going away and coming back. The service wires
:class:`~gpu_advisor.observer.LoggingCatalogObserver`; the metrics still get every event."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from gpu_advisor.catalog.cache import MemoryStore
from gpu_advisor.catalog.config import CatalogConfig
from gpu_advisor.catalog.service import CatalogService
from gpu_advisor.catalog.sources import SourceError, SourceResult
from gpu_advisor.logs import get_logger
from gpu_advisor.metrics import Metrics
from gpu_advisor.observer import LoggingCatalogObserver
from tests.ops.test_metrics import value
from tests.redis_process import RedisProcess

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _lines(stream: io.StringIO, logger: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]
    return [line for line in lines if line.get("logger") == logger]


async def test_cache_loss_and_recovery_are_logged_once_each(
    log_stream: io.StringIO, spare_redis: RedisProcess
) -> None:
    observer = LoggingCatalogObserver(Metrics(), get_logger("gpu_advisor.catalog"))
    service = CatalogService(
        CatalogConfig(
            sources=("bundled",), redis_url=spare_redis.url, redis_socket_timeout_seconds=0.2
        ),
        observer=observer,
    )
    await service.start()
    try:
        assert (await service.health()).degraded is False
        spare_redis.kill()
        for _ in range(3):  # three failed pings: one change of state, one line
            assert (await service.health()).degraded is True
        spare_redis.start()
        assert (await service.health()).degraded is False
    finally:
        await service.close()
    events = [(line["event"], line["level"]) for line in _lines(log_stream, "gpu_advisor.catalog")]
    assert events == [("cache.degraded", "warning"), ("cache.recovered", "info")]
    [degraded] = [line for line in _lines(log_stream, "gpu_advisor.catalog") if "error" in line]
    assert degraded["backend"] == "redis"
    assert "PING" in degraded["error"]


class FailingSource:
    name = "gpuhunt"

    async def fetch(self) -> SourceResult:
        raise SourceError("HTTP 503 from the catalog host")


async def test_a_failed_refresh_is_logged_with_its_reason_and_counted(
    log_stream: io.StringIO,
) -> None:
    metrics = Metrics()
    service = CatalogService(
        CatalogConfig(sources=("bundled", "gpuhunt")),
        sources={"gpuhunt": FailingSource()},
        store=MemoryStore(),
        observer=LoggingCatalogObserver(metrics, get_logger("gpu_advisor.catalog")),
    )
    await service.start()
    try:
        await service.refresh(force=True)
    finally:
        await service.close()
    failures = [
        line
        for line in _lines(log_stream, "gpu_advisor.catalog")
        if line["event"] == "catalog.refresh_failed"
    ]
    assert failures
    for line in failures:
        assert (line["source"], line["level"]) == ("gpuhunt", "warning")
        assert "HTTP 503 from the catalog host" in line["reason"]
    text = metrics.exposition()[0].decode()
    assert value(text, "gpu_advisor_catalog_refresh_failures_total", source="gpuhunt") == len(
        failures
    )
