"""ModelSpec's numbers: the OpenAPI document states the bounds the server enforces (the
schema and the config reader share ``core/limits.py``), and a generic model whose given numbers
do not fit its parameter count names the field at fault with the limit that would fit."""

from __future__ import annotations

from typing import Any

import pytest
from litestar.testing import TestClient

from gpu_advisor.core.spec import MODEL_SHAPE_FIELDS
from tests.api.answers import body_of, field_error

# --- the OpenAPI document states what the server enforces ----------------------------------


def _model_schema(client: TestClient) -> dict[str, Any]:  # type: ignore[type-arg]
    schemas = client.get("/schema/openapi.json").json()["components"]["schemas"]
    properties: dict[str, Any] = schemas["ModelSpec"]["properties"]
    return properties


def test_model_parameters_has_the_servers_minimum(client: TestClient) -> None:  # type: ignore[type-arg]
    # the generic decoder rounds the count to an integer and needs at least 1
    assert _model_schema(client)["parameters"]["minimum"] == 1
    body = {"model": {"parameters": 0.5}, "workload": {"kind": "inference"}}
    field_error(client.post("/v1/estimate", json=body), "model.parameters")


@pytest.mark.parametrize("field", MODEL_SHAPE_FIELDS)
def test_model_numbers_at_the_schema_maximum_pass_the_servers_range_check(
    client: TestClient,  # type: ignore[type-arg]
    field: str,
) -> None:
    """The schema's maximum is the server's: the value is past the decoder's range check (it
    may still not fit the parameter count, a 422 about fitting, not about the range), and one
    more is a 400 naming the field. vocab_size was 1e8 in the schema and 1e7 on the server."""
    maximum = _model_schema(client)[field]["maximum"]
    body: dict[str, Any] = {"model": {"parameters": 1e14}, "workload": {"kind": "inference"}}
    body["model"][field] = maximum
    response = client.post("/v1/estimate", json=body)
    assert response.status_code in (200, 422), response.text
    assert "must be between" not in response.text
    body["model"][field] = maximum + 1
    field_error(client.post("/v1/estimate", json=body), f"model.{field}")


def test_vocab_size_maximum_is_ten_million(client: TestClient) -> None:  # type: ignore[type-arg]
    assert _model_schema(client)["vocab_size"]["maximum"] == 10_000_000


# --- a generic model's misfit names the field at fault ------------------------------------


def test_a_too_wide_intermediate_size_is_named(client: TestClient) -> None:  # type: ignore[type-arg]
    body = {
        "model": {"parameters": 7e9, "intermediate_size": 10_000_000},
        "workload": {"kind": "inference"},
    }
    message = field_error(client.post("/v1/estimate", json=body), "model.intermediate_size", 422)
    # 7e9 gives hidden 4,096 (32 heads of 128, MHA); embeddings and untied head
    # 2 x 32,000 x 4,096 = 262,144,000 and the final norm 4,096 leave
    # 7,000,000,000 - 262,144,000 - 4,096 = 6,737,851,904 for the layers. One layer is
    # attention 4 x 4,096^2 = 67,108,864 + norms 2 x 4,096 = 8,192 + MLP 3 x 4,096 x width:
    # width 10,000,000 -> 122,947,117,056; the widest that fits one layer is
    # (6,737,851,904 - 67,117,056) // 12,288 = 542,865.
    assert "122,947,117,056" in message
    assert "6,737,851,904" in message
    assert "intermediate_size <= 542,865" in message
    ok = {**body, "model": {"parameters": 7e9, "intermediate_size": 542_865}}
    body_of(client.post("/v1/estimate", json=ok), 200)
    too_wide = {**body, "model": {"parameters": 7e9, "intermediate_size": 542_866}}
    field_error(client.post("/v1/estimate", json=too_wide), "model.intermediate_size", 422)
