"""The advisor's answer cache: a repeated request against the same catalog version is answered
without planning again; a different request, or a new catalog version, is planned afresh."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

import gpu_advisor.advisor as advisor_module
from gpu_advisor.advisor import Advisor, AnswerCache
from gpu_advisor.catalog.config import CatalogConfig
from gpu_advisor.catalog.service import CatalogService
from gpu_advisor.core.spec import RecommendationRequest

pytestmark = pytest.mark.anyio
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mixtral-8x7b-serving.json"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_lru_drops_the_least_recently_used() -> None:
    cache = AnswerCache(max_entries=2)
    a, b, c = (("recommend", "v1", k) for k in (b"a", b"b", b"c"))
    cache.put(a, 1)
    cache.put(b, 2)
    assert cache.get(a) == 1  # a is now the most recent
    cache.put(c, 3)  # evicts b
    assert (cache.get(a), cache.get(b), cache.get(c)) == (1, None, 3)


async def test_repeated_request_is_planned_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = advisor_module.recommend

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(advisor_module, "recommend", counting)
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
        key = ("recommend", "another-version", msgspec.json.encode(request))
        assert advisor._remembered(key) is None
        uncached = Advisor(service, answer_cache_entries=0)
        await uncached.recommend(request)
        await uncached.recommend(request)
        assert len(calls) == 4
        assert json.loads(msgspec.json.encode(first))["catalog"]["degraded"] is False
    finally:
        await service.close()
