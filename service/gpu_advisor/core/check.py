"""``POST /v1/check``: the CI gate -- does a workload still fit its target, with the headroom,
budget and deadline the team set? (DESIGN "API", issue 6.)

A target is one of three forms (:class:`~gpu_advisor.core.spec.CheckTarget`):

* ``{provider, instance_type}``: that instance type in any region of that provider;
* ``{instance_types}``: any of those instance types on any provider (or on ``provider``);
* ``{gpu, gpu_count, nodes}``: a reference instance like ``/v1/estimate`` plans on
  (:func:`gpu_advisor.core.estimate.reference_offer`: the GPU's own NVLink, InfiniBand between
  nodes), priced as the cheapest catalog offer with that GPU and GPU count -- or, without such
  an offer, with its price unknown.

``nodes`` bounds the nodes (instances) used in every form (default 1). The target's offers run
through the same planner as ``/v1/recommendations`` (on-demand prices, objective total cost).
Each check asks whether some plan on the target passes it *and every check evaluated before it
that passed*, in the order memory and topology (one planner run without limits), headroom,
deadline, budget. So the budget check quotes the cheapest plan that meets the headroom and the
deadline, and the verdict is ``pass`` exactly when one plan passes all five. Checks that
cannot be evaluated (nothing fits, so there is no plan to time or price) have ``passed`` null.

When the verdict is ``fail``, ``alternative`` is the cheapest option over the whole catalog that
meets the same headroom, deadline and budget (``recommend`` with those constraints). Pure: no
I/O; the caller passes the catalog.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

import msgspec
from msgspec import Struct

from gpu_advisor.core.architecture import Architecture
from gpu_advisor.core.check_explain import NOT_EVALUATED, render_check
from gpu_advisor.core.errors import InvalidSpecError, NotFoundError, UnknownGpuError
from gpu_advisor.core.estimate import REFERENCE_PROVIDER, reference_offer
from gpu_advisor.core.gpus import GpuCatalog, GpuSpec, resolve_gpu
from gpu_advisor.core.offers import Offer, ProviderInfo
from gpu_advisor.core.planner import (
    MemoryEstimator,
    RecommendationIndex,
    RecommendationResult,
    recommend,
)
from gpu_advisor.core.planner.report import describe
from gpu_advisor.core.results import (
    CatalogInfo,
    Cost,
    MemoryBreakdown,
    ModelSummary,
    ParallelPlan,
    Performance,
    Reason,
    Recommendation,
    RejectedGroup,
    Suggestion,
    Verdict,
)
from gpu_advisor.core.spec import (
    CheckRequest,
    CheckTarget,
    Constraints,
    InferenceWorkload,
    RecommendationRequest,
    TrainingWorkload,
)

CheckName = Literal["memory", "topology", "headroom", "budget", "deadline"]
CHECK_NAMES: Final[tuple[CheckName, ...]] = ("memory", "topology", "headroom", "budget", "deadline")
TargetForm = Literal["instance_type", "instance_types", "gpu"]
DEFAULT_TARGET_NODES: Final = 1

_TOPOLOGY_NOTES: Final = frozenset(
    {
        "plan",
        "tp_in_nvlink_domain",
        "tp_limited_pcie",
        "multi_node",
        "single_gpu_replica",
        "split_to_fit",
        "tp_for_throughput",
    }
)
_PRICE_NOTES: Final = frozenset({"summary", "billing", "per_million_tokens", "checkpoint_storage"})
# Which rejection explains a target that nothing fits, nearest to passing first: memory that
# would fit with another link, then memory short, then hardware the workload cannot use.
_NO_FIT_ORDER: Final = (
    "tp_over_pcie",
    "no_cluster_network",
    "kv_pool_too_small",
    "insufficient_memory",
    "over_max_nodes",
    "over_max_gpus",
    "dtype_unsupported",
    "gpu_rate_unknown",
    "unknown_gpu",
)


class Check(Struct, frozen=True, kw_only=True):
    """One check of the gate.

    Attributes:
        name: ``memory`` | ``topology`` | ``headroom`` | ``budget`` | ``deadline``.
        passed: True / False; null when it could not be evaluated (``code`` ``not_evaluated``,
            or ``price_unknown``).
        code: what was found (``fits``, ``insufficient_memory``, ``over_budget``...).
        detail: the sentence with the numbers (rendered from ``data``).
        data: the numbers: bytes, USD, hours, fractions (units in the keys).
    """

    name: CheckName
    passed: bool | None
    code: str
    detail: str
    data: dict[str, Any] = {}


class TargetInfo(Struct, frozen=True, kw_only=True):
    """The target as resolved against the catalog.

    Attributes:
        form: which form of ``target`` was given.
        description: ``aws p5.48xlarge`` / ``2 nodes × 8 × H100-SXM-80GB`` / a list.
        max_nodes: most nodes (instances) the plan may use.
        offers: catalog offers of the target (gpu form: offers with that GPU and count).
        gpu: the canonical GPU id when the target has one GPU type.
        priced_as: gpu form: the catalog offer whose price and billing rule price the
            reference instance (null: price unknown).
    """

    form: TargetForm
    description: str
    max_nodes: int
    offers: int
    gpu: str | None = None
    priced_as: Offer | None = None


class CheckEstimate(Struct, frozen=True, kw_only=True):
    """The plan on the target and its per-GPU memory (the one the checks quote).

    When nothing fits, ``fits`` is false and the breakdown is that of the most sharded simple
    plan over all the target's GPUs (training: ZeRO-3 data parallel; serving: the widest TP
    of one node), without performance or cost.
    """

    fits: bool
    offer: Offer
    nodes: int
    gpus: int
    plan: ParallelPlan
    memory_per_gpu: MemoryBreakdown
    performance: Performance | None = None
    cost: Cost | None = None
    rationale: list[Reason] = []
    warnings: list[Reason] = []


class CheckOutcome(Struct, frozen=True, kw_only=True):
    """What the core decides; the application adds ``model`` and ``catalog``."""

    verdict: Verdict
    target: TargetInfo
    checks: list[Check]
    estimate: CheckEstimate
    alternative: Recommendation | None = None
    suggestions: list[Suggestion] = []


class CheckResponse(Struct, frozen=True, kw_only=True):
    """``POST /v1/check`` response.

    Attributes:
        verdict: ``pass`` when every check passed, else ``fail``.
        checks: memory, topology, headroom, budget, deadline -- in that order.
        estimate: the plan on the target with its per-GPU breakdown, speed and cost.
        alternative: on ``fail``, the cheapest option in the whole catalog that meets the
            same headroom, deadline and budget (null when there is none, or on ``pass``).
        suggestions: on ``fail`` without an alternative, which limit to relax.
    """

    verdict: Verdict
    model: ModelSummary
    target: TargetInfo
    checks: list[Check]
    estimate: CheckEstimate
    catalog: CatalogInfo
    alternative: Recommendation | None = None
    suggestions: list[Suggestion] = []


class ResolvedTarget(Struct, frozen=True, kw_only=True):
    """The offers to plan on and the facts to plan with (not part of the response)."""

    info: TargetInfo
    offers: tuple[Offer, ...]
    providers: dict[str, ProviderInfo] | None = None
    price_known: bool = True


# --- request checks and target resolution ----------------------------------------------------


def validate_check_request(request: CheckRequest) -> TargetForm:
    """The target's form; the limits the workload can be checked against.

    Raises:
        InvalidSpecError: not exactly one target form (field ``target`` or the stray field);
            ``budget_usd`` or ``deadline_hours`` on a training run without ``tokens`` (it has no
            length to price or time); ``deadline_hours`` on a serving workload.
    """
    form = target_form(request.target)
    workload = request.workload
    if isinstance(workload, InferenceWorkload) and request.deadline_hours is not None:
        raise InvalidSpecError(
            "deadline_hours applies to training runs; a serving deployment runs for "
            "workload.serving_hours (remove deadline_hours)",
            field="deadline_hours",
        )
    if isinstance(workload, TrainingWorkload) and workload.tokens is None:
        for field, value in (
            ("budget_usd", request.budget_usd),
            ("deadline_hours", request.deadline_hours),
        ):
            if value is not None:
                raise InvalidSpecError(
                    f"{field} needs the run's length: set workload.tokens (training tokens)",
                    field=field,
                )
    return form


def target_form(target: CheckTarget) -> TargetForm:
    """Which of the three forms ``target`` is.

    Raises:
        InvalidSpecError: naming the field that does not belong, or ``target`` when no form
            is complete.
    """
    forms = (
        "give exactly one of {provider, instance_type}, {gpu, gpu_count, nodes} or {instance_types}"
    )
    if target.gpu is not None:
        for field in ("provider", "instance_type", "instance_types"):
            if getattr(target, field) is not None:
                raise InvalidSpecError(
                    f"{field} cannot be combined with gpu; {forms}", field=f"target.{field}"
                )
        return "gpu"
    if target.gpu_count is not None:
        raise InvalidSpecError(f"gpu_count needs gpu; {forms}", field="target.gpu_count")
    if target.instance_types is not None:
        if target.instance_type is not None:
            raise InvalidSpecError(
                f"instance_type cannot be combined with instance_types; {forms}",
                field="target.instance_type",
            )
        return "instance_types"
    if target.instance_type is not None:
        if target.provider is None:
            raise InvalidSpecError(
                "instance_type needs its provider (or list it in instance_types)",
                field="target.provider",
            )
        return "instance_type"
    raise InvalidSpecError(forms, field="target")


def _folded(text: str) -> str:
    return text.strip().casefold()


def _not_found(kind: str, name: str, known: Sequence[str], field: str) -> NotFoundError:
    close = difflib.get_close_matches(name, sorted(set(known)), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else "; GET /v1/offers lists them"
    return NotFoundError(f"no {kind} {name!r} in the catalog{hint}", field=field)


def _instance_offers(
    offers: Sequence[Offer], provider: str | None, names: Sequence[str], field: str
) -> tuple[Offer, ...]:
    pool = offers
    if provider is not None:
        pool = [o for o in offers if _folded(o.provider) == _folded(provider)]
        if not pool:
            raise _not_found("provider", provider, [o.provider for o in offers], "target.provider")
    found: list[Offer] = []
    for i, name in enumerate(names):
        matched = [o for o in pool if _folded(o.instance_type) == _folded(name)]
        if not matched:
            label = field if len(names) == 1 and field.endswith("instance_type") else f"{field}.{i}"
            kind = f"instance type of {provider}" if provider is not None else "instance type"
            raise _not_found(kind, name, [o.instance_type for o in pool], label)
        found.extend(matched)
    return tuple(found)


def resolve_target(
    target: CheckTarget, offers: Sequence[Offer], gpus: GpuCatalog
) -> ResolvedTarget:
    """The target's offers from the catalog (or the priced reference instance).

    Raises:
        InvalidSpecError: not exactly one form (see :func:`target_form`).
        NotFoundError: an unknown provider (``target.provider``) or instance type
            (``target.instance_type`` / ``target.instance_types.<i>``), with close names.
        UnknownGpuError: an unknown GPU (``target.gpu``).
    """
    form = target_form(target)
    max_nodes = target.nodes or DEFAULT_TARGET_NODES
    match form:
        case "instance_type":
            names = [target.instance_type or ""]
            found = _instance_offers(offers, target.provider, names, "target.instance_type")
            description = f"{found[0].provider} {found[0].instance_type}"
        case "instance_types":
            names = list(target.instance_types or [])
            found = _instance_offers(offers, target.provider, names, "target.instance_types")
            description = ", ".join(dict.fromkeys(o.instance_type for o in found))
            if target.provider is not None:
                description = f"{found[0].provider} {description}"
        case "gpu":
            return _gpu_target(target, offers, gpus, max_nodes)
    gpu_ids = {o.gpu for o in found}
    return ResolvedTarget(
        info=TargetInfo(
            form=form,
            description=description + (f", up to {max_nodes} nodes" if max_nodes > 1 else ""),
            max_nodes=max_nodes,
            offers=len(found),
            gpu=next(iter(gpu_ids)) if len(gpu_ids) == 1 else None,
        ),
        offers=found,
    )


def _gpu_target(
    target: CheckTarget, offers: Sequence[Offer], gpus: GpuCatalog, max_nodes: int
) -> ResolvedTarget:
    spec = resolve_gpu(gpus, target.gpu or "")
    if spec is None:
        raise UnknownGpuError(
            f"unknown GPU {target.gpu!r}; GET /v1/gpus lists the GPU ids and aliases",
            field="target.gpu",
        )
    count = target.gpu_count or 1
    same = [o for o in offers if o.gpu == spec.id and o.gpu_count == count]
    cheapest = min(
        same,
        key=lambda o: (o.price_per_hour_usd, o.provider, o.instance_type, o.region),
        default=None,
    )
    offer = reference_offer(spec, count)
    if cheapest is not None:
        offer = msgspec.structs.replace(
            offer,
            price_per_hour_usd=cheapest.price_per_hour_usd,
            billing_increment_seconds=cheapest.billing_increment_seconds,
            billing_minimum_seconds=cheapest.billing_minimum_seconds,
            source=f"reference priced as {describe(cheapest)}",
        )
    per_node = f" per node, up to {max_nodes} nodes" if max_nodes > 1 else ""
    return ResolvedTarget(
        info=TargetInfo(
            form="gpu",
            description=f"{count} × {spec.id}{per_node}",
            max_nodes=max_nodes,
            offers=len(same),
            gpu=spec.id,
            priced_as=cheapest,
        ),
        offers=(offer,),
        providers={REFERENCE_PROVIDER.name: REFERENCE_PROVIDER},
        price_known=cheapest is not None,
    )


# --- evaluation ------------------------------------------------------------------------------


def _check(name: CheckName, passed: bool | None, code: str, data: dict[str, Any]) -> Check:
    return Check(
        name=name, passed=passed, code=code, detail=render_check(name, code, data), data=data
    )


class _Planner:
    """Runs the planner on the target's offers with growing sets of constraints."""

    def __init__(
        self,
        arch: Architecture,
        request: CheckRequest,
        target: ResolvedTarget,
        gpus: Mapping[str, GpuSpec],
        providers: Mapping[str, ProviderInfo],
        estimate: MemoryEstimator,
    ) -> None:
        self.arch = arch
        self.request = request
        self.target = target
        self.gpus = gpus
        self.providers = target.providers if target.providers is not None else providers
        self.estimate = estimate
        self.offers = list(target.offers)

    def run(self, constraints: Constraints) -> RecommendationResult:
        ask = RecommendationRequest(
            model=self.request.model,
            workload=self.request.workload,
            constraints=constraints,
            objective="total_cost",
            top_k=1,
        )
        return recommend(self.arch, ask, self.offers, self.gpus, self.providers, self.estimate)


