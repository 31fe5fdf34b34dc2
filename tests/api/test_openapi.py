"""The committed OpenAPI document is exactly what the app serves at /schema."""

from __future__ import annotations

import json
from pathlib import Path

from litestar.testing import TestClient

from gpu_advisor.asgi import build
from gpu_advisor.settings import Settings

COMMITTED = Path(__file__).resolve().parents[2] / "openapi" / "openapi.json"


def test_committed_openapi_matches_served(client: TestClient) -> None:  # type: ignore[type-arg]
    served = client.get("/schema/openapi.json")
    assert served.status_code == 200
    committed = json.loads(COMMITTED.read_text(encoding="utf-8"))
    assert served.json() == committed, "run `make openapi` and commit openapi/openapi.json"


def test_every_design_endpoint_is_documented() -> None:
    # DESIGN "API": the endpoints callers depend on (plus the operational ones).
    paths = json.loads(COMMITTED.read_text(encoding="utf-8"))["paths"]
    for path in ("/v1/models", "/v1/gpus", "/v1/offers", "/v1/catalog", "/healthz", "/readyz"):
        assert path in paths, path


def test_rate_limited_and_readiness_answers_are_documented(client: TestClient) -> None:  # type: ignore[type-arg]
    # Every /v1/ operation is rate limited (only /healthz, /readyz and /metrics are exempt):
    # each documents its 429. /readyz documents the 503 it gives while starting or stopping.
    paths = json.loads(COMMITTED.read_text(encoding="utf-8"))["paths"]
    operations = [
        (path, method, op)
        for path, item in paths.items()
        for method, op in item.items()
        if path.startswith("/v1/")
    ]
    assert operations
    for path, method, op in operations:
        assert "429" in op["responses"], (method, path)
        assert "application/problem+json" in op["responses"]["429"]["content"], (method, path)
    assert set(paths["/readyz"]["get"]["responses"]) >= {"200", "503"}
    # and the service answers as documented: a 429 problem once a client is over its limit
    limited = build(Settings(rate_limit_per_minute=2))
    with TestClient(limited) as test_client:
        statuses = [test_client.get("/v1/models").status_code for _ in range(3)]
        assert statuses == [200, 200, 429]
        over = test_client.get("/v1/gpus")
        assert over.headers["content-type"].startswith("application/problem+json")
        assert "retry-after" in over.headers
