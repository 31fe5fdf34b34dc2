"""Turns an evaluation into the response's parts: recommendations with their rationale,
Pareto points, rejected groups and suggestions. Sentences come from :mod:`.explain`."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from gpu_advisor.core.offers import Offer
from gpu_advisor.core.planner.cost import (
    SPOT_RESTART_SECONDS,
    billed_seconds,
    checkpoint_bytes,
    checkpoint_storage_usd,
)
from gpu_advisor.core.planner.explain import REJECTION_CODES, render, rendered, summary
from gpu_advisor.core.planner.markets import MarketResult, Outcome
from gpu_advisor.core.planner.ranking import Candidates, objective_values
from gpu_advisor.core.planner.topology import PlanOption
from gpu_advisor.core.results import (
    Cost,
    ParetoPoint,
    Performance,
    Reason,
    Recommendation,
    RejectedGroup,
    Suggestion,
)
from gpu_advisor.core.spec import TrainingWorkload

if TYPE_CHECKING:
    from gpu_advisor.core.planner.recommend import Evaluation

MIN_VCPUS_PER_GPU = 4
"""DESIGN "Host side": fewer than about 4 vCPUs per GPU starves data loading and
tokenisation -- a warning, not a rejection."""

EXAMPLES_PER_GROUP = 3
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
    }
)
"""Codes decided per planning group (their data comes from the group's verdict)."""


def describe(offer: Offer) -> str:
    """``aws p4d.24xlarge us-east-1``: how an offer is named in sentences."""
    return f"{offer.provider} {offer.instance_type} {offer.region}"


def _option(ev: Evaluation, offer_position: int, option: int) -> PlanOption:
    verdict = ev.verdicts[int(ev.index.group_of[offer_position])]
    if verdict is None:  # pragma: no cover - priced offers always have a planned group
        raise LookupError("offer group was not planned")
    return verdict.options[option]


def build_recommendation(
    ev: Evaluation, outcome: Outcome, candidates: Candidates, position: int, rank: int
) -> Recommendation:
    """The recommendation for one ranked candidate, with rationale and warnings."""
    index = ev.index
    offer_i = int(candidates.offer[position])
    spot = bool(candidates.spot[position])
    offer = index.offers[offer_i]
    option = _option(ev, offer_i, int(candidates.option[position]))
    market = outcome.results["spot" if spot else "on_demand"]
    j = int(np.searchsorted(outcome.priced, offer_i))
    at = np.array([j], dtype=np.intp)
    expected_s = float(market.values("expected_seconds", at)[0])
    deployment_price = float(candidates.price_per_hour_usd[position])
    total = float(candidates.total_usd[position])
    billed_h = (
        billed_seconds(
            expected_s, float(offer.billing_increment_seconds), float(offer.billing_minimum_seconds)
        )
        / 3600.0
        if not math.isnan(expected_s)
        else None
    )
    gpus = option.plan.gpus
    workload = ev.workload
    checkpoint: int | None = None
    storage_usd: float | None = None
    if option.training is not None and isinstance(workload, TrainingWorkload):
        checkpoint = checkpoint_bytes(
            option.plan, option.memory, adapters_only=workload.method != "full"
        )
        info = ev.providers.get(offer.provider)
        if info and info.storage_price_per_gb_month_usd is not None and billed_h is not None:
            storage_usd = checkpoint_storage_usd(
                checkpoint, info.storage_price_per_gb_month_usd, expected_s / 3600.0
            )
    cost = Cost(
        price_per_hour_usd=deployment_price,
        billed_hours=billed_h,
        total_usd=None if math.isnan(total) else total,
        per_million_tokens_usd=float(candidates.per_million_usd[position]),
        spot=spot,
        expected_interruptions=_finite(float(market.values("interruptions", at)[0]))
        if spot
        else None,
        price_per_gpu_hour_usd=deployment_price / (offer.gpu_count * option.nodes),
        checkpoint_bytes=checkpoint,
        checkpoint_storage_usd=storage_usd,
    )
    rate = float(market.values("tokens_per_second", at)[0])
    performance = _performance(option, rate, candidates, position)
    reasons = _rationale(ev, offer, option, cost, performance, spot, expected_s, storage_usd)
    return Recommendation(
        rank=rank,
        offer=offer,
        nodes=option.nodes,
        gpus=gpus,
        spot=spot,
        plan=option.plan,
        memory_per_gpu=option.memory,
        performance=performance,
        cost=cost,
        rationale=[Reason(code="summary", text=summary(reasons)), *map(rendered, reasons)],
        warnings=[rendered(w) for w in _warnings(ev, offer_i, option, spot)],
    )


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _performance(
    option: PlanOption, tokens_per_second: float, candidates: Candidates, position: int
) -> Performance:
    if option.training is not None:
        time_h = float(candidates.time_hours[position])
        return Performance(
            tokens_per_second=tokens_per_second,
            time_to_result_hours=None if math.isnan(time_h) else time_h,
            mfu=option.training.mfu,
            replicas=1,
            step_time_seconds=option.training.step_time_seconds,
        )
    serving = option.inference
    if serving is None:  # pragma: no cover - every option has an estimate of its kind
        raise LookupError("option without an estimate")
    return Performance(
        tokens_per_second=tokens_per_second,
        max_concurrency=serving.max_concurrency,
        time_to_first_token_seconds=serving.time_to_first_token_seconds,
        replicas=option.replicas,
        step_time_seconds=serving.decode_step_seconds,
        request_latency_seconds=serving.request_latency_seconds,
    )


def _rationale(
    ev: Evaluation,
    offer: Offer,
    option: PlanOption,
    cost: Cost,
    performance: Performance,
    spot: bool,
    expected_s: float,
    storage_usd: float | None,
) -> list[Reason]:
    plan, memory = option.plan, option.memory
    reasons = [
        Reason(
            code="plan",
            data={
                "gpus": plan.gpus,
                "gpu": offer.gpu,
                "nodes": option.nodes,
                "tensor_parallel": plan.tensor_parallel,
                "pipeline_parallel": plan.pipeline_parallel,
                "data_parallel": plan.data_parallel,
                "expert_parallel": plan.expert_parallel,
                "sharding": plan.sharding,
                "serving": option.inference is not None,
            },
        ),
        *option.notes,
    ]
    usable = offer.gpu_memory_exposed_bytes * (1 - ev.request.constraints.min_headroom_fraction)
    reasons.append(
        Reason(
            code="memory_fit",
            data={
                "total_bytes": memory.total_bytes,
                "usable_bytes": int(usable),
                "capacity_bytes": offer.gpu_memory_exposed_bytes,
                "headroom_fraction": 1 - memory.total_bytes / offer.gpu_memory_exposed_bytes,
            },
        )
    )
    if option.training is not None:
        reasons.append(
            Reason(
                code="training_time",
                data={
                    "hours": performance.time_to_result_hours,
                    "mfu": option.training.mfu,
                    "tokens_per_second": performance.tokens_per_second,
                },
            )
        )
    else:
        reasons.append(
            Reason(
                code="serving_speed",
                data={
                    "tokens_per_second": performance.tokens_per_second,
                    "replicas": performance.replicas,
                    "time_to_first_token_seconds": performance.time_to_first_token_seconds,
                    "max_concurrency": performance.max_concurrency,
                },
            )
        )
    reasons.append(
        Reason(
            code="billing",
            data={
                "total_usd": cost.total_usd,
                "billed_hours": cost.billed_hours,
                "price_per_hour_usd": cost.price_per_hour_usd,
                "increment_seconds": offer.billing_increment_seconds,
            },
        )
    )
    if cost.per_million_tokens_usd is not None and math.isfinite(cost.per_million_tokens_usd):
        reasons.append(Reason(code="per_million_tokens", data={"usd": cost.per_million_tokens_usd}))
    if spot:
        rate = _spot_rate(ev, offer)
        reasons.append(
            Reason(
                code="spot_risk",
                data={
                    "interruptions": cost.expected_interruptions,
                    "rate_per_hour": rate,
                    "restart_seconds": SPOT_RESTART_SECONDS,
                    "expected_hours": expected_s / 3600.0,
                    "provider": offer.provider,
                },
            )
        )
    if storage_usd is not None and cost.checkpoint_bytes is not None:
        reasons.append(
            Reason(
                code="checkpoint_storage", data={"bytes": cost.checkpoint_bytes, "usd": storage_usd}
            )
        )
    return reasons


def _spot_rate(ev: Evaluation, offer: Offer) -> float:
    position = ev.index.providers.index(offer.provider)
    return float(ev.spot_rate_by_provider[position])


def _warnings(ev: Evaluation, offer_i: int, option: PlanOption, spot: bool) -> list[Reason]:
    index = ev.index
    offer = index.offers[offer_i]
    warnings = list(option.warnings)
    per_gpu = float(index.vcpus_per_gpu[offer_i])
    if per_gpu < MIN_VCPUS_PER_GPU:
        warnings.append(
            Reason(
                code="few_vcpus",
                data={
                    "vcpus": offer.vcpus,
                    "gpus": offer.gpu_count,
                    "vcpus_per_gpu": per_gpu,
                    "minimum": MIN_VCPUS_PER_GPU,
                },
            )
        )
    provider = index.providers.index(offer.provider)
    if spot and ev.spot_rate_unknown[provider]:
        warnings.append(
            Reason(
                code="spot_rate_unknown",
                data={"provider": offer.provider, "rate_per_hour": _spot_rate(ev, offer)},
            )
        )
    return warnings


def build_pareto(
    ev: Evaluation, candidates: Candidates, front: list[int], ranked: list[int]
) -> list[ParetoPoint]:
    """One point per distinct (total cost, time) on the front; equal candidates collapse into
    the best-named one with ``equivalent_offers`` counting them."""
    rank_of = {position: rank for rank, position in enumerate(ranked, start=1)}
    points: list[ParetoPoint] = []
    groups: dict[tuple[float, float], list[int]] = {}
    time_axis = candidates.time_hours if ev.training else candidates.latency_seconds
    for position in front:
        key = (float(candidates.total_usd[position]), float(time_axis[position]))
        groups.setdefault(key, []).append(position)
    for (total, _), members in groups.items():
        ranked_members = [m for m in members if m in rank_of]
        pool = ranked_members or members
        best = min(
            pool,
            key=lambda m: (
                rank_of.get(m, 10**9),
                int(candidates.spot[m]),
                int(candidates.name_rank[m]),
            ),
        )
        offer = ev.index.offers[int(candidates.offer[best])]
        option = _option(ev, int(candidates.offer[best]), int(candidates.option[best]))
        latency = float(candidates.latency_seconds[best])
        points.append(
            ParetoPoint(
                rank=rank_of.get(best),
                provider=offer.provider,
                instance_type=offer.instance_type,
                region=offer.region,
                gpus=option.plan.gpus,
                total_usd=total,
                time_to_result_hours=float(candidates.time_hours[best]),
                spot=bool(candidates.spot[best]),
                equivalent_offers=len(members),
                latency_seconds=None if math.isnan(latency) else latency,
            )
        )
    return points


# --- rejections --------------------------------------------------------------------------------


def group_rejections(ev: Evaluation, outcome: Outcome) -> list[RejectedGroup]:
    """Rejected offers grouped by (code, GPU), largest groups first, each with a sentence.

    Examples are the first offers of a group in name order (provider, instance type, region).
    """
    index = ev.index
    codes = outcome.final_code
    by_name = index.by_name
    rejected = by_name[codes[by_name] > 0]  # name order
    if rejected.size == 0:
        return []
    n_gpus = max(len(index.gpus), 1)
    combined = codes[rejected] * n_gpus + index.gpu_code[rejected]
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
    structural = _structural_reasons(ev)
    groups: list[RejectedGroup] = []
    for key, start, count in zip(keys.tolist(), starts.tolist(), counts.tolist(), strict=True):
        code = REJECTION_CODES[key // n_gpus - 1]
        gpu = index.gpus[key % n_gpus]
        members = rejected[start : start + count]
        if code in _STRUCTURAL:
            reasons = structural.get((code, gpu))
            data = dict(min(reasons, key=_nearest).data) if reasons else {"gpu": gpu}
        else:
            data = _rejection_data(ev, outcome, market, code, gpu, members)
        reason = Reason(code=code, data=data)
        groups.append(
            RejectedGroup(
                code=code,
                gpu=gpu,
                count=count,
                text=render(reason),
                data=data,
                examples=[describe(index.offers[int(i)]) for i in members[:EXAMPLES_PER_GROUP]],
            )
        )
    groups.sort(key=lambda g: (-g.count, REJECTION_CODES.index(g.code), g.gpu))
    return groups


def _least(market: MarketResult, name: str, outcome: Outcome, members: NDArray[np.intp]) -> float:
    positions = np.searchsorted(outcome.priced, members)
    return float(np.min(market.minimum(name, positions)))


def _structural_reasons(ev: Evaluation) -> dict[tuple[str, str], list[Reason]]:
    """Group-level rejections of the planned groups, by (code, GPU)."""
    found: dict[tuple[str, str], list[Reason]] = {}
    for key, verdict in zip(ev.index.groups, ev.verdicts, strict=True):
        if verdict is not None and verdict.rejection is not None:
            found.setdefault((verdict.rejection.code, key.gpu), []).append(verdict.rejection)
    return found


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
        case _:
            return 0.0


def _rejection_data(
    ev: Evaluation,
    outcome: Outcome,
    market: MarketResult | None,
    code: str,
    gpu: str,
    members: NDArray[np.intp],
) -> dict[str, Any]:
    index, constraints = ev.index, ev.request.constraints
    match code:
        case "gpu_excluded":
            return {"gpu": gpu}
        case "provider_excluded":
            codes = np.flatnonzero(np.bincount(index.provider_code[members]))
            names = [index.providers[c] for c in codes.tolist()]
            return {"provider": ", ".join(names[:5]), "gpu": gpu}
        case "region_excluded":
            codes = np.flatnonzero(np.bincount(index.region_code[members]))
            names = [index.regions[c] for c in codes.tolist()]
            return {"region": ", ".join(names[:5]), "gpu": gpu}
        case "over_max_price" if market is not None:
            return {
                "gpu": gpu,
                "price_per_hour_usd": _least(market, "price_per_hour_usd", outcome, members),
                "max_price_per_hour_usd": constraints.max_price_per_hour_usd,
            }
        case "past_deadline" if market is not None:
            return {
                "gpu": gpu,
                "hours": _least(market, "time_hours", outcome, members),
                "deadline_hours": constraints.deadline_hours,
            }
        case "over_budget" if market is not None:
            return {
                "gpu": gpu,
                "total_usd": _least(market, "total_usd", outcome, members),
                "budget_usd": constraints.budget_usd,
            }
        case _:
            return {"gpu": gpu}


# --- suggestions -------------------------------------------------------------------------------


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


def _relax_numbers(ev: Evaluation, outcome: Outcome) -> list[Suggestion]:
    found: list[Suggestion] = []
    for market in ev.markets():
        result = outcome.results[market]
        codes = outcome.codes[market][outcome.priced]
        for code, suggestion, name, field in (
            ("over_budget", "raise_budget", "total_usd", "total_usd"),
            ("past_deadline", "extend_deadline", "time_hours", "hours"),
            ("over_max_price", "raise_max_price", "price_per_hour_usd", "price_per_hour_usd"),
        ):
            hits = np.flatnonzero(codes == CODE_OF[code])
            if not hits.size or any(s.code == suggestion for s in found):
                continue
            values = result.minimum(name, hits)
            pick = np.lexsort((ev.index.name_rank[outcome.priced[hits]], values))[0]
            offer = ev.index.offers[int(outcome.priced[hits[pick]])]
            found.append(
                _suggest(suggestion, {field: float(values[pick]), "offer": describe(offer)})
            )
    return found


def _relax_structure(ev: Evaluation, outcome: Outcome) -> list[Suggestion]:
    index = ev.index
    visible = ev.visible_groups().tolist()
    reasons = [
        (g, v.rejection)
        for g in visible
        if (v := ev.verdicts[g]) is not None and v.rejection is not None
    ]
    found: list[Suggestion] = []
    by_code: dict[str, list[Reason]] = {}
    for _, reason in reasons:
        by_code.setdefault(reason.code, []).append(reason)
    if "over_max_nodes" in by_code:
        best = min(by_code["over_max_nodes"], key=lambda r: r.data["nodes_needed"])
        found.append(_suggest("raise_max_nodes", dict(best.data)))
    if "over_max_gpus" in by_code:
        best = min(by_code["over_max_gpus"], key=lambda r: r.data["gpus_needed"])
        found.append(_suggest("raise_max_gpus", dict(best.data)))
    if "no_cluster_network" in by_code:
        best = min(by_code["no_cluster_network"], key=lambda r: r.data["nodes_needed"])
        found.append(_suggest("cluster_network", dict(best.data)))
    if "tp_over_pcie" in by_code:
        found.append(_suggest("nvlink_offer", dict(by_code["tp_over_pcie"][0].data)))
    if "dtype_unsupported" in by_code:
        found.append(_suggest("newer_gpu", dict(by_code["dtype_unsupported"][0].data)))
    if "kv_pool_too_small" in by_code:
        found.append(_suggest("shorter_context", dict(by_code["kv_pool_too_small"][0].data)))
    memory = [r for r in by_code.get("insufficient_memory", []) if "need_bytes" in r.data]
    if memory:
        best = min(memory, key=lambda r: r.data["need_bytes"])
        largest = max(k.memory_exposed_bytes for k in index.groups)
        headroom = ev.request.constraints.min_headroom_fraction
        close = [r for r in memory if r.data["need_bytes"] <= r.data["exposed_bytes"]]
        if headroom > 0 and close:
            found.append(_suggest("lower_headroom", dict(close[0].data)))
        found.append(
            _suggest(
                "larger_gpu",
                {"need_bytes": best.data["need_bytes"], "largest_exposed_bytes": largest},
            )
        )
    return found


CODE_OF = {name: i + 1 for i, name in enumerate(REJECTION_CODES)}