def _plan_data(rec: Recommendation) -> dict[str, Any]:
    memory = rec.memory_per_gpu
    return {
        "gpu": rec.offer.gpu,
        "gpus": rec.gpus,
        "nodes": rec.nodes,
        "need_bytes": memory.total_bytes,
        "exposed_bytes": rec.offer.gpu_memory_exposed_bytes,
        "headroom_fraction": 1 - memory.total_bytes / rec.offer.gpu_memory_exposed_bytes,
    }


def _cost_data(rec: Recommendation) -> dict[str, Any]:
    return {
        "total_usd": rec.cost.total_usd,
        "billed_hours": rec.cost.billed_hours,
        "price_per_hour_usd": rec.cost.price_per_hour_usd,
        "offer": describe(rec.offer),
    }


def _least(groups: Sequence[RejectedGroup], code: str, key: str) -> float | None:
    values = [g.data[key] for g in groups if g.code == code and g.data.get(key) is not None]
    return min(values) if values else None


def evaluate_check(
    arch: Architecture,
    request: CheckRequest,
    target: ResolvedTarget,
    catalog: Sequence[Offer] | RecommendationIndex,
    gpus: Mapping[str, GpuSpec],
    providers: Mapping[str, ProviderInfo],
    estimate: MemoryEstimator,
) -> CheckOutcome:
    """Run the gate (see the module docstring).

    Args:
        arch: the resolved model.
        request: the check request (validated with :func:`validate_check_request`).
        target: the resolved target (:func:`resolve_target`).
        catalog: every offer, or its planner index, for the alternative.
        gpus: the GPU table by canonical id.
        providers: billing and spot facts by provider id.
        estimate: the memory estimator (``gpu_advisor.core.memory.estimate_memory``).

    Raises:
        InvalidSpecError: the workload cannot be planned (a bad LoRA target, dtype...).
    """
    validate_check_request(request)
    planner = _Planner(arch, request, target, gpus, providers, estimate)
    base = Constraints(max_nodes=target.info.max_nodes, spot="forbid")
    first = planner.run(base)
    if first.recommendations:
        checks, best = _checks_on_plans(planner, base, first.recommendations[0])
        plan_estimate = _estimate_of(best, target.price_known)
    else:
        checks = _checks_without_plan(first.rejected, target.info.max_nodes)
        plan_estimate = _fallback_estimate(arch, request, target, estimate)
    verdict: Verdict = "pass" if all(c.passed is True for c in checks) else "fail"
    alternative: Recommendation | None = None
    found: list[Suggestion] = []
    if verdict == "fail":
        alternative, found = _alternative(arch, request, catalog, gpus, providers, estimate)
    return CheckOutcome(
        verdict=verdict,
        target=target.info,
        checks=checks,
        estimate=plan_estimate,
        alternative=alternative,
        suggestions=found,
    )


