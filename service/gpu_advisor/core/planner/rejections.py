"""Rejected offers grouped by (reason code, GPU) with a sentence each, and -- when nothing
fits -- suggestions: which constraint to relax and what the nearest feasible option needs."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from gpu_advisor.core.planner.explain import REJECTION_CODES, rejection_order, render
from gpu_advisor.core.planner.markets import MarketResult, Outcome
from gpu_advisor.core.planner.ranking import objective_values
from gpu_advisor.core.planner.report import describe
from gpu_advisor.core.results import Reason, RejectedGroup, Suggestion

if TYPE_CHECKING:
    from gpu_advisor.core.planner.recommend import Evaluation

EXAMPLES_PER_GROUP = 3
CODE_OF = {name: i + 1 for i, name in enumerate(REJECTION_CODES)}
_STRUCTURAL = frozenset(
    {
        "unknown_gpu",
        "gpu_rate_unknown",
        "dtype_unsupported",
        "over_max_gpus",
        "over_max_nodes",
        "no_cluster_network",
        "tp_over_pcie",
        "insufficient_memory",
        "kv_pool_too_small",
        "context_exceeds_model",
        "target_over_concurrency",
    }
)
"""Codes decided per planning group (their data comes from the group's verdict)."""


def group_rejections(ev: Evaluation, outcome: Outcome) -> list[RejectedGroup]:
    """Rejected offers grouped by (code, GPU), each with a sentence and examples.

    Groups are listed technical reasons first, then constraint exclusions, the larger group
    first within each (:func:`~gpu_advisor.core.planner.explain.rejection_order`). A group's
    data and sentence describe its nearest miss -- the instance shape that came closest (the
    smallest memory shortfall, the fewest nodes or GPUs needed, the least price, time or cost)
    -- and the examples start with the first offer of that shape (name order: provider,
    instance type, region), then the group's first others by name.
    """
    index = ev.index
    codes = outcome.final_code
    named = codes[index.by_name]
    mask = named > 0
    rejected = index.by_name[mask]  # name order
    if rejected.size == 0:
        return []
    n_gpus = max(len(index.gpus), 1)
    combined = named[mask] * n_gpus + index.gpu_code_by_name[mask]
    # A stable sort keeps name order inside each (code, GPU) group; small integer keys sort
    # in linear time (radix) when they fit 16 bits.
    small = combined.astype(np.uint16) if combined.max() < 2**16 else combined
    order = np.argsort(small, kind="stable")
    rejected = rejected[order]
    counts_all = np.bincount(combined, minlength=(len(REJECTION_CODES) + 1) * n_gpus)
    keys = np.flatnonzero(counts_all)
    counts = counts_all[keys]
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    primary = ev.markets()[0]
    market = outcome.results.get(primary)
    structural, first = _structural_reasons(ev, named)
    groups: list[RejectedGroup] = []
    for key, start, count in zip(keys.tolist(), starts.tolist(), counts.tolist(), strict=True):
        code = REJECTION_CODES[key // n_gpus - 1]
        gpu = index.gpus[key % n_gpus]
        members = rejected[start : start + count]
        lead: int | None = None
        if code in _STRUCTURAL:
            data, lead = _structural_data(ev, structural.get((code, gpu), {}), first, gpu)
        else:
            data, at = _rejection_data(ev, outcome, market, code, gpu, members)
            lead = None if at is None else int(members[at])
        shown = [] if lead is None else [lead]
        shown += [m for m in members[: EXAMPLES_PER_GROUP + 1].tolist() if m != lead]
        groups.append(
            RejectedGroup(
                code=code,
                gpu=gpu,
                count=count,
                text=render(Reason(code=code, data=data)),
                data=data,
                examples=[describe(index.offers[i]) for i in shown[:EXAMPLES_PER_GROUP]],
            )
        )
    groups.sort(key=lambda g: rejection_order(g.code, g.count, g.gpu))
    return groups


def _structural_data(
    ev: Evaluation,
    reasons: dict[int, Reason],
    first: NDArray[np.intp],
    gpu: str,
) -> tuple[dict[str, Any], int | None]:
    """The nearest miss among the planning groups rejected for one (code, GPU): its reason's
    data with the instance's GPU count, and its first offer by name (the offer id). Only
    groups with an offer rejected for their own reason count (``first`` is -1 for the others:
    all their offers were filtered out). Ties go to the group whose first offer comes first by
    name."""
    present = [(g, reason) for g, reason in reasons.items() if first[g] >= 0]
    if not present:
        return {"gpu": gpu}, None
    best, reason = min(present, key=lambda item: (_nearest(item[1]), int(first[item[0]])))
    data = dict(reason.data)
    data.setdefault("gpu_count", ev.index.groups[best].gpu_count)
    return data, int(ev.index.by_name[first[best]])


def _least(
    market: MarketResult, name: str, outcome: Outcome, members: NDArray[np.intp]
) -> tuple[float, int]:
    """The least ``name`` over the members' options and the position (in ``members``) of the
    first member holding it."""
    values = market.minimum(name, np.searchsorted(outcome.priced, members))
    at = int(np.argmin(values))
    return float(values[at]), at


def _names(names: list[str], shown: int = 5) -> str:
    """``a, b, c`` -- the first ``shown`` names, and how many more; ``a; b`` when a name has
    a comma of its own (vast.ai regions: ``Texas, US, NA``)."""
    separator = "; " if any("," in name for name in names[:shown]) else ", "
    text = separator.join(names[:shown])
    return text + (f" and {len(names) - shown} more" if len(names) > shown else "")


def _structural_reasons(
    ev: Evaluation, named: NDArray[np.intp]
) -> tuple[dict[tuple[str, str], dict[int, Reason]], NDArray[np.intp]]:
    """Group-level rejections of the planned groups, by (code, GPU), then planning group; and
    per planning group the name position of its first offer rejected for that reason (-1
    when none is: its offers were all filtered out or priced). ``named``: each offer's final
    code, in name order."""
    index = ev.index
    found: dict[tuple[str, str], dict[int, Reason]] = {}
    own = np.zeros(len(index.groups), dtype=np.intp)
    for g, (key, verdict) in enumerate(zip(index.groups, ev.verdicts, strict=True)):
        if verdict is not None and verdict.rejection is not None:
            found.setdefault((verdict.rejection.code, key.gpu), {})[g] = verdict.rejection
            own[g] = CODE_OF[verdict.rejection.code]
    groups = index.group_by_name
    hits = np.flatnonzero((named > 0) & (named == own[groups]))
    first = np.full(len(index.groups), -1, dtype=np.intp)
    # scattered back to front: a repeated group keeps the value written last, its first hit
    # (NumPy assigns repeated indices in order)
    first[groups[hits][::-1]] = hits[::-1]
    return found, first


def _nearest(reason: Reason) -> float:
    """Order of a group's rejections by how close the offer came to fitting, so the sentence
    quotes the nearest miss: the smallest memory shortfall, the fewest GPUs needed."""
    data = reason.data
    match reason.code:
        case "insufficient_memory":
            return float(data.get("need_bytes", 2**62) - data["usable_bytes"])
        case "no_cluster_network" | "over_max_nodes":
            return float(data["nodes_needed"] * data.get("gpu_count", 1))
        case "over_max_gpus":
            return float(data["gpus_needed"])
        case "target_over_concurrency":
            return float(data["concurrency_needed"])
        case _:
            return 0.0


def _rejection_data(
    ev: Evaluation,
    outcome: Outcome,
    market: MarketResult | None,
    code: str,
    gpu: str,
    members: NDArray[np.intp],
) -> tuple[dict[str, Any], int | None]:
    """Data of a filter or numeric-limit group, and the position in ``members`` of its
    nearest miss (the offer with the least price, time or cost; none for filters)."""
    index, constraints = ev.index, ev.request.constraints
    nearest: int | None = None
    data: dict[str, Any] = {"gpu": gpu}
    match code:
        case "provider_excluded":
            codes = np.flatnonzero(np.bincount(index.provider_code[members]))
            data["provider"] = _names([index.providers[c] for c in codes.tolist()])
        case "region_excluded":
            codes = np.flatnonzero(np.bincount(index.region_code[members]))
            data["region"] = _names([index.regions[c] for c in codes.tolist()])
        case "over_max_price" | "past_deadline" | "over_budget" if market is not None:
            column, field, limit = _LIMIT_OF[code]
            value, nearest = _least(market, column, outcome, members)
            data.update(
                {
                    field: value,
                    limit: getattr(constraints, limit),
                    "gpu_count": index.offers[int(members[nearest])].gpu_count,
                }
            )
        case _:
            pass
    return data, nearest


_LIMIT_OF = {
    # code: (value column, data field, constraint)
    "over_max_price": ("price_per_hour_usd", "price_per_hour_usd", "max_price_per_hour_usd"),
    "past_deadline": ("time_hours", "hours", "deadline_hours"),
    "over_budget": ("total_usd", "total_usd", "budget_usd"),
}


def suggestions(ev: Evaluation, outcome: Outcome) -> list[Suggestion]:
    """When nothing fits: per relaxable constraint, the nearest feasible option."""
    found: list[Suggestion] = []
    found += _relax_filters(ev, outcome)
    found += _relax_numbers(ev, outcome)
    found += _relax_structure(ev, outcome)
    return found


def _suggest(code: str, data: dict[str, Any]) -> Suggestion:
    return Suggestion(code=code, text=render(Reason(code=code, data=data)), data=data)


def _best_offer(ev: Evaluation, outcome: Outcome, market: str, offers: NDArray[np.intp]) -> int:
    """The offer among ``offers`` with the best objective value in ``market``."""
    result = outcome.results[market]
    positions = np.searchsorted(outcome.priced, offers)
    values = objective_values(
        ev.request.objective,
        training=ev.training,
        total_usd=result.values("total_usd", positions),
        time_hours=result.values("time_hours", positions),
        price_per_hour_usd=result.values("price_per_hour_usd", positions),
        per_million_usd=result.values("per_million_usd", positions),
        latency_seconds=result.values("latency_seconds", positions),
    )
    values = np.nan_to_num(values, nan=np.inf)
    ranks = ev.index.name_rank[offers]
    return int(offers[np.lexsort((ranks, values))[0]])


def _relax_filters(ev: Evaluation, outcome: Outcome) -> list[Suggestion]:
    index = ev.index
    found: list[Suggestion] = []
    for market in ev.markets():
        unfiltered = outcome.unfiltered[market]
        for code, suggestion, field in (
            ("gpu_excluded", "include_gpu", "gpu"),
            ("provider_excluded", "include_provider", "provider"),
            ("region_excluded", "include_region", "region"),
        ):
            hits = np.flatnonzero((ev.filter_code == CODE_OF[code]) & (unfiltered == 0))
            if hits.size and not any(s.code == suggestion for s in found):
                offer = index.offers[_best_offer(ev, outcome, market, hits)]
                found.append(
                    _suggest(suggestion, {field: getattr(offer, field), "offer": describe(offer)})
                )
    policy = ev.request.constraints.spot
    other: dict[str, tuple[str, str]] = {
        "only": ("on_demand", "allow_on_demand"),
        "forbid": ("spot", "allow_spot"),
    }
    if policy in other:
        other_market, suggestion = other[policy]
        hits = np.flatnonzero((ev.filter_code == 0) & (outcome.unfiltered[other_market] == 0))
        if hits.size:
            offer = index.offers[_best_offer(ev, outcome, other_market, hits)]
            found.append(_suggest(suggestion, {"offer": describe(offer)}))
    return found


_LIMITS: tuple[tuple[str, str, str], ...] = (
    # (constraint, value column it limits, suggestion code)
    ("budget_usd", "total_usd", "raise_budget"),
    ("deadline_hours", "time_hours", "extend_deadline"),
    ("max_price_per_hour_usd", "price_per_hour_usd", "raise_max_price"),
)


def _relax_numbers(ev: Evaluation, outcome: Outcome) -> list[Suggestion]:
    """For each numeric limit (budget, deadline, max price), the least value of it that
    admits some offer while the other limits still hold -- over every option (node count) of
    the offers that pass the filters and fit. When no single limit suffices, one suggestion
    names all the limits the best offer breaks, with the values it needs."""
    constraints = ev.request.constraints
    active = [
        (name, column, code)
        for name, column, code in _LIMITS
        if getattr(constraints, name) is not None and (ev.training or name != "deadline_hours")
    ]
    if not active:
        return []
    found: dict[str, tuple[float, int, str]] = {}
    joint: tuple[float, int, dict[str, float]] | None = None
    for market in ev.markets():
        result = outcome.results[market]
        numeric = np.isin(outcome.unfiltered[market][outcome.priced], _NUMERIC)
        hits = np.flatnonzero((ev.filter_code[outcome.priced] == 0) & numeric)
        if not hits.size:
            continue
        values = {column: result.option_values(column, hits) for _, column, _ in active}
        within = {
            name: ~(values[column] > getattr(constraints, name)) for name, column, _ in active
        }
        exists = ~np.isnan(values[active[0][1]])
        for name, column, code in active:
            others = exists.copy()
            for other, _, _ in active:
                if other != name:
                    others &= within[other]
            needed = np.where(others, values[column], np.inf).min(axis=1)
            if not np.isfinite(needed).any():
                continue
            pick = int(np.lexsort((ev.index.name_rank[outcome.priced[hits]], needed))[0])
            value = float(needed[pick])
            offer = int(outcome.priced[hits[pick]])
            if code not in found or value < found[code][0]:
                found[code] = (value, offer, column)
        if not found:
            chosen = _best_offer(ev, outcome, market, outcome.priced[hits])
            best = int(np.flatnonzero(outcome.priced[hits] == chosen)[0])
            option = int(result.option[hits[best]])
            needs = {
                name: float(values[column][best, option])
                for name, column, _ in active
                if values[column][best, option] > getattr(constraints, name)
            }
            if joint is None:
                joint = (0.0, int(outcome.priced[hits[best]]), needs)
    suggestions = [
        _suggest(code, {_FIELD[column]: value, "offer": describe(ev.index.offers[offer])})
        for code, (value, offer, column) in found.items()
    ]
    if not suggestions and joint is not None:
        _, offer, needs = joint
        suggestions.append(
            _suggest("relax_limits", {"needs": needs, "offer": describe(ev.index.offers[offer])})
        )
    return suggestions


_FIELD = {
    "total_usd": "total_usd",
    "time_hours": "hours",
    "price_per_hour_usd": "price_per_hour_usd",
}
_NUMERIC = np.array(
    [CODE_OF["over_max_price"], CODE_OF["past_deadline"], CODE_OF["over_budget"]], dtype=np.intp
)


def _relax_structure(ev: Evaluation, outcome: Outcome) -> list[Suggestion]:
    """Suggestions from the groups' own rejections: more nodes or GPUs, a cluster network,
    NVLink, a shorter context, less headroom, a larger or newer GPU -- each only where it is
    the missing piece."""
    index = ev.index
    visible = ev.visible_groups().tolist()
    if any((v := ev.verdicts[g]) is not None and v.options for g in visible):
        # Some offer that passes the filters fits: what binds is a number (budget, deadline,
        # max price) or the spot policy, relaxed above -- other hardware would not help.
        return []
    reasons = [
        (g, v.rejection)
        for g in visible
        if (v := ev.verdicts[g]) is not None and v.rejection is not None
    ]
    found: list[Suggestion] = []
    by_code: dict[str, list[Reason]] = {}
    for _, reason in reasons:
        by_code.setdefault(reason.code, []).append(reason)
    if "context_exceeds_model" in by_code:
        found.append(
            _suggest("lower_context_length", dict(by_code["context_exceeds_model"][0].data))
        )
    if "over_max_nodes" in by_code:
        best = min(by_code["over_max_nodes"], key=lambda r: r.data["nodes_needed"])
        found.append(_suggest("raise_max_nodes", dict(best.data)))
    if "over_max_gpus" in by_code:
        best = min(by_code["over_max_gpus"], key=lambda r: r.data["gpus_needed"])
        found.append(_suggest("raise_max_gpus", dict(best.data)))
    crowded = [
        r
        for code in ("over_max_nodes", "over_max_gpus")
        for r in by_code.get(code, [])
        if r.data.get("max_concurrency")
    ]
    if crowded:
        # the concurrency sets the deployment's size: fewer sequences fit the limits
        best = max(crowded, key=lambda r: r.data["max_concurrency"])
        found.append(_suggest("lower_concurrency", dict(best.data)))
    if "target_over_concurrency" in by_code:
        best = min(by_code["target_over_concurrency"], key=lambda r: r.data["concurrency_needed"])
        data = dict(best.data)
        data["max_tokens_per_second"] = data["concurrency"] * data["sequence_tokens_per_second"]
        found.append(_suggest("raise_concurrency", data))
    constraints = ev.request.constraints
    networked = [
        r
        for r in by_code.get("no_cluster_network", [])
        if r.data["nodes_needed"] <= constraints.max_nodes
        and (
            constraints.max_gpus is None
            or r.data["nodes_needed"] * r.data["gpu_count"] <= constraints.max_gpus
        )
    ]
    if networked:
        # only where a network alone is the missing piece (more nodes than max_nodes allows
        # is raise_max_nodes' business)
        best = min(networked, key=lambda r: r.data["nodes_needed"])
        found.append(_suggest("cluster_network", dict(best.data)))
    if "tp_over_pcie" in by_code:
        found.append(_suggest("nvlink_offer", dict(by_code["tp_over_pcie"][0].data)))
    hardware = {"dtype_unsupported", "gpu_rate_unknown", "unknown_gpu"}
    if "dtype_unsupported" in by_code and all(r.code in hardware for _, r in reasons):
        # every visible GPU lacks the dtype (or data): only then is a newer GPU the fix
        found.append(_suggest("newer_gpu", dict(by_code["dtype_unsupported"][0].data)))
    if "kv_pool_too_small" in by_code:
        found.append(_suggest("shorter_context", dict(by_code["kv_pool_too_small"][0].data)))
    memory = [r for r in by_code.get("insufficient_memory", []) if "need_bytes" in r.data]
    if memory:
        # the least any allowed plan needs per GPU: the nearest misses of the groups limited
        # by nodes or GPUs count too (their closest plan within the limits)
        limited = [
            r
            for code in ("over_max_nodes", "over_max_gpus", "no_cluster_network")
            for r in by_code.get(code, [])
            if "need_bytes" in r.data
        ]
        best = min([*memory, *limited], key=lambda r: r.data["need_bytes"])
        largest = max(k.memory_exposed_bytes for k in index.groups)
        headroom = ev.request.constraints.min_headroom_fraction
        close = [r for r in memory if r.data["need_bytes"] < r.data["exposed_bytes"]]
        if headroom > 0 and close:
            # the largest headroom that admits the nearest miss: 1 - need / exposed, rounded
            # down to the hundredth the value is shown with
            nearest = min(close, key=lambda r: r.data["need_bytes"] / r.data["exposed_bytes"])
            admits = math.floor(
                (1 - nearest.data["need_bytes"] / nearest.data["exposed_bytes"]) * 100
            )
            if admits > 0:
                found.append(
                    _suggest(
                        "lower_headroom", {**nearest.data, "min_headroom_fraction": admits / 100}
                    )
                )
        if best.data["need_bytes"] > largest:  # else larger GPUs exist and failed otherwise
            found.append(
                _suggest(
                    "larger_gpu",
                    {"need_bytes": best.data["need_bytes"], "largest_exposed_bytes": largest},
                )
            )
    return found
