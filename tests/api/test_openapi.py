"""The committed OpenAPI document is exactly what the app serves at /schema."""

from __future__ import annotations

import json
from pathlib import Path

from litestar.testing import TestClient

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
