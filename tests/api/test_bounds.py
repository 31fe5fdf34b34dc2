"""Every numeric request field has a finite, documented bound, and every accepted value -- the
bounds themselves included -- is answered without a float64 overflow: a 200 or a 422, never a
RuntimeWarning (pytest runs with warnings as errors, and the marker below says so here too: a
numpy overflow inside the app becomes an exception and a 500). A value just outside a bound
is a 400 naming the field.

The tester's cases: ``tokens: 1e-300`` answered 200 with a per-million-tokens price of 1.1e302
USD, ``budget_usd: 1e308`` overflowed ``budget / coefficient`` in the market evaluation, and
``time_to_result`` with tiny tokens overflowed a price product in the ranking.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest
from litestar.testing import TestClient

from tests.api.answers import body_of, field_error

pytestmark = pytest.mark.filterwarnings("error")

TINY = sys.float_info.min * sys.float_info.epsilon  # 5e-324, the smallest positive float
PRESET = {"preset": "meta-llama/Llama-3.1-8B"}

# the bounds, written out (not imported) so that a changed bound is a visible test change
MAX_TOKENS = 1e16
MIN_MFU = 0.01
MAX_PRICE_PER_HOUR = 1e7
MAX_BUDGET = 1e12
MAX_HOURS = 1e6


def _training(**fields: Any) -> dict[str, Any]:
    return {"kind": "training", "method": "qlora", **fields}


# --- extreme but allowed ----------------------------------------------------------------

HIGH_CONSTRAINTS = {
    "max_price_per_hour_usd": MAX_PRICE_PER_HOUR,
    "budget_usd": MAX_BUDGET,
    "deadline_hours": MAX_HOURS,
    "max_gpus": 100_000,
    "max_nodes": 1024,
}
LOW_CONSTRAINTS = {
    "max_price_per_hour_usd": TINY,
    "budget_usd": TINY,
    "deadline_hours": TINY,
    "max_gpus": 1,
    "max_nodes": 1,
    "min_headroom_fraction": 0.99,
}
# one optimizer step at the defaults: sequence_length 2,048 x micro_batch_size 1
ONE_STEP = 2048.0
TRAINING_EXTREMES = [
    _training(tokens=MAX_TOKENS, mfu=MIN_MFU),
    _training(tokens=MAX_TOKENS, mfu=1.0),
    _training(tokens=ONE_STEP, mfu=MIN_MFU),
    _training(tokens=ONE_STEP, mfu=1.0),
]
INFERENCE_EXTREMES = [
    {"kind": "inference", "target_tokens_per_second": 1e12, "serving_hours": 87_600},
    {"kind": "inference", "target_tokens_per_second": TINY, "serving_hours": TINY},
    {"kind": "inference", "concurrency": 1_000_000, "gpu_memory_utilization": TINY},
]
OBJECTIVES = ["total_cost", "time_to_result", "price_per_hour", "cost_per_million_tokens"]


@pytest.mark.parametrize("objective", OBJECTIVES)
@pytest.mark.parametrize("constraints", [HIGH_CONSTRAINTS, LOW_CONSTRAINTS], ids=["high", "low"])
@pytest.mark.parametrize("workload", TRAINING_EXTREMES + INFERENCE_EXTREMES)
def test_recommendations_at_the_bounds_do_not_overflow(
    client: TestClient,  # type: ignore[type-arg]
    workload: dict[str, Any],
    constraints: dict[str, Any],
    objective: str,
) -> None:
    body = {
        "model": PRESET,
        "workload": workload,
        "constraints": {**constraints, "spot": "allow"},
        "objective": objective,
        "top_k": 100,
    }
    answer = body_of(client.post("/v1/recommendations", json=body), 200, 422)
    for rec in answer.get("recommendations", []):
        for key in ("total_usd", "per_million_tokens_usd", "price_per_hour_usd"):
            value = rec["cost"].get(key)
            assert value is None or value < 1e300, (key, value)


def test_the_largest_model_at_the_largest_run_does_not_overflow(
    client: TestClient,  # type: ignore[type-arg]
) -> None:
    body = {
        "model": {"parameters": 1e14},
        "workload": _training(method="full", tokens=MAX_TOKENS, mfu=MIN_MFU),
        "constraints": HIGH_CONSTRAINTS,
        "objective": "time_to_result",
    }
    body_of(client.post("/v1/recommendations", json=body), 200, 422)


@pytest.mark.parametrize(
    ("budget", "deadline"), [(MAX_BUDGET, MAX_HOURS), (TINY, TINY)], ids=["high", "low"]
)
@pytest.mark.parametrize("workload", [TRAINING_EXTREMES[0], TRAINING_EXTREMES[3]])
def test_check_at_the_bounds_does_not_overflow(
    client: TestClient,  # type: ignore[type-arg]
    workload: dict[str, Any],
    budget: float,
    deadline: float,
) -> None:
    body = {
        "model": PRESET,
        "workload": workload,
        "target": {"gpu": "H100", "gpu_count": 8, "nodes": 1024},
        "budget_usd": budget,
        "deadline_hours": deadline,
        "min_headroom_fraction": 0.99,
    }
    body_of(client.post("/v1/check", json=body), 200, 422)


@pytest.mark.parametrize("workload", [TRAINING_EXTREMES[0], INFERENCE_EXTREMES[0]])
def test_estimate_at_the_bounds_does_not_overflow(
    client: TestClient,  # type: ignore[type-arg]
    workload: dict[str, Any],
) -> None:
    for hardware in (None, {"gpu": "H100", "gpu_count": 8, "nodes": 10_000}):
        body: dict[str, Any] = {"model": PRESET, "workload": workload}
        if hardware is not None:
            body["hardware"] = hardware
        body_of(client.post("/v1/estimate", json=body), 200, 422)


# --- just outside: a 400 naming the field --------------------------------------------------


@pytest.mark.parametrize(
    ("workload", "field"),
    [
        (_training(tokens=1e-300), "workload.tokens"),
        (_training(tokens=0.5), "workload.tokens"),
        (_training(tokens=0.999), "workload.tokens"),
        (_training(tokens=1.01e16), "workload.tokens"),
        (_training(tokens=1e9, mfu=0.0099), "workload.mfu"),
        (_training(tokens=1e9, mfu=1.01), "workload.mfu"),
        (_training(lora_alpha=1.01e6), "workload.lora_alpha"),
    ],
)
def test_training_fields_outside_their_bounds_are_a_400(
    client: TestClient,  # type: ignore[type-arg]
    workload: dict[str, Any],
    field: str,
) -> None:
    body = {"model": PRESET, "workload": workload, "top_k": 1}
    field_error(client.post("/v1/recommendations", json=body), field)


@pytest.mark.parametrize(
    ("constraints", "field"),
    [
        ({"budget_usd": 1e308}, "constraints.budget_usd"),
        ({"budget_usd": 1.000001e12}, "constraints.budget_usd"),
        ({"budget_usd": 0}, "constraints.budget_usd"),
        ({"max_price_per_hour_usd": 1.000001e7}, "constraints.max_price_per_hour_usd"),
        ({"deadline_hours": 1.000001e6}, "constraints.deadline_hours"),
        ({"max_gpus": 100_001}, "constraints.max_gpus"),
        ({"max_nodes": 1025}, "constraints.max_nodes"),
        ({"min_headroom_fraction": 1.0}, "constraints.min_headroom_fraction"),
    ],
)
def test_constraints_outside_their_bounds_are_a_400(
    client: TestClient,  # type: ignore[type-arg]
    constraints: dict[str, Any],
    field: str,
) -> None:
    body = {
        "model": PRESET,
        "workload": _training(tokens=1e9),
        "constraints": constraints,
    }
    field_error(client.post("/v1/recommendations", json=body), field)


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"budget_usd": 1e308}, "budget_usd"),
        ({"budget_usd": 1.000001e12}, "budget_usd"),
        ({"deadline_hours": 1.000001e6}, "deadline_hours"),
    ],
)
def test_check_budget_and_deadline_outside_their_bounds_are_a_400(
    client: TestClient,  # type: ignore[type-arg]
    extra: dict[str, Any],
    field: str,
) -> None:
    body = {
        "model": PRESET,
        "workload": _training(tokens=1e9),
        "target": {"gpu": "H100", "gpu_count": 8},
        **extra,
    }
    field_error(client.post("/v1/check", json=body), field)


# --- tokens: at least one optimizer step ---------------------------------------------------


@pytest.mark.parametrize(
    ("workload", "step"),
    [
        # sequence_length 4,096 x micro_batch_size 4 = 16,384 tokens
        (_training(sequence_length=4096, micro_batch_size=4, tokens=16_383), "16,384"),
        # sequence_length 2,048 x global_batch_size 64 = 131,072 tokens
        (_training(micro_batch_size=4, global_batch_size=64, tokens=131_071), "131,072"),
    ],
)
def test_tokens_below_one_optimizer_step_are_a_422(
    client: TestClient,  # type: ignore[type-arg]
    workload: dict[str, Any],
    step: str,
) -> None:
    body = {"model": PRESET, "workload": workload, "top_k": 1}
    message = field_error(client.post("/v1/recommendations", json=body), "workload.tokens", 422)
    assert f"raise tokens to at least {step}" in message
    # exactly one step is accepted
    exact = {**workload, "tokens": float(step.replace(",", ""))}
    body_of(client.post("/v1/recommendations", json={**body, "workload": exact}), 200)
