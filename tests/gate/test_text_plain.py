"""``Accept: text/plain`` on the three planning endpoints: the same answer as an aligned text
table (the CLI's renderer, no colour, ASCII borders); JSON stays the default."""

from __future__ import annotations

import json
from typing import Any

import pytest
from litestar.testing import TestClient

from tests.gate.conftest import FULL_FINETUNE, load_example
from tests.ops.serving import REPO

ESTIMATE = {
    "model": {"preset": "meta-llama/Llama-3.1-8B"},
    "workload": {"kind": "inference", "context_length": 8192, "concurrency": 4},
    "hardware": {"gpu": "H100", "gpu_count": 1},
}
RECOMMEND = json.loads((REPO / "examples" / "llama31-8b-qlora.json").read_text(encoding="utf-8"))


def _rows(text: str) -> list[list[str]]:
    """The ASCII tables' rows, split into cells; a line whose first cell is empty continues
    the row above (rich wraps long cells), so its pieces are joined to that row's cells."""
    rows: list[list[str]] = []
    for line in text.splitlines():
        if not line.startswith("|") or line.startswith("|-"):
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if rows and not cells[0] and len(cells) == len(rows[-1]):
            rows[-1] = [" ".join(filter(None, pair)) for pair in zip(rows[-1], cells, strict=True)]
        else:
            rows.append(cells)
    return rows


def _squeezed(text: str) -> str:
    return "".join(text.split())