def _checks_on_plans(
    planner: _Planner, base: Constraints, first: Recommendation
) -> tuple[list[Check], Recommendation]:
    """Something fits the target: headroom, deadline and budget, each evaluated on top of the
    limits that passed before it; passing checks quote the last plan found."""
    request = planner.request
    replace = msgspec.structs.replace
    passing, best = base, first
    failed: dict[CheckName, Check] = {}
    headroom = request.min_headroom_fraction
    if headroom > 0:
        trial = replace(passing, min_headroom_fraction=headroom)
        result = planner.run(trial)
        if result.recommendations:
            passing, best = trial, result.recommendations[0]
        else:
            failed["headroom"] = _headroom_short(result.rejected, first, headroom)
    deadline = request.deadline_hours
    if deadline is not None:
        trial = replace(passing, deadline_hours=deadline)
        result = planner.run(trial)
        if result.recommendations:
            passing, best = trial, result.recommendations[0]
        else:
            fastest = _least(result.rejected, "past_deadline", "hours")
            failed["deadline"] = _check(
                "deadline",
                False,
                "past_deadline",
                {
                    "hours": fastest if fastest is not None else _hours(best),
                    "deadline_hours": deadline,
                },
            )
    budget = request.budget_usd
    if budget is not None and not planner.target.price_known:
        failed["budget"] = _check("budget", None, "price_unknown", _gpu_data(planner.target))
    elif budget is not None:
        result = planner.run(replace(passing, budget_usd=budget))
        if result.recommendations:
            best = result.recommendations[0]
        else:
            # ``best`` is the cheapest plan meeting the limits that passed (total-cost order).
            failed["budget"] = _check(
                "budget", False, "over_budget", {**_cost_data(best), "budget_usd": budget}
            )
    passed = _passed_checks(planner, best)
    return [failed.get(name, passed[name]) for name in CHECK_NAMES], best


