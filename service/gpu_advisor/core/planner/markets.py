"""Price every offer of the feasible groups in one market (on-demand or spot), vectorised.

For each offer and each plan option of its group (node counts), compute the expected
duration (spot: with interruptions), the billed cost, the deployment's hourly price, the cost
per million tokens and the numeric constraint checks (max price, deadline, budget); then pick,
per offer, the option that best serves the objective among those that pass. Arrays have shape
``(options, offers)``; nothing loops over offers in Python.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from msgspec import Struct
from numpy.typing import NDArray

from gpu_advisor.core.planner.cost import (
    SECONDS_PER_HOUR,
    billed_seconds,
    cost_per_million_tokens,
    spot_serving_seconds,
    spot_training_seconds,
)
from gpu_advisor.core.planner.ranking import objective_values
from gpu_advisor.core.spec import Constraints, Objective

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]

NUMERIC_CODES: tuple[str, ...] = ("over_max_price", "past_deadline", "over_budget")
_FAR = 1e300  # stands in for an undefined objective so feasibility is tracked separately


class OptionTable(Struct, frozen=True, kw_only=True):
    """Per group (rows) and option (columns) planning results, as arrays ``(groups, K)``.

    Attributes:
        valid: the option exists.
        nodes / gpus: instances and GPUs used.
        base_seconds: uninterrupted duration (training time, NaN without ``tokens``;
            serving: serving_hours).
        tokens_per_second: whole-deployment token rate.
        latency_seconds: serving request latency (NaN for training).
        checkpoint_write_seconds: time to write one checkpoint (training).
    """

    valid: NDArray[np.bool_]
    nodes: NDArray[np.int64]
    gpus: NDArray[np.int64]
    base_seconds: FloatArray
    tokens_per_second: FloatArray
    latency_seconds: FloatArray
    checkpoint_write_seconds: FloatArray


class MarketResult(Struct, frozen=True, kw_only=True):
    """One market's outcome for the priced offers (arrays of the priced subset's length).

    Attributes:
        feasible: some option passes every numeric check.
        option: chosen option (feasible offers) or the best-objective option (others).
        code: 0 when feasible, else 1 + index into :data:`NUMERIC_CODES`.
        total_usd, time_hours, price_per_hour_usd, per_million_usd, latency_seconds,
        tokens_per_second, expected_seconds, interruptions, gpus: values of ``option``.
        min_total_usd / min_time_hours / min_price_per_hour_usd: least over valid options
            (for "costs at least ..." sentences and suggestions).
    """

    feasible: NDArray[np.bool_]
    option: IntArray
    code: IntArray
    total_usd: FloatArray
    time_hours: FloatArray
    price_per_hour_usd: FloatArray
    per_million_usd: FloatArray
    latency_seconds: FloatArray
    tokens_per_second: FloatArray
    expected_seconds: FloatArray
    interruptions: FloatArray
    gpus: NDArray[np.int64]
    min_total_usd: FloatArray
    min_time_hours: FloatArray
    min_price_per_hour_usd: FloatArray


def price_market(
    *,
    market: Literal["on_demand", "spot"],
    training: bool,
    tokens: float | None,
    table: OptionTable,
    groups: IntArray,
    price_per_hour_usd: FloatArray,
    increment_seconds: FloatArray,
    minimum_seconds: FloatArray,
    interruptions_per_hour: FloatArray,
    constraints: Constraints,
    objective: Objective,
) -> MarketResult:
    """Evaluate one market for offers whose groups are ``groups`` (one entry per offer).

    Args:
        price_per_hour_usd: the market's instance price per offer (spot or on-demand).
        interruptions_per_hour: per-node spot interruption rate per offer (unused on demand).
    """
    valid = table.valid[groups].T  # (K, n)
    nodes = table.nodes[groups].T.astype(np.float64)
    base = table.base_seconds[groups].T
    rate = table.tokens_per_second[groups].T
    if market == "spot":
        if training:
            expected, interruptions = spot_training_seconds(
                base, interruptions_per_hour * nodes, table.checkpoint_write_seconds[groups].T
            )
        else:
            expected, interruptions = spot_serving_seconds(base, interruptions_per_hour * nodes)
    else:
        expected, interruptions = base, np.zeros_like(base)
    deployment_price = price_per_hour_usd * nodes
    billed = billed_seconds(expected, increment_seconds, minimum_seconds)
    total = billed / SECONDS_PER_HOUR * deployment_price
    with np.errstate(invalid="ignore", divide="ignore"):
        effective_rate = np.where(expected > 0, rate * base / expected, rate)
        effective_rate = np.where(np.isnan(effective_rate), rate, effective_rate)
        if training and tokens:
            per_million = total / tokens * 1e6
        else:
            per_million = cost_per_million_tokens(deployment_price, effective_rate)
    time_hours = expected / SECONDS_PER_HOUR
    latency = table.latency_seconds[groups].T
    code = np.zeros(valid.shape, dtype=np.intp)
    checks: list[NDArray[np.bool_]] = []
    if constraints.max_price_per_hour_usd is not None:
        checks.append(deployment_price > constraints.max_price_per_hour_usd)
    else:
        checks.append(np.zeros(valid.shape, dtype=bool))
    if training and constraints.deadline_hours is not None:
        checks.append(np.nan_to_num(time_hours, nan=0.0) > constraints.deadline_hours)
    else:
        checks.append(np.zeros(valid.shape, dtype=bool))
    if constraints.budget_usd is not None:
        checks.append(np.nan_to_num(total, nan=0.0) > constraints.budget_usd)
    else:
        checks.append(np.zeros(valid.shape, dtype=bool))
    for position in range(len(NUMERIC_CODES) - 1, -1, -1):
        code = np.where(checks[position], position + 1, code)
    value = objective_values(
        objective,
        training=training,
        total_usd=total,
        time_hours=time_hours,
        price_per_hour_usd=deployment_price,
        per_million_usd=per_million,
        latency_seconds=latency,
    )
    value = np.nan_to_num(value, nan=_FAR)
    ok = valid & (code == 0)
    chosen_ok = np.argmin(np.where(ok, value, np.inf), axis=0)
    chosen_any = np.argmin(np.where(valid, value, np.inf), axis=0)
    feasible = ok.any(axis=0)
    option = np.where(feasible, chosen_ok, chosen_any)
    columns = np.arange(valid.shape[1])

    def pick(array: FloatArray) -> FloatArray:
        return np.asarray(array[option, columns], dtype=np.float64)

    def least(array: FloatArray) -> FloatArray:
        masked = np.where(valid & ~np.isnan(array), array, np.inf)
        return np.asarray(masked.min(axis=0), dtype=np.float64)

    return MarketResult(
        feasible=feasible,
        option=option.astype(np.intp),
        code=np.where(feasible, 0, code[option, columns]).astype(np.intp),
        total_usd=pick(total),
        time_hours=pick(time_hours),
        price_per_hour_usd=pick(deployment_price),
        per_million_usd=pick(per_million),
        latency_seconds=pick(latency),
        tokens_per_second=pick(effective_rate),
        expected_seconds=pick(expected),
        interruptions=pick(interruptions),
        gpus=table.gpus[groups].T[option, columns],
        min_total_usd=least(total),
        min_time_hours=least(time_hours),
        min_price_per_hour_usd=least(deployment_price),
    )


class Outcome(Struct, frozen=True, kw_only=True):
    """Every offer's verdict in one evaluation pass.

    Attributes:
        priced: offer positions whose group has plan options (sorted ascending).
        results: per market name, its :class:`MarketResult` over ``priced``.
        codes: per market, each offer's rejection code (0 = feasible), filters applied.
        unfiltered: per market, the code the offer would have without the
            gpu/provider/region filters (for "add provider X" suggestions).
        final_code: 0 when some allowed market is feasible, else the primary market's code.
        table: the option table the markets were priced from.
    """

    priced: IntArray
    results: dict[str, MarketResult]
    codes: dict[str, IntArray]
    unfiltered: dict[str, IntArray]
    final_code: IntArray
    table: OptionTable
