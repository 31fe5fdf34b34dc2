"""Objectives, deterministic ordering, top-k and the Pareto set.

Objectives (smaller is better):

* ``total_cost``: the whole job's billed cost (training without ``tokens``: cost per
  million tokens, the same order up to billing rounding);
* ``time_to_result``: training time to result; serving: request latency (first token plus the
  output tokens);
* ``price_per_hour``: the deployment's price per hour (instance price x instances);
* ``cost_per_million_tokens``: USD per million tokens trained or generated.

Ties break, in order, on: fewer nodes (instances: one 8-GPU node before eight 1-GPU nodes,
multi-node only where it buys something the objective counts), fewer GPUs paid for, total
cost, time, on-demand before spot, then provider, instance type, region and zone names
(ascending). The order is total: two candidates only compare equal when they are the same
offer and the same market.

Recommendations are distinct choices -- (provider, instance type, market) -- ranked by their
best candidate in this order (:func:`top_choices`); the choice's other regions and zones follow
the same order (:func:`same_choice`).
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
        name_rank: the name tie-break (offer order by provider, instance, region, zone), per
            candidate; or, as ``names``, per offer of the index (read where needed).
        choice: equal for candidates of the same provider, instance type and market (their
            regions and zones differ); each candidate its own choice when not given.
        cell / price: optional; candidates of one cell share every value but the price-scaled
            ones (cost, price per hour, per million tokens), which are their ``price`` times
            the cell's coefficient (:func:`pareto_positions` uses it).
        gpus (paid for), nodes, total_usd, time_hours, price_per_hour_usd, per_million_usd,
            latency_seconds:
            value columns (NaN where not defined), given, or fetched from ``fetch`` -- whole
            (:meth:`column`) or at some positions (:meth:`take`): a request reads whole only
            the columns its objective and the Pareto set need.
    """

    def __init__(
        self,
        *,
        offer: NDArray[np.intp],
        spot: NDArray[np.int64],
        option: NDArray[np.intp],
        name_rank: NDArray[np.int64] | None = None,
        names: NDArray[np.int64] | None = None,
        choice: NDArray[np.int64] | None = None,
        cell: NDArray[np.intp] | None = None,
        price: FloatArray | None = None,
        fetch: Callable[[str, NDArray[np.intp] | None], FloatArray] | None = None,
        **columns: FloatArray,
    ) -> None:
        self.offer = offer
        self.spot = spot
        self.option = option
        self._name_rank = name_rank
        self._names = names
        self.choice = choice if choice is not None else np.arange(len(offer), dtype=np.int64)
        self.cell = cell
        self.price = price
        self._fetch = fetch
        self._columns: dict[str, FloatArray] = {
            name: np.asarray(values, dtype=np.float64) for name, values in columns.items()
        }

    def column(self, name: str) -> FloatArray:
        """A whole value column (see the class docstring)."""
        found = self._columns.get(name)
        if found is None:
            if self._fetch is None:
                raise KeyError(name)
            found = self._fetch(name, None)
            self._columns[name] = found
        return found

    def take(self, name: str, at: NDArray[np.intp]) -> FloatArray:
        """A value column at candidate positions ``at`` (without fetching it whole)."""
        found = self._columns.get(name)
        if found is not None:
            return found[at]
        if self._fetch is None:
            raise KeyError(name)
        return self._fetch(name, at)

    def name_rank(self, at: NDArray[np.intp]) -> NDArray[np.int64]:
        """The name tie-break of the candidates at positions ``at``."""
        if self._name_rank is not None:
            return self._name_rank[at]
        if self._names is None:
            raise KeyError("name_rank")
        return self._names[self.offer[at]]

    def value(self, name: str, position: int) -> float:
        """One candidate's value of ``name``."""
        return float(self.take(name, np.array([position], dtype=np.intp))[0])

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


