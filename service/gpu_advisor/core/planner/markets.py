"""Price offers in one market (on-demand or spot), vectorised over pricing classes.

Offers of one pricing class (same planning group, provider and billing rule --
:attr:`~gpu_advisor.core.planner.index.RecommendationIndex.class_of`) differ only in price,
and every cost is the price times a coefficient of the plan option: total = price x billed
hours x nodes, deployment price = price x nodes, cost per million tokens = price x a rate
term. So:

1. per class and option (a small ``(classes, options)`` table): expected duration (spot: with
   interruptions), billed hours, cost coefficients, the deadline check, and the options'
   order by the objective (ties to fewer nodes) -- none of which depends on the price;
2. per offer: the first option in that order whose price-dependent checks pass
   (``price <= budget / coefficient`` and ``price <= max_price / nodes``), then its values.

Each request therefore costs a few vector operations over the offers, not a Python loop.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from msgspec import Struct
from numpy.typing import NDArray

from gpu_advisor.core.planner.cost import (
    SECONDS_PER_HOUR,
    billed_seconds,
    spot_serving_seconds,
    spot_training_seconds,
)
from gpu_advisor.core.spec import Constraints, Objective

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]

NUMERIC_CODES: tuple[str, ...] = ("over_max_price", "past_deadline", "over_budget")
_FAR = 1e300  # stands in for an undefined objective so feasibility is tracked separately


class OptionTable(Struct, frozen=True, kw_only=True):
    """Per group (rows) and option (columns) planning results, as arrays ``(groups, K)``.

    Attributes:
        valid: the option exists.
        nodes / gpus: instances used and the GPUs they hold (paid for, idle ones included).
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


PRICE_SCALED = frozenset({"total_usd", "price_per_hour_usd", "per_million_usd"})
"""Table values that are coefficients of the instance price (the value is price x table)."""


class MarketResult(Struct, frozen=True, kw_only=True):
    """One market's outcome for the priced offers.

    Per offer (arrays over the priced subset): ``feasible`` (some option passes every
    numeric check), ``option`` (the chosen option, or the objective's best for infeasible
    offers), ``code`` (0 when feasible, else 1 + index into :data:`NUMERIC_CODES`) and
    ``price`` (the market's instance price); the offer's (class, option) is the flat position
    ``offer_class x width + option`` in the per-class tables.

    Per class and option, flattened (``tables``): ``total_usd``, ``price_per_hour_usd`` and
    ``per_million_usd`` as coefficients of the price; ``time_hours``, ``latency_seconds``,
    ``tokens_per_second``, ``expected_seconds``, ``interruptions``, ``gpus`` (paid for) and
    ``nodes`` as they are.
    ``least`` holds per class the smallest coefficient / value over valid options.
    Values are computed for the offers that need them with :meth:`values`.
    """

    feasible: NDArray[np.bool_]
    option: IntArray
    code: IntArray
    price: FloatArray
    offer_class: IntArray
    tables: dict[str, FloatArray]
    least: dict[str, FloatArray]
    valid: NDArray[np.bool_]
    """Per class and option (flattened like ``tables``): the option exists."""
    width: int
    """Options per class (``tables`` rows are ``class * width + option``)."""

    def option_values(self, name: str, at: IntArray) -> FloatArray:
        """``name`` for every option of the priced offers at ``at``: shape (offers, width),
        price-scaled like :meth:`values`; NaN where the option does not exist."""
        cells = self.offer_class[at][:, None] * self.width + np.arange(self.width)
        found = np.where(self.valid[cells], self.tables[name][cells], np.nan)
        if name in PRICE_SCALED:
            found = found * self.price[at][:, None]
        return np.asarray(found, dtype=np.float64)

    def values(self, name: str, at: IntArray | None = None) -> FloatArray:
        """``name`` for the priced offers at positions ``at`` (all when None)."""
        if at is None:
            cells = self.offer_class * self.width + self.option
        else:
            cells = self.offer_class[at] * self.width + self.option[at]
        found = np.asarray(self.tables[name][cells], dtype=np.float64)
        if name in PRICE_SCALED:
            found = found * (self.price if at is None else self.price[at])
        return found

    def minimum(self, name: str, at: IntArray) -> FloatArray:
        """Least ``name`` over an offer's valid options (``total_usd``, ``time_hours`` or
        ``price_per_hour_usd``), for the priced offers at positions ``at``."""
        found = self.least[name][self.offer_class[at]]
        if name in PRICE_SCALED:
            found = found * self.price[at]
        return np.asarray(found, dtype=np.float64)


