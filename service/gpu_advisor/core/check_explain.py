"""Sentences for the checks of ``POST /v1/check``: the one place their numbers become words.

:mod:`gpu_advisor.core.check` records each check as a code with the numbers behind it;
:func:`render_check` writes the ``detail`` sentence. Bytes are shown in GiB (2**30), money in
USD with cents, fractions as percentages (the planner's helpers in
:mod:`gpu_advisor.core.planner.explain`, so both endpoints word numbers alike).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gpu_advisor.core.planner.explain import hours, percent, render, usd
from gpu_advisor.core.results import Reason
from gpu_advisor.core.units import format_gib

NOT_EVALUATED = "not_evaluated"
"""Code of a check that could not be evaluated (what it depends on failed)."""


def _on(d: Mapping[str, Any]) -> str:
    nodes = d.get("nodes", 1)
    where = f"{d['gpus']} × {d['gpu']}"
    return f"{where} on {nodes} nodes" if nodes > 1 else where


def _memory_fits(d: Mapping[str, Any]) -> str:
    return (
        f"needs {format_gib(d['need_bytes'])} per GPU; {d['gpu']} exposes "
        f"{format_gib(d['exposed_bytes'])} ({percent(d['headroom_fraction'])} free) "
        f"with {_on(d)}"
    )


def _memory_short(d: Mapping[str, Any]) -> str:
    where = f"{d['gpu_count']} × {d['gpu']} per node, up to {d['max_nodes']} node"
    where += "s" if d["max_nodes"] != 1 else ""
    if d.get("need_bytes") is None:
        return f"does not fit {where}; {d['gpu']} exposes {format_gib(d['exposed_bytes'])}"
    return (
        f"needs at least {format_gib(d['need_bytes'])} per GPU on {where}; {d['gpu']} "
        f"exposes {format_gib(d['exposed_bytes'])}"
    )


def _memory_nodes(d: Mapping[str, Any]) -> str:
    return (
        f"needs {d['nodes_needed']} nodes of {d['gpu_count']} × {d['gpu']}; "
        f"target.nodes allows {d['max_nodes']}"
    )


def _topology_ok(d: Mapping[str, Any]) -> str:
    return "; ".join(d["notes"]) if d.get("notes") else f"{_on(d)}: no interconnect needed"


def _headroom_short(d: Mapping[str, Any]) -> str:
    return (
        f"at most {percent(d['best_headroom_fraction'])} of {d['gpu']}'s "
        f"{format_gib(d['exposed_bytes'])} stays free (needs at least "
        f"{format_gib(d['need_bytes'])} per GPU); min_headroom_fraction asks for "
        f"{percent(d['min_headroom_fraction'])}"
    )


def _cost(d: Mapping[str, Any]) -> str:
    if d.get("total_usd") is None:  # training without workload.tokens: no duration, no total
        return f"{usd(d['price_per_hour_usd'])}/h (no total: give workload.tokens for one)"
    return (
        f"{usd(d['total_usd'])} ({hours(d['billed_hours'])} billed at "
        f"{usd(d['price_per_hour_usd'])}/h)"
        if d.get("billed_hours") is not None
        else usd(d["total_usd"])
    )


_TEMPLATES: dict[tuple[str, str], Callable[[Mapping[str, Any]], str]] = {
    # memory
    ("memory", "fits"): _memory_fits,
    ("memory", "insufficient_memory"): _memory_short,
    ("memory", "over_max_nodes"): _memory_nodes,
    ("memory", "fits_with_more_nodes"): lambda d: (
        f"would fit across {d['nodes_needed']} nodes of {d['gpu_count']} × {d['gpu']}"
    ),
    ("memory", "fits_with_wider_tp"): lambda d: (
        f"would fit with TP above {d['max_tensor_parallel']} over the {d['gpu_count']} "
        f"{d['gpu']} GPUs of one node"
    ),
    # topology
    ("memory", "fits_below_target"): lambda d: (
        f"a {d['replica_gpus']}-GPU replica of {d['gpu_count']} × {d['gpu']} holds a "
        "full-context sequence"
    ),
    ("topology", "ok"): _topology_ok,
    # headroom
    ("headroom", "met"): lambda d: (
        f"{percent(d['headroom_fraction'])} of each GPU stays free; min_headroom_fraction asks "
        f"for {percent(d['min_headroom_fraction'])}"
    ),
    ("headroom", "not_required"): lambda d: (
        f"no min_headroom_fraction set; {percent(d['headroom_fraction'])} of each GPU stays free"
    ),
    ("headroom", "short"): _headroom_short,
    ("headroom", "short_limited"): lambda d: (
        f"keeping {percent(d['min_headroom_fraction'])} free "
        + (
            _memory_nodes(d)
            if d["rejection"] == "over_max_nodes"
            else render(Reason(code=d["rejection"], data=dict(d)))
        )
    ),
    # budget
    ("budget", "within"): lambda d: f"costs {_cost(d)}; budget_usd is {usd(d['budget_usd'])}",
    ("budget", "no_budget"): lambda d: f"no budget_usd set; costs {_cost(d)}",
    ("budget", "no_budget_price_unknown"): lambda d: (
        f"no budget_usd set; price unknown: the catalog has no offer of {d['gpu_count']} × "
        f"{d['gpu']}"
    ),
    ("budget", "over_budget"): lambda d: (
        f"the cheapest plan that passes the other checks costs {_cost(d)}; budget_usd is "
        f"{usd(d['budget_usd'])}"
    ),
    ("budget", "price_unknown"): lambda d: (
        f"price unknown: the catalog has no offer of {d['gpu_count']} × {d['gpu']}; target an "
        "instance type to check budget_usd"
    ),
    # deadline
    ("deadline", "met"): lambda d: (
        f"takes {hours(d['hours'])}; deadline_hours is {d['deadline_hours']:g}"
    ),
    ("deadline", "no_deadline"): lambda d: (
        f"no deadline_hours set; takes {hours(d['hours'])}"
        if d.get("hours") is not None
        else "no deadline_hours set"
    ),
    ("deadline", "past_deadline"): lambda d: (
        f"the fastest plan on the target takes at least {hours(d['hours'])}; deadline_hours "
        f"is {d['deadline_hours']:g}"
    ),
}


def render_check(name: str, code: str, data: Mapping[str, Any]) -> str:
    """The ``detail`` sentence of one check (``reason`` in ``data`` for ``not_evaluated``;
    the planner's sentence for its rejection codes)."""
    if code == NOT_EVALUATED:
        return f"not evaluated: {data.get('reason', 'an earlier check failed')}"
    template = _TEMPLATES.get((name, code))
    if template is not None:
        return template(data)
    # the planner's rejection codes (insufficient memory, KV pool, links, dtypes) keep the
    # planner's sentence, so /v1/check and /v1/recommendations say the same thing
    return render(Reason(code=code, data=dict(data)))
