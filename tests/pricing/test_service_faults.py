"""Catalog service under faults, with real parts: a local HTTP server, the real Redis, and a
second redis-server started (and killed) by the test."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import msgspec
import pytest

from gpu_advisor.catalog.cache import RedisStore
from gpu_advisor.catalog.config import CatalogConfig
from gpu_advisor.catalog.service import CatalogService
from gpu_advisor.core.offers import Offer
from tests.redis_process import RedisProcess, free_port

from .conftest import REDIS_URL, SKYPILOT_DIR, CountingServer

pytestmark = pytest.mark.anyio

LAMBDA_CSV = (SKYPILOT_DIR / "lambda" / "vms.csv").read_bytes()


def _undated(offers: tuple[Offer, ...]) -> list[Offer]:
    return [msgspec.structs.replace(o, fetched_at="") for o in offers]


def _config(server: CountingServer, **kw: object) -> CatalogConfig:
    base: dict[str, object] = {
        "sources": ("skypilot",),
        "skypilot_url": server.url,
        "skypilot_clouds": ("lambda",),
        "http_retries": 0,
        "http_read_timeout_seconds": 0.5,
        "http_connect_timeout_seconds": 0.5,
        "revalidate_interval_seconds": 3600.0,
    }
    base.update(kw)
    return CatalogConfig(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        ("500", "HTTP 500"),
        ("timeout", "Timeout"),
        ("garbage", "lacks columns"),
        ("truncated", "truncated"),
    ],
)
async def test_source_fault_keeps_last_good(
    skypilot_server: CountingServer, fault: str, reason: str
) -> None:
    service = CatalogService(_config(skypilot_server))
    await service.start()
    try:
        first = await service.refresh(force=True)
        assert first.fetched == ("skypilot",)
        good = await service.snapshot()
        assert good.offers
        assert all(o.source == "skypilot" for o in good.offers)
        if fault == "500":
            skypilot_server.fail_status = 500
        elif fault == "timeout":
            skypilot_server.stall_seconds = 1.5
        elif fault == "garbage":
            skypilot_server.override = b"\x00\x01 not a csv at all"
        else:
            skypilot_server.override = LAMBDA_CSV[: len(LAMBDA_CSV) // 2]
        outcome = await service.refresh(force=True)
        assert reason in outcome.failed["skypilot"]
        after = await service.snapshot()
        assert after.offers == good.offers  # the last good catalog stays in use
        (status,) = after.sources
        assert status.stale is True
        assert reason in (status.last_error or "")
        assert status.offers == len(good.offers)
    finally:
        skypilot_server.stall_seconds = 0
        await service.close()


async def test_start_does_not_wait_for_a_slow_source(skypilot_server: CountingServer) -> None:
    skypilot_server.stall_seconds = 1.0
    service = CatalogService(_config(skypilot_server, revalidate_interval_seconds=0.05))
    t0 = time.monotonic()
    await service.start()
    try:
        assert time.monotonic() - t0 < 0.5
        snap = await service.snapshot()
        assert snap.offers
        assert snap.sources[0].name == "bundled"
        assert snap.sources[0].fallback
    finally:
        skypilot_server.stall_seconds = 0
        await service.close()


async def test_two_instances_refreshing_at_once_fetch_once(
    skypilot_server: CountingServer,
) -> None:
    prefix = f"gpu-advisor:test-{time.time_ns()}"
    config = _config(skypilot_server, redis_url=REDIS_URL, key_prefix=prefix)
    a, b = CatalogService(config), CatalogService(config)
    await a.start()
    await b.start()
    try:
        # Let the start-up revalidation settle first (it is a concurrent refresh of its own);
        # then count only the forced refreshes.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            snaps = [await a.snapshot(), await b.snapshot()]
            if all(any(o.source == "skypilot" for o in s.offers) for s in snaps):
                break
            await asyncio.sleep(0.02)
        skypilot_server.requests.clear()
        skypilot_server.stall_seconds = 0.3  # the fetch takes long enough to overlap
        ra, rb = await asyncio.gather(a.refresh(force=True), b.refresh(force=True))
        assert skypilot_server.requests["/lambda/vms.csv"] == 1
        # one of them fetched, the other took that result from the shared cache
        assert sorted([ra.fetched, rb.fetched]) == [(), ("skypilot",)]
        assert ra.fetched + ra.shared == ("skypilot",)
        assert rb.fetched + rb.shared == ("skypilot",)
        sa, sb = await a.snapshot(), await b.snapshot()
        assert sa.version == sb.version
        assert sa.offers == sb.offers
    finally:
        skypilot_server.stall_seconds = 0
        await a.close()
        await b.close()


async def test_redis_stopped_mid_run(
    skypilot_server: CountingServer, spare_redis: RedisProcess, tmp_path: Path
) -> None:
    url = f"redis://127.0.0.1:{spare_redis.port}/0"
    service = CatalogService(
        _config(skypilot_server, redis_url=url, redis_socket_timeout_seconds=0.2)
    )
    await service.start()
    try:
        await service.refresh(force=True)
        good = await service.snapshot()
        assert (await service.health()).degraded is False

        spare_redis.kill()
        outcome = await service.refresh(force=True)  # Redis errors are misses, not failures
        assert outcome.fetched == ("skypilot",)
        snap = await service.snapshot()
        # the same offers, fetched again (fetched_at may have moved on by a second)
        assert _undated(snap.offers) == _undated(good.offers)
        health = await service.health()
        assert health.degraded is True
        assert health.backend == "redis"
        assert service.cache_degraded
        assert health.last_error_at is not None  # when, for the record (ISO 8601 UTC)
        assert health.last_error_at.endswith("Z")

        spare_redis.start()  # same port; the service is not restarted
        health = await service.health()
        assert health.degraded is False
        await service.refresh(force=True)
        store = RedisStore(url)
        try:
            stored = await store.get("gpu-advisor:v2:catalog:skypilot:version")
        finally:
            await store.close()
        assert stored == (await service.snapshot()).sources[0].version.encode()  # type: ignore[union-attr]
    finally:
        await service.close()


async def test_redis_unreachable_from_the_start_is_degraded_not_down() -> None:
    # Embedded sources only (the bundled snapshot never needs the cache to answer), and a
    # REDIS_URL where nothing listens: answers still come from memory, readiness says degraded.
    url = f"redis://127.0.0.1:{free_port()}/0"
    service = CatalogService(
        CatalogConfig(sources=("bundled",), redis_url=url, redis_socket_timeout_seconds=0.2)
    )
    await service.start()
    try:
        snapshot = await service.snapshot()
        assert snapshot.offers
        health = await service.health()
        assert health.backend == "redis"
        assert health.degraded is True
        assert health.last_error
    finally:
        await service.close()