def _hours(rec: Recommendation) -> float | None:
    return rec.performance.time_to_result_hours


def _gpu_data(target: ResolvedTarget) -> dict[str, Any]:
    offer = target.offers[0]
    return {"gpu": offer.gpu, "gpu_count": offer.gpu_count}


def _headroom_short(
    rejected: Sequence[RejectedGroup], first: Recommendation, headroom: float
) -> Check:
    """No plan keeps ``headroom`` free: the smallest requirement the planner saw, or why more
    GPUs (which would lower it) are not available."""
    data = _plan_data(first)
    need = _least(rejected, "insufficient_memory", "need_bytes")
    if need is None and rejected:
        group = rejected[0]
        return _check(
            "headroom",
            False,
            "short_limited",
            {**group.data, "rejection": group.code, "min_headroom_fraction": headroom},
        )
    need_bytes = int(need) if need is not None else int(data["need_bytes"])
    return _check(
        "headroom",
        False,
        "short",
        {
            "gpu": data["gpu"],
            "need_bytes": need_bytes,
            "exposed_bytes": data["exposed_bytes"],
            "best_headroom_fraction": 1 - need_bytes / data["exposed_bytes"],
            "min_headroom_fraction": headroom,
        },
    )


def _passed_checks(planner: _Planner, best: Recommendation) -> dict[CheckName, Check]:
    """Every check as passed on ``best`` (the failed ones are replaced by the caller)."""
    request = planner.request
    plan = _plan_data(best)
    notes = [r.text for r in best.rationale if r.code in _TOPOLOGY_NOTES]
    layout = msgspec.structs.asdict(best.plan)
    headroom = request.min_headroom_fraction
    room = {"headroom_fraction": plan["headroom_fraction"], "min_headroom_fraction": headroom}
    budget = request.budget_usd
    deadline = request.deadline_hours
    if not planner.target.price_known:
        cost = _check("budget", True, "no_budget_price_unknown", _gpu_data(planner.target))
    elif budget is None:
        cost = _check("budget", True, "no_budget", _cost_data(best))
    else:
        cost = _check("budget", True, "within", {**_cost_data(best), "budget_usd": budget})
    return {
        "memory": _check("memory", True, "fits", plan),
        "topology": _check(
            "topology",
            True,
            "ok",
            {
                **layout,
                "gpus": best.gpus,
                "nodes": best.nodes,
                "gpu": best.offer.gpu,
                "interconnect": best.offer.interconnect,
                "notes": notes,
            },
        ),
        "headroom": _check("headroom", True, "met" if headroom > 0 else "not_required", room),
        "budget": cost,
        "deadline": _check(
            "deadline",
            True,
            "met" if deadline is not None else "no_deadline",
            {"hours": _hours(best), "deadline_hours": deadline},
        ),
    }


