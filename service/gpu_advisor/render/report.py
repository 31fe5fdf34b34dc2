"""What an answer says to a person, independent of how it is drawn.

Each response type becomes a :class:`Report`: a heading with a status, a few lines and
tables of strings. :mod:`gpu_advisor.render.text` draws it with rich (the CLI's table output
and the API's ``text/plain``), :mod:`gpu_advisor.render.markdown` as a pull-request comment,
so every format shows the same numbers. Bytes are written in GiB (2**30), money in USD.
"""

from __future__ import annotations

from typing import Literal

from msgspec import Struct

from gpu_advisor.core.check import Check, CheckEstimate, CheckResponse
from gpu_advisor.core.estimate import EstimateResponse
from gpu_advisor.core.offers import Offer
from gpu_advisor.core.planner.explain import hours, percent, usd
from gpu_advisor.core.results import (
    CatalogInfo,
    Cost,
    MemoryBreakdown,
    ModelSummary,
    ParallelPlan,
    Performance,
    RecommendationResponse,
)
from gpu_advisor.core.units import format_gib

Status = Literal["pass", "fail", "info"]
Response = CheckResponse | EstimateResponse | RecommendationResponse

_SHARDING = {"zero1": "ZeRO-1", "zero2": "ZeRO-2", "zero3": "ZeRO-3", "fsdp": "FSDP"}
_TERMS = (
    ("weights", "weights_bytes"),
    ("gradients", "gradients_bytes"),
    ("optimizer state", "optimizer_bytes"),
    ("activations", "activations_bytes"),
    ("KV cache", "kv_cache_bytes"),
    ("overhead", "overhead_bytes"),
)


class Table(Struct, frozen=True, kw_only=True):
    """A titled table of strings (every row as long as ``headers``)."""

    title: str
    headers: list[str]
    rows: list[list[str]]


class Report(Struct, frozen=True, kw_only=True):
    """A heading with its status, lines under it, tables, and closing notes."""

    heading: str
    status: Status
    lines: list[str] = []
    tables: list[Table] = []
    notes: list[str] = []


# --- pieces -------------------------------------------------------------------------------------


def plan_text(plan: ParallelPlan) -> str:
    """``TP=8 PP=1 DP=2 ZeRO-2`` (EP only when above 1)."""
    parts = [f"TP={plan.tensor_parallel}", f"PP={plan.pipeline_parallel}"]
    parts.append(f"DP={plan.data_parallel}")
    if plan.expert_parallel > 1:
        parts.append(f"EP={plan.expert_parallel}")
    if plan.sharding in _SHARDING:
        parts.append(_SHARDING[plan.sharding])
    return " ".join(parts)


def gpus_text(gpus: int, gpu: str, nodes: int) -> str:
    """``16 × H100-SXM-80GB on 2 nodes``."""
    return f"{gpus} × {gpu}" + (f" on {nodes} nodes" if nodes > 1 else "")


def offer_text(offer: Offer) -> str:
    """``aws p5.48xlarge us-east-1``; a reference instance says what prices it."""
    if offer.provider == "reference":
        return f"reference {offer.instance_type}" + (
            f" ({offer.source})" if offer.source.startswith("reference priced") else ""
        )
    return f"{offer.provider} {offer.instance_type} {offer.region}"


def memory_text(memory: MemoryBreakdown, exposed_bytes: int) -> str:
    """``76.2 GiB of 79.6 GiB (4 % free)``."""
    free = 1 - memory.total_bytes / exposed_bytes if exposed_bytes else None
    room = f" ({percent(free)} free)" if free is not None else ""
    return f"{format_gib(memory.total_bytes)} of {format_gib(exposed_bytes)}{room}"


def misfit_text(memory: MemoryBreakdown) -> str:
    """Why a plan does not fit, where the breakdown says more than its total: a vLLM-style
    engine whose reservation (gpu_memory_utilization x capacity) leaves a KV pool smaller than
    the sequences' KV cache -- the total alone can read as if it fitted."""
    reserved, pool = memory.engine_reserved_bytes, memory.kv_pool_bytes
    if reserved is not None and pool is not None and pool < memory.kv_cache_bytes:
        return (
            f"does not fit: the engine reserves {format_gib(reserved)}, which leaves a KV pool "
            f"of {format_gib(pool)} for {format_gib(memory.kv_cache_bytes)} of KV cache"
        )
    return "does not fit"