def _ordered(
    positions: NDArray[np.intp], key: FloatArray, candidates: Candidates
) -> NDArray[np.intp]:
    """``positions`` in rank order: ``key`` (the primary value at each of ``positions``, NaN
    already last), then the tie-breaks of the module docstring."""
    return positions[
        np.lexsort(
            (
                candidates.name_rank(positions),
                candidates.spot[positions],
                _nan_last(candidates.take("time_hours", positions)),
                _nan_last(candidates.take("total_usd", positions)),
                candidates.take("gpus", positions),
                candidates.take("nodes", positions),
                key,
            )
        )
    ]


def _smallest(key: FloatArray, among: NDArray[np.intp], m: int) -> NDArray[np.intp]:
    """The positions in ``among`` whose key is within the ``m`` smallest (ties included)."""
    if among.size <= m:
        return among
    values = key[among]
    kth = np.partition(values, m - 1)[m - 1]
    return np.asarray(among[values <= kth], dtype=np.intp)


def top_k(primary: FloatArray, candidates: Candidates, k: int) -> list[int]:
    """Positions of the best ``k`` candidates, in rank order (see the module docstring).

    Only candidates whose primary value is within the ``k`` smallest (ties included) are
    sorted on the full key, so the cost is O(n) plus the sort of a small set.
    """
    n = len(candidates)
    if n == 0 or k <= 0:
        return []
    key = _nan_last(primary)
    pool = _smallest(key, np.arange(n), k)
    return [int(i) for i in _ordered(pool, key[pool], candidates)[:k]]


def top_choices(primary: FloatArray, candidates: Candidates, k: int) -> list[int]:
    """The best candidate of each of the best ``k`` distinct choices, in rank order.

    A choice ranks by its best candidate (module docstring order), whose primary value is the
    choice's least. So only the candidates holding their choice's least value, among the
    choices whose least is within the ``k`` smallest, are sorted on the full key: O(n) plus
    the sort of a small set.
    """
    n = len(candidates)
    if n == 0 or k <= 0:
        return []
    key = _nan_last(primary)
    choice = candidates.choice
    least = np.full(int(choice.max()) + 1, np.inf)
    np.minimum.at(least, choice, key)
    present = np.zeros(least.size, dtype=bool)
    present[choice] = True
    values = least[present]
    kth = values.max() if values.size <= k else np.partition(values, k - 1)[k - 1]
    pool = np.flatnonzero((key <= kth) & (key == least[choice]))
    ordered = _ordered(pool, key[pool], candidates)
    _, first = np.unique(choice[ordered], return_index=True)
    return [int(i) for i in ordered[np.sort(first)][:k]]


def same_choice(
    primary: FloatArray, candidates: Candidates, position: int, limit: int
) -> tuple[list[int], int]:
    """The other candidates of ``position``'s choice (other regions and zones), best first, at
    most ``limit``; and how many there are."""
    others = np.flatnonzero(candidates.choice == candidates.choice[position])
    others = others[others != position]
    if others.size == 0 or limit <= 0:
        return [], int(others.size)
    key = _nan_last(primary[others])  # the key at ``others`` only
    near = _smallest(key, np.arange(others.size), limit)
    shown = _ordered(others[near], key[near], candidates)[:limit]
    return [int(i) for i in shown], int(others.size)


def pareto_positions(candidates: Candidates, time: str) -> list[int]:
    """:func:`pareto_front` of the candidates on (``total_usd``, ``time``), by position.

    Where the candidates carry cells, only each cell's cheapest candidates are compared: the
    others have the same time and a higher cost, so they are dominated.
    """
    if candidates.cell is None or candidates.price is None or len(candidates) == 0:
        return pareto_front(candidates.total_usd, candidates.column(time))
    cell, price = candidates.cell, candidates.price
    cheapest = np.full(int(cell.max()) + 1, np.inf)
    np.minimum.at(cheapest, cell, price)
    keep = np.flatnonzero(price == cheapest[cell])
    front = pareto_front(candidates.take("total_usd", keep), candidates.take(time, keep))
    return [int(keep[i]) for i in front]


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