def _checks_without_plan(rejected: Sequence[RejectedGroup], max_nodes: int) -> list[Check]:
    """Nothing fits the target: memory and topology from the planner's nearest rejection;
    headroom, budget and deadline cannot be evaluated."""
    rank = {code: i for i, code in enumerate(_NO_FIT_ORDER)}
    group = min(rejected, key=lambda g: rank.get(g.code, len(rank)))
    data = {**group.data, "max_nodes": max_nodes, "offers": group.examples}
    skipped = {"reason": "nothing fits the target"}
    memory: Check
    topology = _check("topology", None, NOT_EVALUATED, {"reason": "nothing fits in memory"})
    match group.code:
        case "tp_over_pcie":
            memory = _check("memory", True, "fits_with_wider_tp", data)
            topology = _check("topology", False, group.code, data)
        case "no_cluster_network" if data["nodes_needed"] <= max_nodes:
            memory = _check("memory", True, "fits_with_more_nodes", data)
            topology = _check("topology", False, group.code, data)
        case "no_cluster_network" | "over_max_nodes":
            memory = _check("memory", False, "over_max_nodes", data)
        case "insufficient_memory" | "kv_pool_too_small":
            memory = _check("memory", False, group.code, data)
        case _:
            reason = f"{group.gpu} cannot run the workload"
            memory = _check("memory", None, NOT_EVALUATED, {"reason": reason})
            topology = _check("topology", False, group.code, data)
    return [
        memory,
        topology,
        *(_check(name, None, NOT_EVALUATED, skipped) for name in CHECK_NAMES[2:]),
    ]


