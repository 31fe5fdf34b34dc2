"""An app built by the composition root with embedded defaults, through Litestar's client."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from litestar.testing import TestClient

from gpu_advisor.asgi import build
from gpu_advisor.settings import Settings


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:  # type: ignore[type-arg]
    app = build(Settings(rate_limit_per_minute=0))
    with TestClient(app) as test_client:
        yield test_client
