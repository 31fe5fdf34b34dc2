"""Objectives, deterministic ordering, top-k and the Pareto set.

Objectives (smaller is better):

* ``total_cost``: the whole job's billed cost (training without ``tokens``: cost per
  million tokens, the same order up to billing rounding);
* ``time_to_result``: training time to result; serving: request latency (first token plus the
  output tokens);
* ``price_per_hour``: the deployment's price per hour (instance price x instances);
* ``cost_per_million_tokens``: USD per million tokens trained or generated.

Ties break, in order, on: total cost, time, fewer GPUs, on-demand before spot, then provider,
instance type, region and zone names (ascending). The order is total: two candidates only
compare equal when they are the same offer and the same market.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import NDArray

from gpu_advisor.core.spec import Objective

FloatArray = NDArray[np.float64]


class Candidates:
    """Feasible (offer, market, option) candidates as columns, one entry each.

    Attributes:
        offer: offer position in the index.
        spot: 1 for spot, 0 for on-demand.
        option: chosen plan option of the offer's group.
        gpus, name_rank: ordering keys.
        total_usd, time_hours, price_per_hour_usd, per_million_usd, latency_seconds: value
            columns (NaN where not defined), given or fetched on first use from ``fetch`` --
            a request reads only the columns its objective and tie-breaks need.
    """

    _COLUMNS = (
        "total_usd",
        "time_hours",
        "price_per_hour_usd",
        "per_million_usd",
        "latency_seconds",
    )

    def __init__(
        self,
        *,
        offer: NDArray[np.intp],
        spot: NDArray[np.int64],
        option: NDArray[np.intp],
        gpus: NDArray[np.int64],
        name_rank: NDArray[np.int64],
        fetch: Callable[[str], FloatArray] | None = None,
        **columns: FloatArray,
    ) -> None:
        self.offer = offer
        self.spot = spot
        self.option = option
        self.gpus = gpus
        self.name_rank = name_rank
        self._fetch = fetch
        self._columns: dict[str, FloatArray] = dict(columns)

    def column(self, name: str) -> FloatArray:
        """A value column (see the class docstring)."""
        found = self._columns.get(name)
        if found is None:
            if self._fetch is None:
                raise KeyError(name)
            found = self._fetch(name)
            self._columns[name] = found
        return found

    @property
    def total_usd(self) -> FloatArray:
        return self.column("total_usd")

    @property
    def time_hours(self) -> FloatArray:
        return self.column("time_hours")

    @property
    def price_per_hour_usd(self) -> FloatArray:
        return self.column("price_per_hour_usd")

    @property
    def per_million_usd(self) -> FloatArray:
        return self.column("per_million_usd")

    @property
    def latency_seconds(self) -> FloatArray:
        return self.column("latency_seconds")

    def __len__(self) -> int:
        return len(self.offer)


def objective_column(objective: Objective, *, training: bool) -> str:
    """The value column an objective ranks by (``total_cost`` falls back to the cost per
    million tokens where the total is undefined)."""
    match objective:
        case "total_cost":
            return "total_usd"
        case "time_to_result":
            return "time_hours" if training else "latency_seconds"
        case "price_per_hour":
            return "price_per_hour_usd"
        case "cost_per_million_tokens":
            return "per_million_usd"


def objective_values(
    objective: Objective,
    *,
    training: bool,
    total_usd: FloatArray,
    time_hours: FloatArray,
    price_per_hour_usd: FloatArray,
    per_million_usd: FloatArray,
    latency_seconds: FloatArray,
) -> FloatArray:
    """The objective's value per candidate (smaller is better)."""
    match objective:
        case "total_cost":
            return np.where(np.isnan(total_usd), per_million_usd, total_usd)
        case "time_to_result":
            return time_hours if training else latency_seconds
        case "price_per_hour":
            return price_per_hour_usd
        case "cost_per_million_tokens":
            return per_million_usd


def _nan_last(values: FloatArray) -> FloatArray:
    return np.where(np.isnan(values), np.inf, values)


def top_k(primary: FloatArray, candidates: Candidates, k: int) -> list[int]:
    """Positions of the best ``k`` candidates, in rank order (see the module docstring).

    Only candidates whose primary value is within the ``k`` smallest (ties included) are
    sorted on the full key, so the cost is O(n) plus the sort of a small set.
    """
    n = len(candidates)
    if n == 0:
        return []
    key = _nan_last(primary)
    if n > k:
        kth = np.partition(key, k - 1)[k - 1]
        pool = np.flatnonzero(key <= kth)
    else:
        pool = np.arange(n)
    order = np.lexsort(
        (
            candidates.name_rank[pool],
            candidates.spot[pool],
            candidates.gpus[pool],
            _nan_last(candidates.time_hours[pool]),
            _nan_last(candidates.total_usd[pool]),
            key[pool],
        )
    )
    return [int(i) for i in pool[order[:k]]]


def pareto_front(
    cost: Sequence[float] | FloatArray, time: Sequence[float] | FloatArray
) -> list[int]:
    """Indices of the points no other point dominates, ordered by cost then time.

    Point ``a`` dominates ``b`` when ``cost_a <= cost_b`` and ``time_a <= time_b`` with at
    least one strict. Equal points do not dominate each other, so duplicates are all kept.
    NaN points are ignored. O(n log n).
    """
    c = np.asarray(cost, dtype=np.float64)
    t = np.asarray(time, dtype=np.float64)
    valid = np.flatnonzero(~(np.isnan(c) | np.isnan(t)))
    if valid.size == 0:
        return []
    # Exact pre-filter: a point costlier than the cheapest of the fastest points, or slower
    # than the fastest of the cheapest points, is dominated by that point.
    cv, tv = c[valid], t[valid]
    fastest = tv == tv.min()
    cheapest = cv == cv.min()
    valid = valid[(cv <= cv[fastest].min()) & (tv <= tv[cheapest].min())]
    order = valid[np.lexsort((t[valid], c[valid]))]
    cs, ts = c[order], t[order]
    _, block_start = np.unique(cs, return_index=True)
    starts = np.zeros(cs.size, dtype=np.intp)
    starts[block_start] = block_start
    starts = np.maximum.accumulate(starts)  # first index of each point's equal-cost block
    running_min = np.minimum.accumulate(ts)
    before = np.where(starts > 0, running_min[np.maximum(starts - 1, 0)], np.inf)
    keep = (ts == ts[starts]) & (ts < before)
    return [int(i) for i in order[keep]]
