"""``bench/http_offload_app.py``, the service with its planner in a worker thread that
``bench_http.py`` compares with the real one: it must answer as the service does and plan every
request (its figures are read as "no answer cache")."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from gpu_advisor.advisor import Advisor
from gpu_advisor.catalog.config import CatalogConfig
from gpu_advisor.catalog.service import CatalogService
from gpu_advisor.core.spec import RecommendationRequest
from tests.bench_scripts import load_bench_script

pytestmark = pytest.mark.anyio
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mixtral-8x7b-serving.json"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_offloading_advisor_plans_every_request_like_the_service(
    planning_calls: list[int],
) -> None:
    offload = load_bench_script("http_offload_app")
    calls = planning_calls
    service = CatalogService(CatalogConfig(sources=("bundled",)))
    await service.start()
    try:
        request = msgspec.json.decode(EXAMPLE.read_bytes(), type=RecommendationRequest)
        offloading = offload.OffloadingAdvisor(service)
        bodies = [(await offloading.serve_recommendation(request)).json() for _ in range(2)]
        assert len(calls) == 2  # the answer cache is not consulted
        expected = (await Advisor(service).serve_recommendation(request)).json()
        assert bodies == [expected, expected]
    finally:
        await service.close()
