"""Training plans for one group: per node count, the fastest plan that fits.

The search space and its bounds are described in :mod:`gpu_advisor.core.planner.topology`.
"""

from __future__ import annotations

import math
from typing import Any

from msgspec import Struct, structs

from gpu_advisor.core.planner.flops import training_flops_per_token
from gpu_advisor.core.planner.hardware import Links, links
from gpu_advisor.core.planner.performance import TrainingEstimate, estimate_training
from gpu_advisor.core.planner.report import tight_fit_warning
from gpu_advisor.core.planner.topology import (
    PIPELINE_MAX,
    ZERO_STAGES,
    GroupContext,
    GroupKey,
    GroupVerdict,
    Nearest,
    PlanOption,
    SearchSpace,
    divisors,
    idle_width,
    pipeline_step_saves,
    powers_of_two,
    smallest_fitting_count,
)
from gpu_advisor.core.results import MemoryBreakdown, ParallelPlan
from gpu_advisor.core.spec import Objective, Sharding, TrainingWorkload


class _Fit:
    """The fit test of one search (``need <= usable``), recording the interval of usable
    bytes ``[low, high)`` over which every test it made answers the same: a search is a
    function of those answers, so its result holds for any GPU in the interval."""

    def __init__(self, usable: float) -> None:
        self.usable = usable
        self.low = -math.inf
        self.high = math.inf

    def __call__(self, need_bytes: int) -> bool:
        if need_bytes <= self.usable:
            if need_bytes > self.low:
                self.low = need_bytes
            return True
        if need_bytes < self.high:
            self.high = need_bytes
        return False


class _Sweep:
    """The most-sharded plan of each PP degree of one TP degree and GPU count, with its
    requirement (:meth:`TrainingPlanner._sweep`): entries are computed on first demand and
    remembered, so a later caller reads them and goes on from there. It keeps data only --
    the planner that computes an entry is passed to :meth:`reach` -- so the planner and its
    sweeps hold no reference cycle: refcounting frees a request's search state when the
    request ends, without waiting for the cyclic garbage collector."""

    __slots__ = ("_degrees", "_next", "_previous", "least", "needs", "plans", "t", "total")

    def __init__(self, t: int, total: int, degrees: list[int]) -> None:
        self.t = t
        self.total = total
        self._degrees = degrees
        self._next = 0  # position in ``_degrees`` of the next PP degree to ask about
        self._previous: tuple[int, int] | None = None  # (p, requirement) of the last entry
        self.plans: list[ParallelPlan] = []
        self.needs: list[MemoryBreakdown] = []
        self.least: int | None = None
        """The smallest requirement (bytes) of the entries computed so far; None before any."""

    def reach(self, position: int, planner: TrainingPlanner) -> bool:
        """Whether the sweep has an entry at ``position`` (computing those up to it with
        ``planner``). Stops once a deeper pipeline saves under :data:`PIPELINE_MIN_SAVING`
        of the requirement: PP then only adds bubble (with ZeRO-3 the model states are
        already sharded over every GPU whatever PP is)."""
        while position >= len(self.needs):
            if self._next >= len(self._degrees):
                return False
            p = self._degrees[self._next]
            self._next += 1
            loosest = planner._loosest(self.t, p, self.total)
            need = planner.space.memory(loosest)
            if need is None:
                continue
            self.plans.append(loosest)
            self.needs.append(need)
            if self.least is None or need.total_bytes < self.least:
                self.least = need.total_bytes
            previous = self._previous
            if previous is not None and not pipeline_step_saves(
                previous[1], need.total_bytes, previous[0], p
            ):
                self._next = len(self._degrees)  # this entry is the last
            self._previous = (p, need.total_bytes)
        return True


class _Found(Struct, frozen=True):
    """A search's result and the usable bytes ``[low, high)`` it holds for."""

    low: float
    high: float
    plans: list[ParallelPlan]
    nearest: Nearest


QLORA_SHARDINGS: tuple[Sharding, ...] = ("none", "zero3")
"""Multi-GPU QLoRA runs as plain data parallel (DDP) or with the NF4 base sharded ZeRO-3 /
FSDP style (Answer.AI's FSDP+QLoRA, "You can now train a 70b language model at home", 2024;
Hugging Face PEFT docs, "FSDP + QLoRA" and "DeepSpeed ZeRO-3 + QLoRA"). bitsandbytes' NF4
``Params4bit`` base layers have no tensor- or pipeline-parallel split in the PEFT / HF
Trainer stack, so QLoRA plans keep TP = PP = 1; LoRA over a 16-bit base may use TP."""