def _numeric_codes(
    price: FloatArray,
    coefficient: FloatArray,
    nodes: FloatArray,
    deadline_fail: NDArray[np.bool_],
    at: IntArray,
    constraints: Constraints,
) -> IntArray:
    """First failing numeric check at each offer's objective-best option (flat positions
    ``at``), in the order of :data:`NUMERIC_CODES` (1 = max price, 2 = deadline, 3 = budget);
    0 where none fails."""
    code = np.zeros(price.shape, dtype=np.intp)
    if constraints.budget_usd is not None:
        code = np.where(price * coefficient[at] > constraints.budget_usd, 3, code)
    code = np.where(deadline_fail[at], 2, code)
    if constraints.max_price_per_hour_usd is not None:
        code = np.where(price * nodes[at] > constraints.max_price_per_hour_usd, 1, code)
    return code


class PricingClasses(Struct, frozen=True, kw_only=True):
    """Per pricing class: its group, billing rule and per-node spot interruption rate."""

    group: IntArray
    increment_seconds: FloatArray
    minimum_seconds: FloatArray
    interruptions_per_hour: FloatArray


def _objective_key(
    objective: Objective,
    training: bool,
    coefficient: FloatArray,
    per_million: FloatArray,
    time_hours: FloatArray,
    latency: FloatArray,
    nodes: FloatArray,
) -> FloatArray:
    """Price-independent order of options (cost terms are coefficients of the price)."""
    match objective:
        case "total_cost":
            return np.where(np.isnan(coefficient), per_million, coefficient)
        case "time_to_result":
            return time_hours if training else latency
        case "price_per_hour":
            return nodes
        case "cost_per_million_tokens":
            return per_million


