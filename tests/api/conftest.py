"""The app built by the composition root, through Litestar's test client, once per cache
backend: the in-process store (the embedded default) and the real Redis at ``REDIS_URL``
(default ``redis://127.0.0.1:6379/15``). Every API test runs against both."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from litestar.testing import TestClient

from gpu_advisor.asgi import build
from gpu_advisor.settings import Settings

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/15")


@pytest.fixture(scope="module", params=["memory", "redis"])
def client(request: pytest.FixtureRequest) -> Iterator[TestClient]:  # type: ignore[type-arg]
    redis_url = REDIS_URL if request.param == "redis" else None
    app = build(Settings(rate_limit_per_minute=0, redis_url=redis_url))
    with TestClient(app) as test_client:
        if redis_url is not None:
            ready = test_client.get("/readyz").json()
            assert ready["cache"] == {**ready["cache"], "backend": "redis", "degraded": False}
        yield test_client


@pytest.fixture
def planning_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the advisor's calls to the planner (``recommend``): one entry per call."""
    import gpu_advisor.advisor as advisor_module

    calls: list[int] = []
    real = advisor_module.recommend

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(advisor_module, "recommend", counting)
    return calls
