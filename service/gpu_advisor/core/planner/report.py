"""Turns an evaluation into the response's parts: recommendations with their rationale,
Pareto points, rejected groups and suggestions. Sentences come from :mod:`.explain`."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from gpu_advisor.core.offers import Offer
from gpu_advisor.core.planner.cost import (
    SPOT_RESTART_SECONDS,
    billed_seconds,
    checkpoint_bytes,
    checkpoint_storage_usd,
)
from gpu_advisor.core.planner.explain import rendered, summary
from gpu_advisor.core.planner.markets import Outcome
from gpu_advisor.core.planner.performance import InferenceEstimate, TrainingEstimate
from gpu_advisor.core.planner.ranking import Candidates
from gpu_advisor.core.planner.topology import PlanOption
from gpu_advisor.core.results import (
    Cost,
    MemoryBreakdown,
    ParetoPoint,
    Performance,
    Reason,
    Recommendation,
    RegionPrice,
)
from gpu_advisor.core.spec import InferenceWorkload, TrainingWorkload

if TYPE_CHECKING:
    from gpu_advisor.core.planner.recommend import Evaluation

MIN_VCPUS_PER_GPU = 4
"""DESIGN "Host side": fewer than about 4 vCPUs per GPU starves data loading and
tokenisation -- a warning, not a rejection."""

COMMUNICATION_BOUND_FRACTION = 0.5
"""A training plan whose compute fills under this share of each step spends most of it
waiting on communication: warned about, with the numbers."""

READING_TOKENS_PER_SECOND = 5.0
"""Output tokens per second per sequence below which a serving plan is warned about as slower
than people read: about 4 English words (5 tokens) a second (Brysbaert 2019, "How many words
do we read per minute?", J. Memory and Language 109: 238 words per minute silent reading)."""

TIGHT_HEADROOM_FRACTION = 0.05
"""Below this free fraction of a GPU's exposed memory a plan is warned about (not rejected:
``constraints.min_headroom_fraction`` is the caller's rule). The estimator's terms are within
5 % (weights, gradients, optimizer state, KV) and 15 % (saved activations) of measurement
(docs/accuracy.md), and PyTorch's caching allocator fragments beyond its modelled share, so a
plan that leaves less than 5 % free may run out of memory where the estimate says it fits."""


def describe(offer: Offer) -> str:
    """``aws p4d.24xlarge us-east-1``: how an offer is named in sentences."""
    return f"{offer.provider} {offer.instance_type} {offer.region}"


def _option(ev: Evaluation, offer_position: int, option: int) -> PlanOption:
    verdict = ev.verdicts[int(ev.index.group_of[offer_position])]
    if verdict is None:  # pragma: no cover - priced offers always have a planned group
        raise LookupError("offer group was not planned")
    return verdict.options[option]


MAX_OTHER_REGIONS = 10
"""Other regions listed per recommendation (``other_regions_count`` counts them all)."""


def build_recommendation(
    ev: Evaluation,
    outcome: Outcome,
    candidates: Candidates,
    position: int,
    rank: int,
    others: list[int] | None = None,
    others_count: int = 0,
) -> Recommendation:
    """The recommendation for one ranked candidate, with rationale and warnings; ``others``
    are the candidate positions of the same choice in other regions, best first."""
    index = ev.index
    offer_i = int(candidates.offer[position])
    spot = bool(candidates.spot[position])
    offer = index.offers[offer_i]
    option = _option(ev, offer_i, int(candidates.option[position]))
    market = outcome.results["spot" if spot else "on_demand"]
    j = int(np.searchsorted(outcome.priced, offer_i))
    at = np.array([j], dtype=np.intp)
    expected_s = float(market.values("expected_seconds", at)[0])
    deployment_price = candidates.value("price_per_hour_usd", position)
    total = candidates.value("total_usd", position)
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
        per_million_tokens_usd=candidates.value("per_million_usd", position),
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
    rationale = [rendered(r) for r in reasons]  # each sentence rendered once
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
        summary=summary(rationale),
        rationale=rationale,
        warnings=[rendered(w) for w in _warnings(ev, offer_i, option, spot)],
        other_regions=_region_prices(ev, candidates, others or []),
        other_regions_count=others_count,
    )


def _region_prices(
    ev: Evaluation, candidates: Candidates, positions: list[int]
) -> list[RegionPrice]:
    if not positions:
        return []
    totals = candidates.take("total_usd", np.asarray(positions, dtype=np.intp)).tolist()
    found = []
    for position, total in zip(positions, totals, strict=True):
        offer = ev.index.offers[int(candidates.offer[position])]
        found.append(
            RegionPrice(
                region=offer.region,
                zone=offer.zone,
                price_per_hour_usd=offer.price_per_hour_usd,
                spot_price_per_hour_usd=offer.spot_price_per_hour_usd,
                total_usd=None if math.isnan(total) else total,
            )
        )
    return found


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _performance(
    option: PlanOption, tokens_per_second: float, candidates: Candidates, position: int
) -> Performance:
    if option.training is not None:
        time_h = candidates.value("time_hours", position)
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
    return serving_performance(serving, option.replicas, tokens_per_second)