def price_market(
    *,
    market: Literal["on_demand", "spot"],
    training: bool,
    tokens: float | None,
    table: OptionTable,
    classes: PricingClasses,
    offer_class: IntArray,
    price_per_hour_usd: FloatArray,
    constraints: Constraints,
    objective: Objective,
) -> MarketResult:
    """Evaluate one market for offers of classes ``offer_class`` at ``price_per_hour_usd``
    (the market's instance price; NaN or inf where the offer has none)."""
    valid = table.valid[classes.group]  # (C, K)
    nodes = table.nodes[classes.group].astype(np.float64)
    base = table.base_seconds[classes.group]
    rate = table.tokens_per_second[classes.group]
    latency = table.latency_seconds[classes.group]
    per_node = classes.interruptions_per_hour[:, None]
    if market == "spot" and training:
        expected, interruptions = spot_training_seconds(
            base, per_node * nodes, table.checkpoint_write_seconds[classes.group]
        )
    elif market == "spot":
        expected, interruptions = spot_serving_seconds(base, per_node * nodes)
    else:
        expected, interruptions = base, np.zeros_like(base)
    billed = billed_seconds(
        expected, classes.increment_seconds[:, None], classes.minimum_seconds[:, None]
    )
    coefficient = billed / SECONDS_PER_HOUR * nodes  # total_usd = price x coefficient
    time_hours = expected / SECONDS_PER_HOUR
    with np.errstate(invalid="ignore", divide="ignore"):
        effective_rate = np.where(expected > 0, rate * base / expected, rate)
        effective_rate = np.where(np.isnan(effective_rate), rate, effective_rate)
        if training and tokens:
            per_million = coefficient / tokens * 1e6
        else:
            per_million = nodes / (effective_rate * SECONDS_PER_HOUR) * 1e6
        deadline_fail = np.zeros(valid.shape, dtype=bool)
        if training and constraints.deadline_hours is not None:
            deadline_fail = np.nan_to_num(time_hours, nan=0.0) > constraints.deadline_hours
        threshold = np.full(valid.shape, np.inf)
        if constraints.budget_usd is not None:
            threshold = np.where(
                np.isnan(coefficient), np.inf, constraints.budget_usd / coefficient
            )
        if constraints.max_price_per_hour_usd is not None:
            threshold = np.minimum(threshold, constraints.max_price_per_hour_usd / nodes)
    key = _objective_key(objective, training, coefficient, per_million, time_hours, latency, nodes)
    key = np.where(valid, np.nan_to_num(key, nan=_FAR), np.inf)
    order = np.argsort(key, axis=1, kind="stable")  # ties: fewer nodes (columns ascend)
    rows = np.arange(valid.shape[0])[:, None]
    usable_sorted = (valid & ~deadline_fail)[rows, order]
    threshold_sorted = threshold[rows, order]

    price = price_per_hour_usd
    cls = offer_class
    width = valid.shape[1]
    class_rows = np.arange(valid.shape[0])
    usable: NDArray[np.bool_] = np.asarray(usable_sorted.any(axis=1))
    best_option = order[:, 0]  # the objective's best option of each class
    deadline_at_best = deadline_fail[class_rows, best_option]
    if constraints.budget_usd is None and constraints.max_price_per_hour_usd is None:
        # No price-dependent check: every offer of a class takes the class's first usable
        # option, so the per-offer arrays are one look-up each.
        class_option = np.where(
            usable, order[class_rows, np.argmax(usable_sorted, axis=1)], best_option
        )
        class_code = np.where(
            usable | ~deadline_at_best, 0, NUMERIC_CODES.index("past_deadline") + 1
        )
        feasible = usable[cls]
        option = class_option[cls]
        code = class_code[cls]
    else:
        # First option, in objective order, whose price-dependent checks pass (the price is
        # at most the option's ceiling; -inf where the option is unusable): column by column
        # over the offers still undecided -- most pass at the first.
        ceilings = np.where(usable_sorted, threshold_sorted, -np.inf)
        first = np.full(cls.shape, width, dtype=np.intp)
        pending = np.arange(cls.size)
        for k in range(width):
            passed = price[pending] <= ceilings[:, k][cls[pending]]
            first[pending[passed]] = k
            pending = pending[~passed]
            if not pending.size:
                break
        feasible = first < width
        best = best_option[cls]
        option = np.where(feasible, order.ravel()[cls * width + np.minimum(first, width - 1)], best)
        code = np.zeros(cls.shape, dtype=np.intp)
        bad = np.flatnonzero(~feasible)
        if bad.size:
            with np.errstate(invalid="ignore"):
                code[bad] = _numeric_codes(
                    price[bad],
                    coefficient.ravel(),
                    nodes.ravel(),
                    deadline_fail.ravel(),
                    cls[bad] * width + best[bad],
                    constraints,
                )

    def least(values: FloatArray) -> FloatArray:
        return np.asarray(
            np.where(valid & ~np.isnan(values), values, np.inf).min(axis=1), dtype=np.float64
        )

    return MarketResult(
        feasible=feasible,
        option=np.asarray(option, dtype=np.intp),
        code=np.asarray(code, dtype=np.intp),
        price=price,
        offer_class=cls,
        tables={
            "total_usd": coefficient.ravel(),
            "price_per_hour_usd": nodes.ravel(),
            "per_million_usd": per_million.ravel(),
            "time_hours": time_hours.ravel(),
            "latency_seconds": latency.ravel(),
            "tokens_per_second": effective_rate.ravel(),
            "expected_seconds": expected.ravel(),
            "interruptions": interruptions.ravel(),
            "gpus": table.gpus[classes.group].astype(np.float64).ravel(),
            "nodes": nodes.ravel(),
        },
        least={
            "total_usd": least(coefficient),
            "time_hours": least(time_hours),
            "price_per_hour_usd": least(nodes),
        },
        valid=valid.ravel(),
        width=width,
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
