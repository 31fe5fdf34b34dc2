"""Compare an answer with an earlier one (``--baseline FILE``): what changed.

Each answer is reduced to its headline metrics -- verdict, GPU type and count, nodes, plan,
memory per GPU, headroom, time and cost -- taken from the plan the answer stands on (the
plan on the target for ``check``, the top recommendation for ``recommend``, the breakdown and
the fewest GPUs per GPU type for ``estimate``). Metrics that differ become :class:`Change`
rows with the difference written out.
"""

from __future__ import annotations

from typing import Literal

from msgspec import Struct

from gpu_advisor.core.check import CheckResponse
from gpu_advisor.core.estimate import EstimateResponse
from gpu_advisor.core.planner.explain import hours, percent, usd
from gpu_advisor.core.results import RecommendationResponse
from gpu_advisor.core.units import format_gib
from gpu_advisor.render.report import Response, Table, offer_text, plan_text, result_text

Unit = Literal["text", "count", "bytes", "fraction", "usd", "hours"]


class Metric(Struct, frozen=True, kw_only=True):
    """One headline figure: ``value`` in the unit ``unit`` names (None: not available)."""

    name: str
    value: str | int | float | None
    unit: Unit = "text"


class Change(Struct, frozen=True, kw_only=True):
    """A metric whose value differs from the baseline's."""

    name: str
    before: str
    after: str
    delta: str


def _fmt(value: str | int | float | None, unit: Unit) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    match unit:
        case "bytes":
            return format_gib(value)
        case "fraction":
            return percent(value)
        case "usd":
            return usd(value)
        case "hours":
            return hours(value)
        case "count":
            return f"{value:,}"
        case "text":
            return str(value)


def _delta(before: Metric, after: Metric) -> str:
    a, b = before.value, after.value
    if not isinstance(a, int | float) or not isinstance(b, int | float) or isinstance(a, bool):
        return "changed"
    diff = b - a
    sign = "+" if diff > 0 else "-"
    if after.unit == "fraction":
        # the difference of the percentages as shown ("4 %" -> "7 %" is 3 points, whatever
        # the unrounded fractions were)
        points = int(f"{b * 100:.0f}") - int(f"{a * 100:.0f}")
        return f"{'+' if points >= 0 else '-'}{abs(points)} points"
    text = f"{sign}{_fmt(abs(diff), after.unit)}"
    if a:
        text += f" ({diff / a:+.0%})"
    return text


def _check_metrics(r: CheckResponse) -> list[Metric]:
    e = r.estimate
    metrics = [
        Metric(name="verdict", value=r.verdict),
        Metric(name="GPU", value=e.offer.gpu),
        Metric(name="GPU count", value=e.gpus, unit="count"),
        Metric(name="nodes", value=e.nodes, unit="count"),
        Metric(name="plan", value=plan_text(e.plan)),
        Metric(name="memory per GPU", value=e.memory_per_gpu.total_bytes, unit="bytes"),
        Metric(
            name="headroom",
            value=1 - e.memory_per_gpu.total_bytes / e.offer.gpu_memory_exposed_bytes,
            unit="fraction",
        ),
        Metric(
            name="time to result",
            value=e.performance.time_to_result_hours if e.performance else None,
            unit="hours",
        ),
        Metric(name="cost", value=e.cost.total_usd if e.cost else None, unit="usd"),
        Metric(
            name="price per hour",
            value=e.cost.price_per_hour_usd if e.cost else None,
            unit="usd",
        ),
    ]
    metrics.extend(Metric(name=f"check {c.name}", value=result_text(c)) for c in r.checks)
    alt = r.alternative
    metrics.append(Metric(name="alternative", value=offer_text(alt.offer) if alt else None))
    return metrics


def _recommend_metrics(r: RecommendationResponse) -> list[Metric]:
    metrics = [Metric(name="recommendations", value=len(r.recommendations), unit="count")]
    if r.recommendations:
        top = r.recommendations[0]
        metrics += [
            Metric(name="top offer", value=offer_text(top.offer)),
            Metric(name="GPU", value=top.offer.gpu),
            Metric(name="GPU count", value=top.gpus, unit="count"),
            Metric(name="nodes", value=top.nodes, unit="count"),
            Metric(name="plan", value=plan_text(top.plan)),
            Metric(name="memory per GPU", value=top.memory_per_gpu.total_bytes, unit="bytes"),
            Metric(
                name="headroom",
                value=1 - top.memory_per_gpu.total_bytes / top.offer.gpu_memory_exposed_bytes,
                unit="fraction",
            ),
            Metric(
                name="time to result",
                value=top.performance.time_to_result_hours,
                unit="hours",
            ),
            Metric(name="cost", value=top.cost.total_usd, unit="usd"),
            Metric(name="price per hour", value=top.cost.price_per_hour_usd, unit="usd"),
        ]
    return metrics


def _estimate_metrics(r: EstimateResponse) -> list[Metric]:
    memory = r.memory_per_gpu
    metrics = [
        Metric(name="plan", value=plan_text(r.plan)),
        Metric(name="GPU count", value=r.plan.gpus, unit="count"),
        Metric(name="memory per GPU", value=memory.total_bytes, unit="bytes"),
        Metric(name="activations per GPU", value=memory.activations_bytes, unit="bytes"),
        Metric(name="KV cache per GPU", value=memory.kv_cache_bytes, unit="bytes"),
    ]
    if r.fits is not None:
        metrics.append(Metric(name="fits", value="yes" if r.fits else "no"))
    if memory.headroom_fraction is not None:
        metrics.append(Metric(name="headroom", value=memory.headroom_fraction, unit="fraction"))
    if r.performance is not None:
        metrics.append(
            Metric(
                name="time to result",
                value=r.performance.time_to_result_hours,
                unit="hours",
            )
        )
    metrics.extend(
        Metric(name=f"fewest GPUs on {row.gpu}", value=row.min_gpus, unit="count")
        for row in r.min_gpus
    )
    return metrics


def headline(response: Response) -> list[Metric]:
    """The metrics compared between runs; the model first, so a baseline of another model
    says so in its first row."""
    model = Metric(name="model", value=response.model.name)
    match response:
        case CheckResponse():
            return [model, *_check_metrics(response)]
        case RecommendationResponse():
            return [model, *_recommend_metrics(response)]
        case EstimateResponse():
            return [model, *_estimate_metrics(response)]


def compare(baseline: Response, current: Response) -> list[Change]:
    """Metrics whose value changed, in headline order (then those that disappeared)."""
    before = {m.name: m for m in headline(baseline)}
    now = headline(current)
    gone = [
        Metric(name=name, value=None, unit=old.unit)
        for name, old in before.items()
        if name not in {m.name for m in now} and old.value is not None
    ]
    changes: list[Change] = []
    for metric in [*now, *gone]:
        old = before.get(metric.name, Metric(name=metric.name, value=None, unit=metric.unit))
        if old.value == metric.value:
            continue
        changes.append(
            Change(
                name=metric.name,
                before=_fmt(old.value, old.unit),
                after=_fmt(metric.value, metric.unit),
                delta=_delta(old, metric),
            )
        )
    return changes


def changes_table(changes: list[Change]) -> Table:
    """The comparison as a report table (an explicit row when nothing changed)."""
    rows = [[c.name, c.before, c.after, c.delta] for c in changes]
    if not rows:
        rows = [["(nothing)", "-", "-", "no change since the baseline"]]
    return Table(
        title="Changes since the baseline",
        headers=["metric", "baseline", "now", "change"],
        rows=rows,
    )
