"""``recommend``: from a workload and a catalog to ranked, priced, explained instances.

Pipeline (DESIGN steps 3-5): filter offers by the request's constraints; plan each group of
identical offers once (:mod:`.training`, :mod:`.serving` over :mod:`.topology`); price every
offer of the feasible groups in each allowed market (:mod:`.markets`); rank
(:mod:`.ranking`); explain (:mod:`.report`, :mod:`.rejections`, sentences from
:mod:`.explain`). The HTTP layer adds ``model`` and ``catalog`` to build a
:class:`~gpu_advisor.core.results.RecommendationResponse`.

Constraints (DESIGN "API") and where they apply:

* ``gpu_types``, ``providers``, ``regions``: offer filters (``gpu_excluded``,
  ``provider_excluded``, ``region_excluded``), case-insensitive, canonical GPU ids;
* ``spot``: ``forbid`` prices on-demand only, ``only`` spot only (offers without a spot price:
  ``spot_unavailable``), ``allow`` both -- an offer then appears once per market;
* ``max_gpus``, ``max_nodes``: bound the plan search (``over_max_gpus``, ``over_max_nodes``);
* ``min_headroom_fraction``: the fit check uses ``exposed x (1 - headroom)``;
* ``max_price_per_hour_usd`` (the deployment's price: instance price x instances),
  ``deadline_hours`` (training), ``budget_usd``: per offer and plan option
  (``over_max_price``, ``past_deadline``, ``over_budget``).

The Pareto set is on (total cost, time to result) for training and on (total cost, request
latency) for serving, where the time to result is the fixed serving period.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import msgspec
import numpy as np
from msgspec import Struct
from numpy.typing import NDArray

from gpu_advisor.core.architecture import Architecture
from gpu_advisor.core.gpus import GpuSpec
from gpu_advisor.core.offers import Offer, ProviderInfo
from gpu_advisor.core.planner.cost import (
    CHECKPOINT_WRITE_BYTES_PER_S,
    DEFAULT_SPOT_INTERRUPTIONS_PER_HOUR,
    checkpoint_bytes,
)
from gpu_advisor.core.planner.estimator import CapacityRule, MemoMemory, MemoryEstimator
from gpu_advisor.core.planner.explain import REJECTION_CODES
from gpu_advisor.core.planner.hardware import (
    ComputePath,
    compute_capability,
    compute_path,
    has_published_rates,
    inference_weight_dtype,
    missing_path_requirement,
    training_compute_dtype,
)
from gpu_advisor.core.planner.index import RecommendationIndex, build_recommendation_index
from gpu_advisor.core.planner.markets import (
    PRICE_SCALED,
    MarketResult,
    OptionTable,
    Outcome,
    PricingClasses,
    price_market,
)
from gpu_advisor.core.planner.ranking import (
    Candidates,
    objective_column,
    pareto_positions,
    same_choice,
    top_choices,
)
from gpu_advisor.core.planner.rejections import group_rejections, suggestions
from gpu_advisor.core.planner.relax import workload_suggestions
from gpu_advisor.core.planner.report import (
    MAX_OTHER_REGIONS,
    build_pareto,
    build_recommendation,
)
from gpu_advisor.core.planner.serving import ServingPlanner
from gpu_advisor.core.planner.topology import GroupContext, GroupKey, GroupVerdict, SearchSpace
from gpu_advisor.core.planner.training import TrainingPlanner
from gpu_advisor.core.results import ParetoPoint, Reason, Recommendation, RejectedGroup, Suggestion
from gpu_advisor.core.spec import InferenceWorkload, RecommendationRequest, TrainingWorkload

CODE = {name: i + 1 for i, name in enumerate(REJECTION_CODES)}
"""Rejection code -> small int (0 = feasible); lower ints are reported first."""


class RecommendationResult(Struct, frozen=True, kw_only=True):
    """What the core returns; the HTTP layer adds ``model`` and ``catalog``.

    Attributes:
        objective: the objective ranked by.
        recommendations: the best ``top_k`` candidates, rank 1 first.
        rejected: rejected offers grouped by (reason code, GPU), each with a sentence.
        pareto: non-dominated candidates on (total cost, time to result).
        suggestions: when nothing fits, which constraint to relax and what it would take.
        candidates_considered: offers in the catalog that were considered.
    """

    objective: str
    recommendations: list[Recommendation]
    rejected: list[RejectedGroup]
    pareto: list[ParetoPoint]
    suggestions: list[Suggestion] = []
    candidates_considered: int = 0


def recommend(
    arch: Architecture,
    request: RecommendationRequest,
    offers: Sequence[Offer] | RecommendationIndex,
    gpus: Mapping[str, GpuSpec],
    providers: Mapping[str, ProviderInfo],
    estimate: MemoryEstimator,
    *,
    capacity_rule: CapacityRule | None = None,
) -> RecommendationResult:
    """Rank the offers for a workload, explain every rejection, say what to relax.

    Args:
        arch: the resolved model.
        request: workload, constraints (``gpu_types`` already resolved to canonical ids by the
            caller), objective and ``top_k``.
        offers: the catalog, or its :class:`RecommendationIndex` (build it once per catalog
            version for speed: :func:`build_recommendation_index`).
        gpus: GPU table by canonical id; offers on other GPUs are rejected ``unknown_gpu``.
        providers: billing and spot facts by provider id.
        estimate: the memory estimator (``gpu_advisor.core.memory.estimate_memory``).
        capacity_rule: how the estimator's breakdown depends on the GPU capacity
            (:data:`~gpu_advisor.core.planner.estimator.MEMORY_CAPACITY_RULE` for
            ``estimate_memory``): one estimate then serves every GPU of a capacity class.
            Without it a vLLM-style serving plan is estimated once per distinct capacity.

    Returns:
        The ranked recommendations, grouped rejections, Pareto set and suggestions. Pure and
        deterministic: the same inputs give the same result.
    """
    index = (
        offers if isinstance(offers, RecommendationIndex) else build_recommendation_index(offers)
    )
    evaluation = Evaluation(arch, request, index, gpus, providers, estimate, capacity_rule)
    return evaluation.run(relax_workload=True)


class Evaluation:
    """State of one ``recommend`` call (request-scoped; nothing outlives the call)."""

    def __init__(
        self,
        arch: Architecture,
        request: RecommendationRequest,
        index: RecommendationIndex,
        gpus: Mapping[str, GpuSpec],
        providers: Mapping[str, ProviderInfo],
        estimate: MemoryEstimator,
        capacity_rule: CapacityRule | None = None,
    ) -> None:
        self.arch = arch
        self.request = request
        self.index = index
        self.gpus = gpus
        self.providers = providers
        self.estimate = estimate
        self.capacity_rule = capacity_rule
        self.workload = request.workload
        self.training = isinstance(self.workload, TrainingWorkload)
        memory = MemoMemory(estimate, arch, self.workload, capacity_rule)
        space = SearchSpace(arch, request.constraints, memory)
        self.space = space
        self.plan_group: Callable[[GroupContext], GroupVerdict]
        match self.workload:
            case TrainingWorkload():
                self.plan_group = TrainingPlanner(space, self.workload, request.objective).plan
            case InferenceWorkload():
                self.plan_group = ServingPlanner(space, self.workload, request.objective).plan
        self.verdicts: list[GroupVerdict | None] = [None] * len(index.groups)
        self._computes: dict[str, ComputePath | GroupVerdict] = {}
        self.filter_code = self._filter_codes()
        self.filtered = bool(self.filter_code.any())
        rates, unknown = self._spot_rates()
        self.spot_rate_by_provider = rates
        self.spot_rate_unknown = unknown

    # --- filters and provider facts ----------------------------------------------------------

    def _filter_codes(self) -> NDArray[np.intp]:
        index, constraints = self.index, self.request.constraints
        code = np.zeros(len(index), dtype=np.intp)
        rules: list[tuple[str, tuple[str, ...], list[str] | None, NDArray[np.intp]]] = [
            ("region_excluded", index.regions, constraints.regions, index.region_code),
            ("provider_excluded", index.providers, constraints.providers, index.provider_code),
            ("gpu_excluded", index.gpus, constraints.gpu_types, index.gpu_code),
        ]
        for name, values, allowed, codes in rules:  # lowest priority first
            if allowed is None:
                continue
            keep = {v.lower() for v in allowed}
            ok = np.array([v.lower() in keep for v in values], dtype=bool)
            if len(values):
                code = np.where(ok[codes], code, CODE[name])
        return code

    def _spot_rates(self) -> tuple[NDArray[np.float64], tuple[bool, ...]]:
        rates: list[float] = []
        unknown: list[bool] = []
        for name in self.index.providers:
            info = self.providers.get(name)
            rate = info.spot_interruptions_per_hour if info else None
            unknown.append(rate is None)
            rates.append(DEFAULT_SPOT_INTERRUPTIONS_PER_HOUR if rate is None else rate)
        return np.asarray(rates, dtype=np.float64), tuple(unknown)

    # --- planning ------------------------------------------------------------------------------

    def _compute(self, gpu: GpuSpec) -> ComputePath | GroupVerdict:
        """The GPU's compute path for the workload's dtype, or the rejection of a GPU that
        cannot run it; memoised per GPU."""
        found = self._computes.get(gpu.id)
        if found is not None:
            return found
        match self.workload:
            case TrainingWorkload():
                dtype = training_compute_dtype(self.workload)
            case InferenceWorkload():
                dtype = inference_weight_dtype(self.arch, self.workload)
        compute = compute_path(gpu, dtype)
        if compute is None and not has_published_rates(gpu):
            found = GroupVerdict(
                rejection=Reason(code="gpu_rate_unknown", data={"gpu": gpu.id, "dtype": dtype})
            )
        elif compute is None:
            data: dict[str, Any] = {
                "dtype": dtype,
                "gpu": gpu.id,
                "needs": missing_path_requirement(dtype),
            }
            capability = compute_capability(gpu)
            if capability is not None:
                data["compute_capability"] = f"{capability[0]}.{capability[1]}"
            found = GroupVerdict(rejection=Reason(code="dtype_unsupported", data=data))
        else:
            found = compute
        self._computes[gpu.id] = found
        return found

    def _verdict(self, key: GroupKey) -> GroupVerdict:
        gpu = self.gpus.get(key.gpu)
        if gpu is None:
            return GroupVerdict(rejection=Reason(code="unknown_gpu", data={"gpu": key.gpu}))
        compute = self._compute(gpu)
        if isinstance(compute, GroupVerdict):
            return compute
        mfu = self.workload.mfu if isinstance(self.workload, TrainingWorkload) else None
        max_gpus = self.request.constraints.max_gpus
        if max_gpus is not None and key.gpu_count > max_gpus:
            return GroupVerdict(
                rejection=Reason(
                    code="over_max_gpus",
                    data={"gpu": gpu.id, "gpus_needed": key.gpu_count, "max_gpus": max_gpus},
                )
            )
        ctx = self.space.context(key, gpu, compute, mfu)
        return self.plan_group(ctx)

    def visible_groups(self) -> NDArray[np.intp]:
        """Groups with at least one offer that passes the gpu/provider/region filters."""
        index = self.index
        counts = np.bincount(index.group_of[self.filter_code == 0], minlength=len(index.groups))
        return np.flatnonzero(counts)

    def _plan(self, groups: NDArray[np.intp]) -> None:
        for g in groups.tolist():
            if self.verdicts[g] is None:
                self.verdicts[g] = self._verdict(self.index.groups[g])

    def _option_table(self) -> OptionTable:
        verdicts = self.verdicts
        width = max((len(v.options) for v in verdicts if v is not None), default=0) or 1
        shape = (len(verdicts), width)
        adapters_only = (
            isinstance(self.workload, TrainingWorkload) and self.workload.method != "full"
        )
        cells: list[int] = []
        nodes: list[int] = []
        gpus: list[int] = []
        base: list[float] = []
        rate: list[float] = []
        latency: list[float] = []
        write: list[float] = []
        nan = float("nan")
        for g, verdict in enumerate(verdicts):
            if verdict is None:
                continue
            for k, option in enumerate(verdict.options):
                cells.append(g * width + k)
                nodes.append(option.nodes)
                gpus.append(option.nodes * self.index.groups[g].gpu_count)
                base.append(nan if option.time_hours is None else option.time_hours * 3600.0)
                rate.append(option.tokens_per_second)
                serving = option.inference
                latency.append(nan if serving is None else serving.request_latency_seconds)
                seconds = 0.0
                if option.training is not None:
                    size = checkpoint_bytes(option.plan, option.memory, adapters_only=adapters_only)
                    seconds = size / (CHECKPOINT_WRITE_BYTES_PER_S * option.nodes)
                write.append(seconds)
        at = np.asarray(cells, dtype=np.intp)

        def filled(values: list[Any], fill: Any, dtype: Any) -> Any:
            found = np.full(shape, fill, dtype=dtype)
            found.ravel()[at] = values
            return found

        return OptionTable(
            valid=filled([True] * len(cells), False, bool),
            nodes=filled(nodes, 1, np.int64),
            gpus=filled(gpus, 1, np.int64),
            base_seconds=filled(base, np.nan, np.float64),
            tokens_per_second=filled(rate, np.nan, np.float64),
            latency_seconds=filled(latency, np.nan, np.float64),
            checkpoint_write_seconds=filled(write, 0.0, np.float64),
        )

    def _structural_codes(self) -> NDArray[np.intp]:
        per_group = np.array(
            [
                0
                if v is not None and v.options
                else CODE[v.rejection.code]
                if v is not None and v.rejection is not None
                else -1
                for v in self.verdicts
            ],
            dtype=np.intp,
        )
        return per_group[self.index.group_of] if len(self.index) else per_group[:0]

    # --- markets -----------------------------------------------------------------------------

    def markets(self) -> tuple[Literal["on_demand", "spot"], ...]:
        match self.request.constraints.spot:
            case "forbid":
                return ("on_demand",)
            case "only":
                return ("spot",)
            case _:
                return ("on_demand", "spot")

    def _price(
        self,
        market: Literal["on_demand", "spot"],
        priced: NDArray[np.intp],
        table: OptionTable,
        classes: PricingClasses,
    ) -> MarketResult:
        index = self.index
        price = (index.spot_price_per_hour_usd if market == "spot" else index.price_per_hour_usd)[
            priced
        ]
        tokens = self.workload.tokens if isinstance(self.workload, TrainingWorkload) else None
        return price_market(
            market=market,
            training=self.training,
            tokens=tokens,
            table=table,
            classes=classes,
            offer_class=index.class_of[priced],
            # (a gathered copy: NaN -- no spot price -- becomes inf in place)
            price_per_hour_usd=np.nan_to_num(price, nan=np.inf, copy=False)
            if market == "spot"
            else price,
            constraints=self.request.constraints,
            objective=self.request.objective,
        )

    def _outcome(self, all_markets: bool) -> Outcome:
        """Codes and market results; the first pass prices only offers that pass the filters,
        the suggestion pass (``all_markets``) prices every offer of a feasible group."""
        index = self.index
        table = self._option_table()
        structural = self._structural_codes()
        priced_mask = structural == 0
        if not all_markets and self.filtered:
            priced_mask &= self.filter_code == 0
        priced = np.flatnonzero(priced_mask)
        classes = PricingClasses(
            group=index.class_group,
            increment_seconds=index.class_increment_seconds,
            minimum_seconds=index.class_minimum_seconds,
            interruptions_per_hour=self.spot_rate_by_provider[index.class_provider],
        )
        markets = ("on_demand", "spot") if all_markets else self.markets()
        results: dict[str, MarketResult] = {
            m: self._price(m, priced, table, classes) for m in markets
        }
        primary = self.markets()[0]
        codes: dict[str, NDArray[np.intp]] = {}
        unfiltered: dict[str, NDArray[np.intp]] = {}
        for market, result in results.items():
            code = np.maximum(structural, 0)  # -1 (group not planned) reads as 0
            numeric = np.maximum(result.code, 1) - 1  # index into NUMERIC_CODES
            code[priced] = np.where(result.feasible, 0, CODE["over_max_price"] + numeric)
            if market == "spot":
                no_spot = np.isnan(index.spot_price_per_hour_usd)
                code = np.where(no_spot, CODE["spot_unavailable"], code)
            unfiltered[market] = code
            codes[market] = (
                np.where(self.filter_code > 0, self.filter_code, code) if self.filtered else code
            )
        allowed = self.markets()
        final = codes[primary]  # one market: its code is 0 exactly where it is feasible
        if len(allowed) > 1:
            feasible_any = np.zeros(len(index), dtype=bool)
            for market in allowed:
                feasible_any |= codes[market] == 0
            final = np.where(feasible_any, 0, final)
        return Outcome(
            priced=priced,
            results=results,
            codes=codes,
            unfiltered=unfiltered,
            final_code=final,
            table=table,
        )

    def _candidates(self, outcome: Outcome) -> Candidates:
        """Every feasible (offer, market) with its chosen option; values are read from the
        markets' per-(class, option) tables through each candidate's flat table cell."""
        markets = [m for m in ("on_demand", "spot") if m in self.markets()]
        results = [outcome.results[m] for m in markets]
        chosen = [np.flatnonzero(outcome.codes[m][outcome.priced] == 0) for m in markets]
        n = sum(w.size for w in chosen)
        offer = np.empty(n, dtype=np.intp)
        option = np.empty(n, dtype=np.intp)
        cell = np.empty(n, dtype=np.intp)
        price = np.empty(n, dtype=np.float64)
        spot = np.zeros(n, dtype=np.int64)
        start = offset = 0
        for market, result, where in zip(markets, results, chosen, strict=True):
            part = slice(start, start + where.size)
            np.take(outcome.priced, where, out=offer[part])
            np.take(result.option, where, out=option[part])
            np.take(result.offer_class, where, out=cell[part])
            cell[part] *= result.width
            cell[part] += option[part] + offset
            np.take(result.price, where, out=price[part])
            spot[part] = market == "spot"
            start += where.size
            offset += result.valid.size
        tables: dict[str, NDArray[np.float64]] = {}

        def fetch(field: str, at: NDArray[np.intp] | None) -> NDArray[np.float64]:
            """``field`` at candidate positions ``at`` (all when None)."""
            table = tables.get(field)
            if table is None:
                parts = [r.tables[field] for r in results]
                table = tables[field] = np.concatenate(parts) if parts else np.zeros(0)
            found = table[cell if at is None else cell[at]]
            if field in PRICE_SCALED:
                found = found * (price if at is None else price[at])
            return np.asarray(found, dtype=np.float64)

        choice = self.index.choice_code[offer]
        choice *= 2
        choice += spot
        return Candidates(
            offer=offer,
            spot=spot,
            option=option,
            names=self.index.name_rank,
            choice=choice,
            cell=cell,
            price=price,
            fetch=fetch,
        )

    # --- run -----------------------------------------------------------------------------------

    def _ranked(self) -> tuple[Outcome, Candidates, NDArray[np.float64], list[int]]:
        """Plan the visible groups, price them, and the best ``top_k`` candidates."""
        self._plan(self.visible_groups())
        outcome = self._outcome(all_markets=False)
        candidates = self._candidates(outcome)
        request = self.request
        primary = candidates.column(objective_column(request.objective, training=self.training))
        if request.objective == "total_cost" and np.isnan(primary).any():
            # no token count: the cost per token ranks instead
            primary = np.where(np.isnan(primary), candidates.per_million_usd, primary)
        return outcome, candidates, primary, top_choices(primary, candidates, request.top_k)

    def _replan(self, request: RecommendationRequest) -> list[Recommendation]:
        """The best recommendation of ``request`` on the same offers (no explanations)."""
        ask = msgspec.structs.replace(request, top_k=1)
        nested = Evaluation(
            self.arch,
            ask,
            self.index,
            self.gpus,
            self.providers,
            self.estimate,
            self.capacity_rule,
        )
        outcome, candidates, _, best = nested._ranked()
        return [
            build_recommendation(nested, outcome, candidates, position, rank)
            for rank, position in enumerate(best, start=1)
        ]

    def _workload_suggestions(self) -> list[Suggestion]:
        """:func:`~.relax.workload_suggestions` where no visible group fits technically."""
        verdicts = [self.verdicts[g] for g in self.visible_groups().tolist()]
        if any(v is not None and v.options for v in verdicts):
            return []  # something fits in memory: the binding limits are numbers or filters
        reasons = [v.rejection for v in verdicts if v is not None and v.rejection is not None]
        headroom_binds = self.request.constraints.min_headroom_fraction > 0 and any(
            r.code == "insufficient_memory"
            and r.data.get("need_bytes", r.data["exposed_bytes"]) < r.data["exposed_bytes"]
            for r in reasons
        )
        return workload_suggestions(
            self.request, {r.code for r in reasons}, self._replan, headroom_binds=headroom_binds
        )

    def run(self, *, relax_workload: bool = False) -> RecommendationResult:
        """Rank, explain and, when nothing fits, suggest; ``relax_workload`` also tries
        lighter workloads (:mod:`.relax`: one planning each)."""
        index = self.index
        request = self.request
        outcome, candidates, primary, best = self._ranked()
        recommendations = []
        for rank, position in enumerate(best, start=1):
            others, count = same_choice(primary, candidates, position, MAX_OTHER_REGIONS)
            recommendations.append(
                build_recommendation(self, outcome, candidates, position, rank, others, count)
            )
        front = pareto_positions(candidates, "time_hours" if self.training else "latency_seconds")
        pareto = build_pareto(self, candidates, front, best)
        found: list[Suggestion] = []
        if not recommendations:
            lighter = self._workload_suggestions() if relax_workload else []
            self._plan(np.arange(len(index.groups), dtype=np.intp))
            outcome = self._outcome(all_markets=True)
            found = lighter + suggestions(self, outcome)
        return RecommendationResult(
            objective=request.objective,
            recommendations=recommendations,
            rejected=group_rejections(self, outcome),
            pareto=pareto,
            suggestions=found,
            candidates_considered=len(index),
        )