def _plan(t: int, p: int, d: int, e: int, sharding: Sharding) -> ParallelPlan:
    """A training plan of TP ``t``, PP ``p``, DP ``d``, EP ``e``; sequence parallel wherever
    there is tensor parallel (Korthikanti et al. 2022: it only saves memory)."""
    return ParallelPlan(
        tensor_parallel=t,
        pipeline_parallel=p,
        data_parallel=d,
        expert_parallel=e,
        sharding=sharding,
        sequence_parallel=t > 1,
    )


ROOMIER_SLOWDOWN = 0.01
"""A plan that leaves under 5 % of each GPU free gives way to a more sharded one of the same
shape that leaves the room, if that one is at most this much slower."""

PARAMETER_SHARDINGS = frozenset({"zero2", "zero3", "fsdp"})
"""Shardings that communicate every micro-batch: gradients reduce-scattered (ZeRO-2) and, for
ZeRO-3 / FSDP, parameters all-gathered in forward and backward (Rajbhandari et al. 2020,
section 7.2)."""

PIPELINE_SHARDINGS: tuple[Sharding, ...] = ("none", "zero1", "fsdp")
"""Shardings searched with pipeline parallel > 1. DeepSpeed's ``PipelineEngine`` asserts
"ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism" (ZeRO-1 only), as does
Megatron-LM's distributed optimizer (ZeRO-1-like); sharding parameters and gradients across
data-parallel ranks with PP is FSDP2 + PP (torchtitan, "FSDP + TP + PP" 3D parallelism), whose
memory is ZeRO-3's with one transformer block gathered at a time."""