def _fallback_plans(
    workload: TrainingWorkload | InferenceWorkload,
    arch: Architecture,
    gpus_per_node: int,
    total: int,
) -> list[ParallelPlan]:
    match workload:
        case TrainingWorkload():
            return [ParallelPlan(data_parallel=total, sharding=workload.sharding or "zero3")]
        case InferenceWorkload():
            heads, kv = arch.num_attention_heads, arch.num_kv_heads
            widest = max(
                t
                for t in range(1, gpus_per_node + 1)
                if gpus_per_node % t == 0 and heads % t == 0 and (kv % t == 0 or t % kv == 0)
            )
            return [
                ParallelPlan(
                    tensor_parallel=widest,
                    data_parallel=total // widest,
                    sequence_parallel=widest > 1,
                ),
                ParallelPlan(data_parallel=total),
            ]


def _fallback_estimate(
    arch: Architecture, request: CheckRequest, target: ResolvedTarget, estimate: MemoryEstimator
) -> CheckEstimate:
    """The most sharded simple plan over all the target's GPUs (it does not fit)."""
    offer = min(target.offers, key=lambda o: (o.price_per_hour_usd, describe(o)))
    nodes = target.info.max_nodes
    plans = _fallback_plans(request.workload, arch, offer.gpu_count, offer.gpu_count * nodes)
    error: InvalidSpecError | None = None
    for plan in plans:
        try:
            memory = estimate(
                arch, request.workload, plan, capacity_bytes=offer.gpu_memory_exposed_bytes
            )
        except InvalidSpecError as exc:  # a plan the model cannot take: try the next
            error = exc
            continue
        return CheckEstimate(
            fits=False,
            offer=offer,
            nodes=nodes,
            gpus=plan.gpus,
            plan=plan,
            memory_per_gpu=memory,
        )
    raise error if error is not None else InvalidSpecError("no plan", field="target")