def speed_text(performance: Performance | None) -> str:
    """Training time and rate, or serving throughput and first-token time."""
    if performance is None:
        return "-"
    rate = f"{performance.tokens_per_second:,.0f} tokens/s"
    if performance.time_to_result_hours is not None:
        return f"{hours(performance.time_to_result_hours)} ({rate})"
    if performance.time_to_first_token_seconds is not None:
        if performance.step_time_seconds == 0:
            # an encoder-only model decodes nothing: its rate is input tokens encoded
            return (
                f"{performance.tokens_per_second:,.0f} input tokens/s encoded; one batch "
                f"{performance.time_to_first_token_seconds:.2f} s"
            )
        return f"{rate}; first token {performance.time_to_first_token_seconds:.2f} s"
    return rate


def cost_text(cost: Cost | None) -> str:
    """``$4,981.11 (25.3 h at $196.64/h)``, or the hourly price without a run length."""
    if cost is None:
        return "price unknown"
    if cost.total_usd is None:
        return f"{usd(cost.price_per_hour_usd)}/h"
    billed = f"{hours(cost.billed_hours)} at " if cost.billed_hours is not None else ""
    return f"{usd(cost.total_usd)} ({billed}{usd(cost.price_per_hour_usd)}/h)"


def model_line(model: ModelSummary) -> str:
    approx = " (approximate)" if model.approximate else ""
    active = (
        f", {model.active_parameters / 1e9:,.1f} B active"
        if model.active_parameters != model.total_parameters
        else ""
    )
    return f"Model: {model.name}{approx}, {model.total_parameters / 1e9:,.2f} B parameters{active}"


def catalog_note(catalog: CatalogInfo) -> str:
    sources = ", ".join(
        f"{s.name} {s.fetched_at or 'never fetched'}" + (" (stale)" if s.stale else "")
        for s in catalog.sources
    )
    degraded = "; cache degraded, answered from memory" if catalog.degraded else ""
    return f"Catalog {catalog.version}: {sources}{degraded}"


def memory_rows(memory: MemoryBreakdown) -> list[list[str]]:
    """One row per non-zero term, then the total."""
    rows = [
        [name, format_gib(getattr(memory, field), 2)]
        for name, field in _TERMS
        if getattr(memory, field)
    ]
    rows.append(["total", format_gib(memory.total_bytes, 2)])
    return rows


def result_text(check: Check) -> str:
    return {True: "pass", False: "FAIL", None: "n/a"}[check.passed]


# --- reports ------------------------------------------------------------------------------------


def _estimate_table(estimate: CheckEstimate) -> Table:
    exposed = estimate.offer.gpu_memory_exposed_bytes
    rows = [
        ["instance", offer_text(estimate.offer)],
        ["GPUs", gpus_text(estimate.gpus, estimate.offer.gpu, estimate.nodes)],
        ["plan", plan_text(estimate.plan)],
        ["memory per GPU", memory_text(estimate.memory_per_gpu, exposed)],
        *([f"  {name}", value] for name, value in memory_rows(estimate.memory_per_gpu)[:-1]),
        ["speed", speed_text(estimate.performance)],
        ["cost", cost_text(estimate.cost) if estimate.fits else "-"],
    ]
    title = "Plan on the target" if estimate.fits else "Nearest plan on the target (does not fit)"
    return Table(title=title, headers=["item", "value"], rows=rows)


def check_report(response: CheckResponse) -> Report:
    """``gpu-advisor check``: verdict, checks, the plan on the target, the alternative."""
    target = response.target
    lines = [
        model_line(response.model),
        f"Target: {target.description} ({target.offers} catalog offers)",
    ]
    tables = [
        Table(
            title="Checks",
            headers=["check", "result", "detail"],
            rows=[[c.name, result_text(c), c.detail] for c in response.checks],
        ),
        _estimate_table(response.estimate),
    ]
    notes: list[str] = []
    alt = response.alternative
    if alt is not None:
        tables.append(
            Table(
                title="Cheapest passing alternative in the catalog",
                headers=["instance", "GPUs", "plan", "memory per GPU", "speed", "cost"],
                rows=[
                    [
                        offer_text(alt.offer),
                        gpus_text(alt.gpus, alt.offer.gpu, alt.nodes),
                        plan_text(alt.plan),
                        memory_text(alt.memory_per_gpu, alt.offer.gpu_memory_exposed_bytes),
                        speed_text(alt.performance),
                        cost_text(alt.cost),
                    ]
                ],
            )
        )
    elif response.verdict == "fail":
        notes.append("No offer in the catalog passes these limits.")
        notes.extend(f"Suggestion: {s.text}" for s in response.suggestions)
    notes.append(catalog_note(response.catalog))
    return Report(
        heading=f"gpu-advisor check: {response.verdict.upper()}",
        status=response.verdict,
        lines=lines,
        tables=tables,
        notes=notes,
    )


