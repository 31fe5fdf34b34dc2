"""The committed OpenAPI document is exactly what the app serves at /schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec.inspect as mi
from litestar.testing import TestClient

from gpu_advisor.asgi import build
from gpu_advisor.core.spec import CheckRequest, EstimateRequest, RecommendationRequest
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


def _numeric_bounds(kind: Any) -> dict[str, float] | None:
    """The bounds msgspec enforces on a field's type (None for a non-numeric field)."""
    if isinstance(kind, mi.UnionType):
        arms = [t for t in kind.types if not isinstance(t, mi.NoneType)]
        if len(arms) != 1:
            return None
        kind = arms[0]
    if isinstance(kind, mi.Metadata):
        kind = kind.type
    if not isinstance(kind, mi.IntType | mi.FloatType):
        return None
    names = {"gt": "exclusiveMinimum", "ge": "minimum", "lt": "exclusiveMaximum", "le": "maximum"}
    return {names[k]: getattr(kind, k) for k in names if getattr(kind, k) is not None}


def _structs(kind: Any, found: dict[str, mi.StructType]) -> None:
    if isinstance(kind, mi.Metadata):
        _structs(kind.type, found)
    elif isinstance(kind, mi.UnionType):
        for arm in kind.types:
            _structs(arm, found)
    elif isinstance(kind, mi.ListType):
        _structs(kind.item_type, found)
    elif isinstance(kind, mi.StructType) and kind.cls.__name__ not in found:
        found[kind.cls.__name__] = kind
        for field in kind.fields:
            _structs(field.type, found)


def test_every_numeric_bound_the_server_enforces_is_in_the_schema() -> None:
    # A client generated from the document must know what the server refuses: each request
    # field's gt/ge/lt/le (msgspec) is its exclusiveMinimum/minimum/... in openapi.json.
    schemas = json.loads(COMMITTED.read_text(encoding="utf-8"))["components"]["schemas"]
    structs: dict[str, mi.StructType] = {}
    for request in (RecommendationRequest, EstimateRequest, CheckRequest):
        _structs(mi.type_info(request), structs)
    checked = 0
    for name, struct in structs.items():
        for field in struct.fields:
            bounds = _numeric_bounds(field.type)
            if not bounds:
                continue
            documented = schemas[name]["properties"][field.encode_name]
            for key, value in bounds.items():
                assert documented.get(key) == value, (name, field.name, key, documented)
                checked += 1
    assert checked > 50  # the request types have dozens of bounded numbers