class TrainingPlanner:
    """Training plans for the groups of one request."""

    def __init__(
        self, space: SearchSpace, workload: TrainingWorkload, objective: Objective = "total_cost"
    ) -> None:
        self.space = space
        self.workload = workload
        # Adding nodes only shortens the job (and costs more: communication is added, billed
        # GPU-hours never fall in this model), so more nodes than the first fitting count
        # are worth pricing only for time_to_result or to meet a deadline.
        self.all_node_counts = objective == "time_to_result"
        self.qlora = workload.method == "qlora"
        self.shardings: tuple[Sharding, ...] = (
            (workload.sharding,)
            if workload.sharding
            else QLORA_SHARDINGS
            if self.qlora
            else ZERO_STAGES
        )
        self._speeds: dict[tuple[Any, ...], dict[ParallelPlan, TrainingEstimate]] = {}
        self._flops = training_flops_per_token(space.arch, workload)
        # Groups that share a GPU count share their searches wherever the usable memory
        # compares alike with every requirement the search asked about.
        self._fits: dict[tuple[int, int, int], list[_Found]] = {}
        self._sweeps: dict[int, dict[int, _Sweep]] = {}  # TP -> GPUs -> sweep
        self._nodes: dict[tuple[int, int, int], list[tuple[float, float, int | None]]] = {}
        self._pipelines: dict[int, list[int]] = {}  # GPUs per TP group -> PP degrees

    def tensor_degrees(self, gpus_per_node: int, tp_cap: int) -> list[int]:
        """TP degrees searched (:meth:`SearchSpace.tensor_degrees`; 1 for QLoRA)."""
        if self.qlora:
            return [1]
        return self.space.tensor_degrees(gpus_per_node, tp_cap)

    def first_fits(
        self,
        gpus_per_node: int,
        nodes: int,
        tp_cap: int,
        usable: float,
        nearest: Nearest,
    ) -> list[ParallelPlan]:
        """Per TP degree, the first fitting (PP, EP, ZeRO) plan on ``nodes`` nodes of
        ``gpus_per_node`` GPUs each.

        ``nearest`` keeps the smallest requirement seen (for rejection sentences).
        """
        # TP never exceeds the node: caps above it search alike (and share the search)
        tp_cap = min(tp_cap, gpus_per_node)
        searches = self._fits.setdefault((gpus_per_node, nodes, tp_cap), [])
        for found in searches:
            if found.low <= usable < found.high:
                break
        else:
            seen = Nearest()
            fit = _Fit(usable)
            plans = self._search(gpus_per_node, nodes, tp_cap, fit, seen)
            found = _Found(fit.low, fit.high, plans, seen)
            searches.append(found)
        nearest.merge(found.nearest)
        return found.plans

    def fits_somewhere(self, t: int, total: int, fit: _Fit) -> bool:
        """Whether a most-sharded plan of TP ``t`` over ``total`` GPUs fits at some PP degree
        (``fit``: the test against the group's usable bytes; enough to explain a rejection:
        "needs 4 nodes ...")."""
        sweep = self._sweep(t, total)
        # Some entry fits where the least computed so far does (for any usable bytes from
        # that least up, which ``fit`` records); else only entries not computed yet may, and
        # they are computed as far as the first that fits, as a scan from the first would.
        if sweep.least is not None and fit(sweep.least):
            return True
        position = len(sweep.needs)
        while sweep.reach(position, self):
            if fit(sweep.needs[position].total_bytes):
                return True
            position += 1
        return False

    def fewest_nodes(
        self, gpus_per_node: int, tp_cap: int, max_nodes: int, usable: float
    ) -> int | None:
        """The fewest nodes (up to ``max_nodes``) of ``gpus_per_node`` GPUs on which a plan at
        the widest TP degree fits (:meth:`fits_somewhere`), or None. The widest TP holds the
        least per GPU: it divides weights, gradients, optimizer state and (with sequence
        parallel) activations alike. (Plans that leave GPUs idle hold more per GPU than those
        using them all, so they are not probed.)

        Shared by every group of the GPU count and widest TP degree whose usable bytes compare
        alike with each requirement the search asked about (as :meth:`first_fits`).
        """
        degrees = self.tensor_degrees(gpus_per_node, tp_cap)
        if not degrees:
            return None
        t = degrees[-1]
        searches = self._nodes.setdefault((gpus_per_node, t, max_nodes), [])
        for low, high, nodes in searches:
            if low <= usable < high:
                return nodes
        fit = _Fit(usable)
        if max_nodes == 1:  # smallest_fitting_count's one probe
            nodes = 1 if self.fits_somewhere(t, gpus_per_node, fit) else None
        else:
            nodes = smallest_fitting_count(
                lambda n: self.fits_somewhere(t, gpus_per_node * n, fit), max_nodes
            )
        searches.append((fit.low, fit.high, nodes))
        return nodes

    def _stages(self, data_parallel: int, pipeline_parallel: int = 1) -> tuple[Sharding, ...]:
        """ZeRO stages searched: with one data-parallel rank ZeRO shards nothing (only a
        sharding the workload asks for is kept). Beside pipeline parallel the searched stages
        are :data:`PIPELINE_SHARDINGS` (DeepSpeed's pipeline engine takes ZeRO-1 at most;
        parameter sharding with PP is FSDP2 + PP as in torchtitan)."""
        if len(self.shardings) == 1:
            return self.shardings
        if data_parallel == 1:
            return ("none",)
        if pipeline_parallel > 1:
            return PIPELINE_SHARDINGS  # (QLoRA plans keep PP = 1)
        return self.shardings

    def _pipeline_degrees(self, t: int, total: int) -> list[int]:
        """PP degrees for TP ``t`` over ``total`` GPUs: the divisors of ``total / t`` (pipeline
        stages need not be a power of two), at most the layers and :data:`PIPELINE_MAX`; only
        1 for QLoRA (:data:`QLORA_SHARDINGS`). Memoised (callers only read the list)."""
        if self.qlora:
            return [1]
        groups = total // t
        found = self._pipelines.get(groups)
        if found is None:
            limit = min(self.space.arch.num_layers, PIPELINE_MAX)
            found = self._pipelines[groups] = divisors(groups, limit)
        return found

    def _loosest(self, t: int, p: int, total: int) -> ParallelPlan:
        """The most-sharded plan of ``(t, p)``: the widest EP and the last ZeRO stage."""
        d = total // (t * p)
        return _plan(t, p, d, self.space.expert_degrees(d)[-1], self._stages(d, p)[-1])

    def _sweep(self, t: int, total: int) -> _Sweep:
        """The most-sharded plan of each PP degree for TP ``t`` over ``total`` GPUs, with its
        requirement, PP ascending, computed as callers go (:meth:`_Sweep.reach`) and
        remembered for the next caller."""
        by_total = self._sweeps.get(t)
        if by_total is None:
            by_total = self._sweeps[t] = {}
        sweep = by_total.get(total)
        if sweep is None:
            sweep = by_total[total] = _Sweep(t, total, self._pipeline_degrees(t, total))
        return sweep

    def _search(
        self,
        gpus_per_node: int,
        nodes: int,
        tp_cap: int,
        fit: _Fit,
        nearest: Nearest,
    ) -> list[ParallelPlan]:
        total = gpus_per_node * nodes
        degrees = self.tensor_degrees(gpus_per_node, tp_cap)
        if not degrees:
            return []
        # Narrower TP holds more per GPU: when no most-sharded plan of the widest fits, none
        # can (and ``nearest`` then holds the least any plan needs).
        sweep = self._sweep(degrees[-1], total)
        position = 0
        while sweep.reach(position, self):
            if fit(nearest.note(sweep.plans[position], sweep.needs[position])):
                break
            position += 1
        else:
            return []
        fitting: list[ParallelPlan] = []
        for t in degrees:
            found = self._first_plan(t, total, fit, nearest)
            if found is None:
                continue
            fitting.append(found)
            if found.sharding in PARAMETER_SHARDINGS and len(self.shardings) > 1:
                # ZeRO-2/3 and FSDP communicate every micro-batch; a deeper pipeline that
                # keeps parameters and gradients whole may be much faster (the caller times
                # both): 671B on 80 GPUs, TP=8 x DP=10 ZeRO-3 runs at about 1 % MFU where
                # TP=8 x PP=10 runs at 25 %
                whole = self._first_unsharded(t, total, fit)
                if whole is not None and whole != found:
                    fitting.append(whole)
        return fitting

    def _first_unsharded(self, t: int, total: int, fit: _Fit) -> ParallelPlan | None:
        """The smallest PP degree at which a plan of TP ``t`` fits with parameters and
        gradients unsharded (no ZeRO, or ZeRO-1), the narrowest EP first."""
        for p in self._pipeline_degrees(t, total):
            d = total // (t * p)
            stages = [s for s in self._stages(d, p) if s not in PARAMETER_SHARDINGS]
            experts = self.space.expert_degrees(d)
            # the loosest such plan first: when it does not fit, none of this degree does
            if not stages or not self._plan_fits(_plan(t, p, d, experts[-1], stages[-1]), fit):
                continue
            for e in experts:
                for stage in stages:
                    plan = _plan(t, p, d, e, stage)
                    if self._plan_fits(plan, fit):
                        return plan
        return None

    def _first_plan(self, t: int, total: int, fit: _Fit, nearest: Nearest) -> ParallelPlan | None:
        """The first fitting plan of TP ``t``: the smallest PP degree at which one fits,
        then the preferred EP and ZeRO stage there. At each PP degree the preferred plan is
        asked first (it usually fits), then the most-sharded one; the PP degrees stop where
        :meth:`_sweep` stops."""
        previous: tuple[int, int] | None = None  # (p, least requirement)
        for p in self._pipeline_degrees(t, total):
            d = total // (t * p)
            experts = self.space.expert_degrees(d)
            stages = self._stages(d, p)
            preferred = _plan(t, p, d, experts[0], stages[0])
            need = self.space.memory(preferred)
            if need is not None and fit(nearest.note(preferred, need)):
                return preferred
            loosest = self._loosest(t, p, total)
            least = self.space.memory(loosest)
            if least is None:
                continue
            if fit(nearest.note(loosest, least)):
                found = self._first_fit(t, p, d, experts, stages, fit)
                if found is not None:
                    return found
            if previous is not None and not pipeline_step_saves(
                previous[1], least.total_bytes, previous[0], p
            ):
                return None
            previous = (p, least.total_bytes)
        return None

    def _first_fit(
        self,
        t: int,
        p: int,
        d: int,
        experts: list[int],
        stages: tuple[Sharding, ...],
        fit: _Fit,
    ) -> ParallelPlan | None:
        """The first fitting plan in preference order (less EP, then the lowest ZeRO stage).

        Memory falls along the ZeRO stages, so for each EP degree the preferred stage is asked
        first, then the loosest (a degree that cannot fit costs two calls), and the first fitting
        stage between them is found by binary search.
        """
        last = len(stages) - 1
        for e in experts:
            first = _plan(t, p, d, e, stages[0])
            if self._plan_fits(first, fit):
                return first
            loosest = _plan(t, p, d, e, stages[last]) if last else first
            if not self._plan_fits(loosest, fit):
                continue
            low, high = 1, last  # stage ``high`` fits, stage 0 does not
            found = loosest
            while low < high:
                middle = (low + high) // 2
                plan = _plan(t, p, d, e, stages[middle])
                if self._plan_fits(plan, fit):
                    high, found = middle, plan
                else:
                    low = middle + 1
            return found
        return None

    def _plan_fits(self, plan: ParallelPlan, fit: _Fit) -> bool:
        found = self.space.memory(plan)
        return found is not None and fit(found.total_bytes)

    def node_limit(self, key: GroupKey) -> int:
        """Most nodes a plan of the group may use: ``max_nodes`` (1 without a cluster
        network), and no more than ``max_gpus`` allow."""
        constraints = self.space.constraints
        limit = constraints.max_nodes if key.network_gbit_per_s else 1
        if constraints.max_gpus is not None:
            limit = min(limit, constraints.max_gpus // key.gpu_count)
        return limit

    @staticmethod
    def node_counts(first: int, limit: int) -> list[int]:
        """Node counts priced once ``first`` is the fewest that fit: ``first``, then the
        powers of two above it, then ``limit`` (more nodes only shorten the job; the doubling
        keeps the search bounded, the limit is the fastest allowed)."""
        counts = [first, *(n for n in powers_of_two(limit) if n > first)]
        if counts[-1] != limit:
            counts.append(limit)
        return counts

    def _speed(
        self, plan: ParallelPlan, memory: MemoryBreakdown, ctx: GroupContext, link: Links
    ) -> TrainingEstimate:
        """:func:`estimate_training`, memoised across groups with the same GPU and links
        (``memory`` is the plan's: one requirement per plan in a request)."""
        key = (ctx.compute, link, ctx.efficiency)
        speeds = self._speeds.get(key)
        if speeds is None:
            speeds = self._speeds[key] = {}
        found = speeds.get(plan)
        if found is None:
            found = estimate_training(
                self.space.arch,
                self.workload,
                plan,
                memory,
                ctx.compute,
                link,
                ctx.efficiency,
                flops=self._flops,
            )
            speeds[plan] = found
        return found

    def _roomier(
        self,
        chosen: tuple[float, ParallelPlan, MemoryBreakdown, TrainingEstimate],
        ctx: GroupContext,
        link: Links,
    ) -> tuple[float, ParallelPlan, MemoryBreakdown, TrainingEstimate]:
        """The chosen plan, or -- when it leaves under 5 % of each GPU free
        (:func:`~.report.tight_fit_warning`) -- the first higher ZeRO stage of the same shape
        that leaves that room and is as fast (within :data:`ROOMIER_SLOWDOWN`): sharding
        more costs traffic that backward mostly hides, and a plan at 99 % of memory is the
        one that runs out (8B full fine-tuning on 8 x H100: ZeRO-1 at 4 % headroom or ZeRO-2
        at 21 %, both 4.2 h)."""
        seconds, plan, memory, _ = chosen
        if tight_fit_warning(memory) is None:
            return chosen
        stages = self._stages(plan.data_parallel, plan.pipeline_parallel)
        later = stages[stages.index(plan.sharding) + 1 :] if plan.sharding in stages else ()
        for stage in later:
            candidate = structs.replace(plan, sharding=stage)
            roomy = self.space.memory(candidate, ctx.key.memory_exposed_bytes)
            if roomy is None or roomy.total_bytes > ctx.usable_bytes:
                continue
            if tight_fit_warning(roomy) is not None:
                continue
            estimate = self._speed(candidate, roomy, ctx, link)
            pace = 1.0 / estimate.tokens_per_second
            if pace <= seconds * (1.0 + ROOMIER_SLOWDOWN):
                return (pace, candidate, roomy, estimate)
        return chosen

    def _wider_tp(self, narrower: int, g: int, tp_cap: int) -> bool:
        """Whether ``narrower`` GPUs per node allow a wider TP than all ``g`` do. Only then
        can a plan leaving GPUs idle fit where none using them all does: at one TP degree
        the per-GPU requirement never grows with the GPUs (ZeRO / PP shard over all of them,
        activations divide by TP only)."""
        widest = self.tensor_degrees(narrower, tp_cap)[-1:]
        return bool(widest) and widest[0] > max(self.tensor_degrees(g, tp_cap), default=0)

    def _fast_enough(self, option: PlanOption) -> bool:
        """No deadline, or this option meets it: larger node counts would only cost more."""
        deadline = self.space.constraints.deadline_hours
        return deadline is None or option.time_hours is None or option.time_hours <= deadline

    def plan(self, ctx: GroupContext) -> GroupVerdict:
        """Per node count, the fastest fitting plan; or why none fits. The fewest nodes that
        fit are found first (:func:`smallest_fitting_count`: any count, not only powers of
        two); larger counts (:meth:`node_counts`) are priced only for ``time_to_result`` or
        to meet a deadline. At each node count, plans using every GPU come first; only where
        none fits are plans on :func:`idle_width` GPUs of each node searched."""
        key, gpu = ctx.key, ctx.gpu
        g = key.gpu_count
        nearest = Nearest()
        options: list[PlanOption] = []
        searched: dict[int, tuple[int, list[ParallelPlan]]] = {}  # nodes -> (width, plans)

        def fitting(n: int) -> tuple[int, list[ParallelPlan]]:
            found = searched.get(n)
            if found is None:
                width = g
                plans = self.first_fits(g, n, ctx.tp_cap, ctx.usable_bytes, nearest)
                narrower = idle_width(g)
                if not plans and narrower is not None and self._wider_tp(narrower, g, ctx.tp_cap):
                    width = narrower
                    plans = self.first_fits(width, n, ctx.tp_cap, ctx.usable_bytes, nearest)
                found = searched[n] = (width, plans)
            return found

        limit = self.node_limit(key)
        if limit == 1:  # smallest_fitting_count's one probe
            first = 1 if fitting(1)[1] else None
        else:
            first = smallest_fitting_count(lambda n: bool(fitting(n)[1]), limit)
        for n in self.node_counts(first, limit) if first is not None else []:
            width, plans = fitting(n)
            link = links(gpu, min(ctx.domain, width), width, n, key.network_gbit_per_s)
            fastest: tuple[float, ParallelPlan, MemoryBreakdown, TrainingEstimate] | None = None
            for plan in plans:
                # the requirement the search sized (the speed reads only the requirement);
                # only the fastest plan's breakdown is re-based on this GPU's capacity
                memory = self.space.memory(plan)
                if memory is None:  # pragma: no cover - the requirement call accepted it
                    continue
                estimate = self._speed(plan, memory, ctx, link)
                seconds_per_token = 1.0 / estimate.tokens_per_second
                if fastest is None or seconds_per_token < fastest[0]:
                    fastest = (seconds_per_token, plan, memory, estimate)
            if fastest is not None:
                seconds_per_token, plan, _, estimate = fastest
                memory = self.space.memory(plan, key.memory_exposed_bytes)
                if memory is None:  # pragma: no cover - the requirement call accepted it
                    continue
                fastest = (seconds_per_token, plan, memory, estimate)
                _, plan, memory, estimate = self._roomier(fastest, ctx, link)
                options.append(
                    PlanOption(
                        nodes=n,
                        plan=plan,
                        memory=memory,
                        training=estimate,
                        time_hours=estimate.time_to_result_hours,
                        tokens_per_second=estimate.tokens_per_second,
                        notes=self.space.topology_notes(plan, ctx, n),
                        warnings=ctx.warnings,
                    )
                )
                if not self.all_node_counts and self._fast_enough(options[-1]):
                    break
        if options:
            return GroupVerdict(options=tuple(options))

        def fits_on(tp_cap: int, max_nodes: int) -> int | None:
            return self.fewest_nodes(g, tp_cap, max_nodes, ctx.usable_bytes)

        return GroupVerdict(rejection=self.space.no_fit_reason(ctx, fits_on, nearest))
