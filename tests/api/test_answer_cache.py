"""The advisor's answer cache: a repeated request against the same catalog version is answered
without planning again; a different request, or a new catalog version, is planned afresh."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from gpu_advisor.advisor import Advisor, AnswerCache
from gpu_advisor.catalog.config import CatalogConfig
from gpu_advisor.catalog.service import CatalogService
from gpu_advisor.core.spec import EstimateRequest, RecommendationRequest
from tests.redis_process import RedisProcess

pytestmark = pytest.mark.anyio
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mixtral-8x7b-serving.json"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_lru_drops_the_least_recently_used() -> None:
    cache = AnswerCache(max_entries=2)
    a, b, c = (("recommendations", "v1", k) for k in (b"a", b"b", b"c"))
    entries = {k: cache.put(k, v) for k, v in ((a, 1), (b, 2))}
    assert cache.get(a) is entries[a]  # a is now the most recent
    entries[c] = cache.put(c, 3)  # evicts b
    assert (cache.get(a), cache.get(b), cache.get(c)) == (entries[a], None, entries[c])
    assert [entries[k].answer for k in (a, c)] == [1, 3]


async def test_repeated_request_is_planned_once(planning_calls: list[int]) -> None:
    calls = planning_calls
    service = CatalogService(CatalogConfig(sources=("bundled",)))
    await service.start()
    try:
        advisor = Advisor(service)
        request = msgspec.json.decode(EXAMPLE.read_bytes(), type=RecommendationRequest)
        first = await advisor.recommend(request)
        second = await advisor.recommend(request)
        assert len(calls) == 1
        assert msgspec.json.encode(first) == msgspec.json.encode(second)
        other = msgspec.structs.replace(request, top_k=2)
        third = await advisor.recommend(other)
        assert len(calls) == 2
        assert len(third.recommendations) == 2
        # A new catalog version (another content hash) is a miss by construction.
        key = ("recommendations", "another-version", msgspec.json.encode(request))
        assert advisor._remembered(key) is None
        uncached = Advisor(service, answer_cache_entries=0)
        await uncached.recommend(request)
        await uncached.recommend(request)
        assert len(calls) == 4
        assert json.loads(msgspec.json.encode(first))["catalog"]["degraded"] is False
    finally:
        await service.close()


def _without_catalog(body: bytes) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(body)
    document.pop("catalog")
    return document


async def test_a_cached_body_carries_the_live_catalog_block(
    planning_calls: list[int], spare_redis: RedisProcess
) -> None:
    # The body of a repeated request is kept encoded, but the catalog block is live: when
    # Redis goes away between two equal requests, the second answer (not planned again) says
    # the cache is degraded, and says so no more once Redis is back.
    calls = planning_calls
    service = CatalogService(
        CatalogConfig(
            sources=("bundled",), redis_url=spare_redis.url, redis_socket_timeout_seconds=0.2
        )
    )
    await service.start()
    try:
        advisor = Advisor(service)
        request = msgspec.json.decode(EXAMPLE.read_bytes(), type=RecommendationRequest)
        first = await advisor.serve_recommendation(request)
        healthy_body = first.json()
        assert json.loads(healthy_body)["catalog"]["degraded"] is False
        # the body is msgspec's encoding of the answer struct, as Litestar would send it
        assert healthy_body == msgspec.json.encode(first.value())

        spare_redis.kill()
        assert (await service.health()).degraded is True
        degraded = await advisor.serve_recommendation(request)
        degraded_body = degraded.json()
        assert json.loads(degraded_body)["catalog"]["degraded"] is True
        assert degraded.value().catalog.degraded is True
        assert degraded_body == msgspec.json.encode(degraded.value())
        assert _without_catalog(degraded_body) == _without_catalog(healthy_body)

        spare_redis.start()
        assert (await service.health()).degraded is False
        healed = await advisor.serve_recommendation(request)
        assert healed.json() == healthy_body
        assert len(calls) == 1
    finally:
        await service.close()


async def test_estimate_bodies_are_encoded_once() -> None:
    # An estimate has no catalog block: a repeated one is the very same bytes object, not a
    # second encoding; with the cache off, each request is estimated and encoded afresh.
    service = CatalogService(CatalogConfig(sources=("bundled",)))
    await service.start()
    try:
        request = msgspec.convert(
            {
                "model": {"preset": "llama-3.1-8b"},
                "workload": {"kind": "inference", "context_length": 8192, "concurrency": 8},
            },
            EstimateRequest,
        )
        advisor = Advisor(service)
        first = (await advisor.serve_estimate(request)).json()
        second = (await advisor.serve_estimate(request)).json()
        assert second is first
        assert first == msgspec.json.encode(await advisor.estimate(request))
        uncached = Advisor(service, answer_cache_entries=0)
        fresh = [(await uncached.serve_estimate(request)).json() for _ in range(2)]
        assert fresh[0] == fresh[1] == first
        assert fresh[0] is not fresh[1]
    finally:
        await service.close()