def estimate_report(response: EstimateResponse) -> Report:
    """``gpu-advisor estimate``: the per-GPU breakdown, fit, speed, GPU counts per type."""
    lines = [model_line(response.model), f"Plan: {plan_text(response.plan)}"]
    status: Status = "info"
    hw = response.hardware
    if hw is not None:
        fits = bool(response.fits)
        status = "pass" if fits else "fail"
        lines.append(
            f"Hardware: {gpus_text(hw.gpu_count * hw.nodes, hw.gpu, hw.nodes)}: "
            + memory_text(response.memory_per_gpu, hw.memory_exposed_bytes)
            + ("" if fits else " - " + misfit_text(response.memory_per_gpu))
        )
        lines.append(f"Speed: {speed_text(response.performance)}")
    if response.kv_cache_bytes_per_token is not None:
        lines.append(
            "KV cache per token, whole model (before the tensor-parallel split): "
            f"{response.kv_cache_bytes_per_token:,} bytes"
        )
    if response.max_context_length is not None:
        lines.append(f"Longest context at this concurrency: {response.max_context_length:,}")
    if response.max_concurrency is not None:
        lines.append(f"Most sequences at this context: {response.max_concurrency:,}")
    tables = [
        Table(
            title="Memory per GPU",
            headers=["term", "size"],
            rows=memory_rows(response.memory_per_gpu),
        )
    ]
    if response.min_gpus:
        status = "pass" if any(r.min_gpus is not None for r in response.min_gpus) else "fail"
        tables.append(
            Table(
                title="Fewest GPUs per GPU type",
                headers=["GPU", "exposed", "GPUs", "plan", "per GPU"],
                rows=[
                    [
                        row.gpu,
                        format_gib(row.memory_exposed_bytes),
                        gpus_text(row.min_gpus, row.gpu, row.nodes or 1)
                        if row.min_gpus is not None
                        else "-",
                        plan_text(row.plan) if row.plan is not None else (row.reason or "-"),
                        format_gib(row.memory_per_gpu_bytes)
                        if row.memory_per_gpu_bytes is not None
                        else "-",
                    ]
                    for row in response.min_gpus
                ],
            )
        )
    if hw is not None:
        verdict = "FITS" if status == "pass" else "DOES NOT FIT"
    else:
        types = sum(row.min_gpus is not None for row in response.min_gpus)
        verdict = f"{types} GPU type{'s' if types != 1 else ''} can run it"
    return Report(
        heading=f"gpu-advisor estimate: {verdict}",
        status=status,
        lines=lines,
        tables=tables,
        notes=[n.text for n in response.notes],
    )


def recommend_report(response: RecommendationResponse) -> Report:
    """``gpu-advisor recommend``: ranked offers, rejections grouped by reason, suggestions."""
    found = len(response.recommendations)
    tables = [
        Table(
            title=f"Recommendations (by {response.objective})",
            headers=["#", "instance", "GPUs", "plan", "memory per GPU", "speed", "cost"],
            rows=[
                [
                    str(r.rank),
                    offer_text(r.offer) + (" (spot)" if r.spot else ""),
                    gpus_text(r.gpus, r.offer.gpu, r.nodes),
                    plan_text(r.plan),
                    memory_text(r.memory_per_gpu, r.offer.gpu_memory_exposed_bytes),
                    speed_text(r.performance),
                    cost_text(r.cost),
                ]
                for r in response.recommendations
            ],
        )
    ]
    if response.rejected:
        tables.append(
            Table(
                title="Rejected",
                headers=["offers", "GPU", "reason"],
                rows=[[str(g.count), g.gpu, g.text] for g in response.rejected],
            )
        )
    notes = [f"Suggestion: {s.text}" for s in response.suggestions]
    notes.append(catalog_note(response.catalog))
    return Report(
        heading=f"gpu-advisor recommend: {found} recommendation{'s' if found != 1 else ''}",
        status="pass" if found else "fail",
        lines=[
            model_line(response.model),
            f"{response.candidates_considered:,} offers considered",
        ],
        tables=tables,
        notes=notes,
    )


def report_for(response: Response) -> Report:
    """The report of any answer."""
    match response:
        case CheckResponse():
            return check_report(response)
        case EstimateResponse():
            return estimate_report(response)
        case RecommendationResponse():
            return recommend_report(response)
