"""USD amounts in answers: cents for amounts, 1e-4 for rates, no float noise (QA finding 25);
the planner's own arithmetic stays exact (gpu_advisor.money)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient

from gpu_advisor.core.results import Cost, Reason
from gpu_advisor.money import decimals_for, round_money

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.json"))


def test_amounts_to_cents_and_rates_to_a_hundredth_of_a_cent() -> None:
    cost = Cost(
        price_per_hour_usd=0.1 + 0.2,  # 0.30000000000000004
        total_usd=0.3 * 9,  # 2.6999999999999997
        per_million_tokens_usd=0.0522 + 1e-17 * 3,  # 0.05220000000000003
        price_per_gpu_hour_usd=1 / 3,
        checkpoint_storage_usd=0.8415490659398471,
        billed_hours=1 / 3,  # hours, not USD: untouched
    )
    rounded = round_money(cost)
    assert rounded.price_per_hour_usd == 0.3
    assert rounded.total_usd == 2.7
    assert rounded.per_million_tokens_usd == 0.0522
    assert rounded.price_per_gpu_hour_usd == 0.3333
    assert rounded.checkpoint_storage_usd == 0.84
    assert rounded.billed_hours == 1 / 3
    assert cost.total_usd == 0.3 * 9  # the input is a frozen value, left as it was


def test_reason_data_is_rounded_by_key_and_other_numbers_are_left_alone() -> None:
    reason = Reason(
        code="x",
        data={"usd": 0.052199999999999996, "budget_usd": 99.999, "fraction": 1 / 3, "n": 7},
    )
    assert round_money([reason])[0].data == {
        "usd": 0.0522,
        "budget_usd": 100.0,
        "fraction": 1 / 3,
        "n": 7,
    }
    unchanged = Reason(code="y", data={"bytes": 10})
    assert round_money(unchanged) is unchanged


@pytest.mark.parametrize(
    ("name", "places"),
    [
        ("total_usd", 2),
        ("checkpoint_storage_usd", 2),
        ("price_per_hour_usd", 4),
        ("spot_price_per_hour_usd", 4),
        ("per_million_tokens_usd", 4),
        ("usd", 4),
        ("tokens_per_second", None),
    ],
)
def test_precision_follows_the_name(name: str, places: int | None) -> None:
    assert decimals_for(name) == places


def _usd_values(node: Any, key: str = "") -> list[tuple[str, float]]:
    if isinstance(node, dict):
        return [pair for k, v in node.items() for pair in _usd_values(v, k)]
    if isinstance(node, list):
        return [pair for item in node for pair in _usd_values(item, key)]
    if isinstance(node, float) and decimals_for(key) is not None:
        return [(key, node)]
    return []


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_answers_carry_no_float_noise_in_money(
    client: TestClient,  # type: ignore[type-arg]
    example: Path,
) -> None:
    body = json.loads(example.read_text(encoding="utf-8"))
    answer = client.post("/v1/recommendations", json=body).json()
    values = _usd_values(answer)
    assert len(values) > 10
    for key, value in values:
        places = decimals_for(key)
        assert places is not None
        assert round(value, places) == value, (key, value)
    ranks = [rec["rank"] for rec in answer["recommendations"]]
    assert ranks == sorted(ranks)
