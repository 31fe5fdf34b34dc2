"""The collector pause (gpu_advisor.collector): planning runs with Python's cyclic collector
off, the collector's previous state comes back afterwards, and the advisor's setting reaches
the planning call."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

import gpu_advisor.advisor as advisor_module
from gpu_advisor.advisor import Advisor
from gpu_advisor.catalog.config import CatalogConfig
from gpu_advisor.catalog.service import CatalogService
from gpu_advisor.collector import collector_paused
from gpu_advisor.core.spec import RecommendationRequest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mixtral-8x7b-serving.json"


@pytest.fixture
def collector_on() -> Iterator[None]:
    """The collector on for the test, as the test found it after."""
    was = gc.isenabled()
    gc.enable()
    try:
        yield
    finally:
        (gc.enable if was else gc.disable)()


@pytest.mark.usefixtures("collector_on")
def test_the_collector_is_off_inside_and_on_after() -> None:
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


@pytest.mark.usefixtures("collector_on")
def test_an_error_inside_still_switches_it_back_on() -> None:
    with pytest.raises(ZeroDivisionError), collector_paused():
        _ = 1 / 0
    assert gc.isenabled()


@pytest.mark.usefixtures("collector_on")
def test_a_collector_switched_off_by_the_process_stays_off() -> None:
    gc.disable()
    with collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


@pytest.mark.usefixtures("collector_on")
def test_disabled_setting_leaves_the_collector_alone() -> None:
    with collector_paused(enabled=False):
        assert gc.isenabled()
    assert gc.isenabled()


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.usefixtures("collector_on")
@pytest.mark.parametrize("pause", [True, False])
async def test_the_advisor_plans_with_the_collector_as_configured(
    monkeypatch: pytest.MonkeyPatch, pause: bool, anyio_backend: str
) -> None:
    seen: list[bool] = []
    real = advisor_module.recommend

    def recording(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(advisor_module, "recommend", recording)
    service = CatalogService(CatalogConfig(sources=("bundled",)))
    await service.start()
    try:
        advisor = Advisor(service, answer_cache_entries=0, pause_collector=pause)
        request = msgspec.json.decode(EXAMPLE.read_bytes(), type=RecommendationRequest)
        answer = await advisor.recommend(request)
        assert answer.recommendations
        assert seen == [not pause]
        assert gc.isenabled()
    finally:
        await service.close()
