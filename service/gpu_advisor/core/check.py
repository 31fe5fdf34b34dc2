"""``POST /v1/check``: the CI gate -- does a workload still fit its target, with the headroom,
budget and deadline the team set? (DESIGN "API", issue 6.)

The target (:mod:`.check_target`: an instance type of a provider, a list of allowed instance
types, or GPU x count x nodes, at most ``nodes`` nodes) resolves to catalog offers, which run
through the same planner as ``/v1/recommendations`` (on-demand prices, objective total cost).
Each check asks whether some plan on the target passes it *and every check evaluated before it
that passed*, in the order memory and topology (one planner run without limits), headroom,
deadline, budget. So the budget check quotes the cheapest plan that meets the headroom and the
deadline, and the verdict is ``pass`` exactly when one plan passes all five. Checks that
cannot be evaluated (nothing fits, so there is no plan to time or price) have ``passed`` null.

When the verdict is ``fail``, ``alternative`` is the cheapest option over the whole catalog that
meets the same headroom, deadline and budget (``recommend`` with those constraints). Pure: no
I/O; the caller passes the catalog. Types: :mod:`.check_results`; the nothing-fits path:
:mod:`.check_nofit`; sentences: :mod:`.check_explain`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import msgspec

from gpu_advisor.core.architecture import Architecture
from gpu_advisor.core.check_nofit import checks_without_plan, fallback_estimate
from gpu_advisor.core.check_results import (
    CHECK_NAMES,
    Check,
    CheckEstimate,
    CheckName,
    CheckOutcome,
    CheckResponse,
    make_check,
)
from gpu_advisor.core.check_target import (
    ResolvedTarget,
    TargetForm,
    TargetInfo,
    resolve_target,
    target_form,
)
from gpu_advisor.core.errors import InvalidSpecError
from gpu_advisor.core.gpus import GpuSpec
from gpu_advisor.core.offers import Offer, ProviderInfo
from gpu_advisor.core.planner import (
    CapacityRule,
    MemoryEstimator,
    RecommendationIndex,
    RecommendationResult,
    recommend,
)
from gpu_advisor.core.planner.index import exposed_by_gpu, with_exposed
from gpu_advisor.core.planner.relax import WORKLOAD_SUGGESTIONS
from gpu_advisor.core.planner.report import describe
from gpu_advisor.core.results import Recommendation, RejectedGroup, Suggestion, Verdict
from gpu_advisor.core.spec import (
    CheckRequest,
    Constraints,
    InferenceWorkload,
    RecommendationRequest,
    TrainingWorkload,
)

__all__ = [
    "CHECK_NAMES",
    "Check",
    "CheckEstimate",
    "CheckName",
    "CheckOutcome",
    "CheckResponse",
    "ResolvedTarget",
    "TargetInfo",
    "evaluate_check",
    "resolve_target",
    "target_form",
    "validate_check_request",
]


_TOPOLOGY_NOTES: Final = frozenset(
    {
        "plan",
        "tp_in_nvlink_domain",
        "tp_limited_pcie",
        "multi_node",
        "single_gpu_replica",
        "split_to_fit",
        "tp_for_throughput",
        "idle_gpus",
    }
)
_PRICE_NOTES: Final = frozenset({"summary", "billing", "per_million_tokens", "checkpoint_storage"})


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
        capacity_rule: CapacityRule | None = None,
    ) -> None:
        self.arch = arch
        self.capacity_rule = capacity_rule
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
        return recommend(
            self.arch,
            ask,
            self.offers,
            self.gpus,
            self.providers,
            self.estimate,
            capacity_rule=self.capacity_rule,
        )


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
    *,
    capacity_rule: CapacityRule | None = None,
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
        capacity_rule: how ``estimate`` depends on the GPU's capacity
            (:data:`~gpu_advisor.core.planner.MEMORY_CAPACITY_RULE` for the real estimator),
            passed to every planner run as :func:`~gpu_advisor.core.planner.recommend` takes it.

    Raises:
        InvalidSpecError: the workload cannot be planned (a bad LoRA target, dtype...).
    """
    validate_check_request(request)
    if target.info.form != "gpu":
        # the catalog's figure for each GPU, as the alternative and /v1/recommendations
        # quote it (the gpu form plans on the GPU table's figure, as /v1/estimate does)
        known = exposed_by_gpu(
            catalog.offers if isinstance(catalog, RecommendationIndex) else catalog
        )
        target = msgspec.structs.replace(target, offers=with_exposed(target.offers, known))
    planner = _Planner(arch, request, target, gpus, providers, estimate, capacity_rule)
    base = Constraints(max_nodes=target.info.max_nodes, spot="forbid")
    first = planner.run(base)
    if first.recommendations:
        checks, best = _checks_on_plans(planner, base, first.recommendations[0])
        plan_estimate = _estimate_of(best, target.price_known)
    else:
        checks = checks_without_plan(first.rejected, target.info.max_nodes)
        plan_estimate = fallback_estimate(arch, request, target, estimate, first.rejected)
    verdict: Verdict = "pass" if all(c.passed is True for c in checks) else "fail"
    alternative: Recommendation | None = None
    found: list[Suggestion] = []
    if verdict == "fail":
        alternative, found = _alternative(
            arch, request, catalog, gpus, providers, estimate, capacity_rule
        )
        # a lighter workload that fits the target itself comes first (recompute activations
        # before buying nodes): the planner's workload suggestions on the target
        lighter = [s for s in first.suggestions if s.code in WORKLOAD_SUGGESTIONS]
        found = lighter + [s for s in found if s.code not in WORKLOAD_SUGGESTIONS]
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
            failed["deadline"] = make_check(
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
        failed["budget"] = make_check("budget", None, "price_unknown", _gpu_data(planner.target))
    elif budget is not None:
        result = planner.run(replace(passing, budget_usd=budget))
        if result.recommendations:
            best = result.recommendations[0]
        else:
            # ``best`` is the cheapest plan meeting the limits that passed (total-cost order).
            failed["budget"] = make_check(
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
        return make_check(
            "headroom",
            False,
            "short_limited",
            {**group.data, "rejection": group.code, "min_headroom_fraction": headroom},
        )
    need_bytes = int(need) if need is not None else int(data["need_bytes"])
    return make_check(
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
        cost = make_check("budget", True, "no_budget_price_unknown", _gpu_data(planner.target))
    elif budget is None:
        cost = make_check("budget", True, "no_budget", _cost_data(best))
    else:
        cost = make_check("budget", True, "within", {**_cost_data(best), "budget_usd": budget})
    return {
        "memory": make_check("memory", True, "fits", plan),
        "topology": make_check(
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
        "headroom": make_check("headroom", True, "met" if headroom > 0 else "not_required", room),
        "budget": cost,
        "deadline": make_check(
            "deadline",
            True,
            "met" if deadline is not None else "no_deadline",
            {"hours": _hours(best), "deadline_hours": deadline},
        ),
    }


def _alternative(
    arch: Architecture,
    request: CheckRequest,
    catalog: Sequence[Offer] | RecommendationIndex,
    gpus: Mapping[str, GpuSpec],
    providers: Mapping[str, ProviderInfo],
    estimate: MemoryEstimator,
    capacity_rule: CapacityRule | None,
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
    result = recommend(arch, ask, catalog, gpus, providers, estimate, capacity_rule=capacity_rule)
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