def _alternative(
    arch: Architecture,
    request: CheckRequest,
    catalog: Sequence[Offer] | RecommendationIndex,
    gpus: Mapping[str, GpuSpec],
    providers: Mapping[str, ProviderInfo],
    estimate: MemoryEstimator,
) -> tuple[Recommendation | None, list[Suggestion]]:
    """The cheapest option in the catalog meeting the same headroom, deadline and budget."""
    ask = RecommendationRequest(
        model=request.model,
        workload=request.workload,
        constraints=Constraints(
            spot="forbid",
            budget_usd=request.budget_usd,
            deadline_hours=request.deadline_hours,
            min_headroom_fraction=request.min_headroom_fraction,
        ),
        objective="total_cost",
        top_k=1,
    )
    result = recommend(arch, ask, catalog, gpus, providers, estimate)
    if result.recommendations:
        return result.recommendations[0], []
    return None, result.suggestions


def _estimate_of(rec: Recommendation, price_known: bool) -> CheckEstimate:
    rationale = rec.rationale
    if not price_known:
        rationale = [r for r in rationale if r.code not in _PRICE_NOTES]
    return CheckEstimate(
        fits=True,
        offer=rec.offer,
        nodes=rec.nodes,
        gpus=rec.gpus,
        plan=rec.plan,
        memory_per_gpu=rec.memory_per_gpu,
        performance=rec.performance,
        cost=rec.cost if price_known else None,
        rationale=rationale,
        warnings=rec.warnings,
    )