def serving_performance(
    serving: InferenceEstimate, replicas: int, tokens_per_second: float
) -> Performance:
    """The performance block of a serving deployment of ``replicas`` replicas like
    ``serving`` (one replica's estimate) producing ``tokens_per_second`` in all."""
    per_replica = serving.max_concurrency
    return Performance(
        tokens_per_second=tokens_per_second,
        max_concurrency=None if per_replica is None else per_replica * replicas,
        max_concurrency_per_replica=per_replica,
        sequences_per_replica=serving.batch,
        time_to_first_token_seconds=serving.time_to_first_token_seconds,
        replicas=replicas,
        step_time_seconds=serving.decode_step_seconds,
        request_latency_seconds=serving.request_latency_seconds,
    )


def serving_speed(
    performance: Performance, workload: InferenceWorkload, encoder_only: bool
) -> Reason:
    """The ``serving_speed`` rationale of a serving deployment."""
    return Reason(
        code="serving_speed",
        data={
            "tokens_per_second": performance.tokens_per_second,
            "replicas": performance.replicas,
            "time_to_first_token_seconds": performance.time_to_first_token_seconds,
            "max_concurrency": performance.max_concurrency,
            "max_concurrency_per_replica": performance.max_concurrency_per_replica,
            "concurrency": workload.concurrency,
            "sequences_per_replica": performance.sequences_per_replica,
            "context_length": workload.context_length,
            "encoder_only": encoder_only,
        },
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
    elif isinstance(ev.workload, InferenceWorkload):
        reasons.append(serving_speed(performance, ev.workload, ev.arch.encoder_only))
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


def tight_fit_warning(memory: MemoryBreakdown) -> Reason | None:
    """``tight_memory_fit`` when less than :data:`TIGHT_HEADROOM_FRACTION` of the GPU's
    exposed memory stays free under ``memory`` (a breakdown with its capacity); None when
    more stays free, or when it does not fit at all (other reasons say so)."""
    headroom = memory.headroom_fraction
    # compared as shown ("5 % headroom" is not warned about as "4.9 %")
    if headroom is None or headroom < 0 or round(headroom * 100) >= TIGHT_HEADROOM_FRACTION * 100:
        return None
    return Reason(
        code="tight_memory_fit",
        data={"headroom_fraction": headroom, "threshold": TIGHT_HEADROOM_FRACTION},
    )


def communication_bound_warning(training: TrainingEstimate | None) -> Reason | None:
    """``communication_bound`` when compute fills under
    :data:`COMMUNICATION_BOUND_FRACTION` of a training step: the rest waits on traffic
    (exposed gradient / parameter collectives, TP over PCIe)."""
    if training is None:
        return None
    step, compute = training.step_time_seconds, training.compute_seconds
    if compute >= COMMUNICATION_BOUND_FRACTION * step:
        return None
    return Reason(
        code="communication_bound",
        data={
            "mfu": training.mfu,
            "step_time_seconds": step,
            "compute_seconds": compute,
            "waiting_seconds": step - compute,
        },
    )


def slow_decode_warning(serving: InferenceEstimate | None) -> Reason | None:
    """``slow_decode`` when a sequence streams its output slower than people read
    (:data:`READING_TOKENS_PER_SECOND`): one token per decode step of its replica's batch.
    Encoder-only models decode nothing and are not judged."""
    if serving is None:
        return None
    step = serving.decode_step_seconds
    if step <= 0 or 1.0 / step >= READING_TOKENS_PER_SECOND:
        return None
    return Reason(
        code="slow_decode",
        data={
            "stream_tokens_per_second": 1.0 / step,
            "decode_step_seconds": step,
            "batch": serving.batch,
            "threshold": READING_TOKENS_PER_SECOND,
        },
    )


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
    tight = tight_fit_warning(option.memory)
    if tight is not None:
        warnings.append(tight)
    bound = communication_bound_warning(option.training)
    if bound is not None:
        warnings.append(bound)
    slow = slow_decode_warning(option.inference)
    if slow is not None:
        warnings.append(slow)
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
    at = np.asarray(front, dtype=np.intp)
    totals = candidates.take("total_usd", at).tolist()
    times = candidates.take("time_hours" if ev.training else "latency_seconds", at).tolist()
    for position, total, time in zip(front, totals, times, strict=True):
        key = (total, time)
        groups.setdefault(key, []).append(position)
    for (total, _), members in groups.items():
        ranked_members = [m for m in members if m in rank_of]
        pool = ranked_members or members
        best = min(
            pool,
            key=lambda m: (
                rank_of.get(m, 10**9),
                int(candidates.spot[m]),
                int(candidates.name_rank(np.array([m]))[0]),
            ),
        )
        offer = ev.index.offers[int(candidates.offer[best])]
        option = _option(ev, int(candidates.offer[best]), int(candidates.option[best]))
        latency = candidates.value("latency_seconds", best)
        points.append(
            ParetoPoint(
                rank=rank_of.get(best),
                provider=offer.provider,
                instance_type=offer.instance_type,
                region=offer.region,
                gpus=option.plan.gpus,
                total_usd=total,
                time_to_result_hours=candidates.value("time_hours", best),
                spot=bool(candidates.spot[best]),
                equivalent_offers=len(members),
                latency_seconds=None if math.isnan(latency) else latency,
            )
        )
    return points