def _post_text(client: TestClient, path: str, body: dict[str, Any]) -> str:  # type: ignore[type-arg]
    response = client.post(path, json=body, headers={"Accept": "text/plain"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    assert response.headers["vary"] == "Accept"
    assert response.headers["cache-control"] == "no-store"  # live prices, as the JSON
    text = response.text
    assert "\x1b[" not in text  # no colour codes
    assert all(len(line) <= 120 for line in text.splitlines())
    return text


def test_check_as_text_matches_the_json(client: TestClient) -> None:  # type: ignore[type-arg]
    body = load_example(FULL_FINETUNE)
    body["budget_usd"] = 1000
    answer = client.post("/v1/check", json=body).json()
    text = _post_text(client, "/v1/check", body)
    assert text.splitlines()[0] == "gpu-advisor check: FAIL"
    rows = {row[0]: row for row in _rows(text) if len(row) == 3}
    for check in answer["checks"]:
        result = {True: "pass", False: "FAIL", None: "n/a"}[check["passed"]]
        assert rows[check["name"]][1] == result
    # the budget sentence (wrapped over lines in its cell) carries the same dollar figure
    budget = next(c for c in answer["checks"] if c["name"] == "budget")
    total = f"${budget['data']['total_usd']:,.2f}"
    assert total in rows["budget"][2]
    assert _squeezed(rows["budget"][2]) == _squeezed(budget["detail"])
    assert "Cheapest passing alternative in the catalog" in text


def test_estimate_as_text(client: TestClient) -> None:  # type: ignore[type-arg]
    answer = client.post("/v1/estimate", json=ESTIMATE).json()
    text = _post_text(client, "/v1/estimate", ESTIMATE)
    assert text.splitlines()[0] == "gpu-advisor estimate: FITS"
    terms = {row[0]: row[1] for row in _rows(text) if len(row) == 2}
    # KV cache: 2 x 32 layers x 8 KV heads x 128 x 2 B = 128 KiB per token;
    # 4 sequences x 8,192 tokens = 4 GiB.
    assert answer["memory_per_gpu"]["kv_cache_bytes"] == 2 * 32 * 8 * 128 * 2 * 8192 * 4
    assert terms["KV cache"] == "4.00 GiB"
    assert terms["total"] == f"{answer['memory_per_gpu']['total_bytes'] / 2**30:.2f} GiB"


def test_recommendations_as_text(client: TestClient) -> None:  # type: ignore[type-arg]
    answer = client.post("/v1/recommendations", json=RECOMMEND).json()
    text = _post_text(client, "/v1/recommendations", RECOMMEND)
    found = len(answer["recommendations"])
    assert text.splitlines()[0] == f"gpu-advisor recommend: {found} recommendations"
    ranked = [row for row in _rows(text) if len(row) == 7 and row[0].isdigit()]
    assert [row[0] for row in ranked] == [str(i) for i in range(1, found + 1)]
    top = answer["recommendations"][0]["offer"]
    name = f"{top['provider']} {top['instance_type']} {top['region']}"
    assert _squeezed(ranked[0][1]) == _squeezed(name)  # long names fold inside the cell


@pytest.mark.parametrize(
    "accept",
    [
        None,
        "*/*",
        "application/json",
        "text/html",
        "text/plain, application/json",  # a tie: JSON
        "text",  # not a media range
        # q=0 is "not acceptable" (RFC 9110 section 12.5.1), not "least preferred"
        "text/plain;q=0",
        "text/plain;q=0, */*",
        "application/json;q=0, text/plain;q=0",
    ],
)
def test_json_stays_the_default(client: TestClient, accept: str | None) -> None:  # type: ignore[type-arg]
    headers = {"Accept": accept} if accept else {}
    response = client.post("/v1/estimate", json=ESTIMATE, headers=headers)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")


def test_quality_values_pick_the_preferred_type(client: TestClient) -> None:  # type: ignore[type-arg]
    headers = {"Accept": "application/json;q=0.5, text/plain"}
    response = client.post("/v1/estimate", json=ESTIMATE, headers=headers)
    assert response.headers["content-type"].startswith("text/plain")
    headers = {"Accept": "text/plain;q=0.2, application/json"}
    response = client.post("/v1/estimate", json=ESTIMATE, headers=headers)
    assert response.headers["content-type"].startswith("application/json")
    # the most specific range gives a type its quality: JSON refused, text/* allowed
    for accept in (
        "application/json;q=0, */*",
        "*/*;q=0, text/plain",
        "text/*;q=0.5",
        "TEXT/PLAIN",  # media types are case-insensitive (RFC 9110 section 8.3.1)
        "Text/Plain;q=1, application/json;q=0.5",
    ):
        response = client.post("/v1/estimate", json=ESTIMATE, headers={"Accept": accept})
        assert response.headers["content-type"].startswith("text/plain"), accept


def test_openapi_lists_both_media_types(client: TestClient) -> None:  # type: ignore[type-arg]
    paths = client.get("/schema/openapi.json").json()["paths"]
    for path in ("/v1/recommendations", "/v1/estimate", "/v1/check"):
        content = paths[path]["post"]["responses"]["200"]["content"]
        assert set(content) == {"application/json", "text/plain"}, path
    schema = paths["/v1/check"]["post"]["responses"]["200"]["content"]["application/json"]
    assert schema["schema"]["$ref"].endswith("/CheckResponse")


def test_a_kv_pool_misfit_says_why_in_the_text(client: TestClient) -> None:  # type: ignore[type-arg]
    # Llama-3.1-8B bf16, 5 sequences of 8,192 tokens on one L4 (23,999,807,488 B exposed):
    # 21.6 GiB in all reads as if it fitted, but vLLM reserves gpu_memory_utilization 0.9 x
    # 23,999,807,488 B = 20.1 GiB, and the KV cache alone is 5 x 8,192 x 131,072 B = 5.0 GiB,
    # more than the pool the weights leave in that reservation.
    body = {
        "model": {"preset": "meta-llama/Llama-3.1-8B"},
        "workload": {
            "kind": "inference",
            "weight_dtype": "bf16",
            "context_length": 8192,
            "concurrency": 5,
        },
        "hardware": {"gpu": "L4"},
    }
    text = _squeezed(_post_text(client, "/v1/estimate", body))
    assert _squeezed("does not fit: the engine reserves 20.1 GiB") in text
    assert _squeezed("for 5.0 GiB of KV cache") in text
