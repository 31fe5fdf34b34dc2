"""Training plans for one group: per node count, the fastest plan that fits.

The search space and its bounds are described in :mod:`gpu_advisor.core.planner.topology`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpu_advisor.core.planner.flops import training_flops_per_token
from gpu_advisor.core.planner.hardware import Links, links
from gpu_advisor.core.planner.performance import TrainingEstimate, estimate_training
from gpu_advisor.core.planner.topology import (
    PIPELINE_MAX,
    PIPELINE_MIN_SAVING,
    ZERO_STAGES,
    GroupContext,
    GroupKey,
    GroupVerdict,
    PlanOption,
    SearchSpace,
    powers_of_two,
    smallest_fitting_power,
)
from gpu_advisor.core.results import MemoryBreakdown, ParallelPlan
from gpu_advisor.core.spec import Objective, Sharding, TrainingWorkload


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
        self.shardings: tuple[Sharding, ...] = (
            (workload.sharding,) if workload.sharding else ZERO_STAGES
        )
        # Groups that share a GPU count and usable memory share their fitting plans.
        self._speeds: dict[tuple[Any, ...], TrainingEstimate] = {}
        self._flops = training_flops_per_token(space.arch, workload)
        self._least: dict[tuple[int, int, int], int | None] = {}
        self._sweeps: dict[tuple[int, int], list[tuple[ParallelPlan, MemoryBreakdown]]] = {}
        self._fits: dict[
            tuple[int, int, int, float], tuple[list[ParallelPlan], MemoryBreakdown | None]
        ] = {}

    def first_fits(
        self,
        gpus_per_node: int,
        nodes: int,
        tp_cap: int,
        usable: float,
        best: list[MemoryBreakdown],
    ) -> list[ParallelPlan]:
        """Per TP degree, the first fitting (PP, EP, ZeRO) plan on ``nodes`` nodes.

        ``best`` keeps the smallest requirement seen (for rejection sentences).
        """
        key = (gpus_per_node, nodes, tp_cap, usable)
        cached = self._fits.get(key)
        if cached is None:
            seen: list[MemoryBreakdown] = []
            plans = self._search(gpus_per_node, nodes, tp_cap, usable, seen)
            cached = (plans, seen[0] if seen else None)
            self._fits[key] = cached
        plans, smallest = cached
        if smallest is not None and (not best or smallest.total_bytes < best[0].total_bytes):
            best[:] = [smallest]
        return plans

    def fits_somewhere(self, gpus_per_node: int, nodes: int, tp_cap: int, usable: float) -> bool:
        """Whether any plan on ``nodes`` nodes fits ``usable`` bytes: the smallest requirement
        of the most-sharded plans (enough to explain a rejection)."""
        least = self._least_need(gpus_per_node, nodes, tp_cap)
        return least is not None and least <= usable

    def _least_need(self, gpus_per_node: int, nodes: int, tp_cap: int) -> int | None:
        """Smallest per-GPU requirement over the most-sharded plans of ``nodes`` nodes at the
        widest TP degree, memoised (it does not depend on the GPU, so groups of any GPU share
        it). Used only to explain a rejection ("needs 4 nodes")."""
        key = (gpus_per_node, nodes, tp_cap)
        if key not in self._least:
            total = gpus_per_node * nodes
            # The widest TP degree holds the least per GPU: it divides weights, gradients,
            # optimizer state and (with sequence parallel) activations alike.
            widest = self.space.tensor_degrees(gpus_per_node, tp_cap)[-1:]
            needs = [need.total_bytes for t in widest for _, need in self._pipeline_sweep(t, total)]
            self._least[key] = min(needs) if needs else None
        return self._least[key]

    def _pipeline_sweep(self, t: int, total: int) -> list[tuple[ParallelPlan, MemoryBreakdown]]:
        """:meth:`_sweep`, memoised per (TP, GPUs): groups of any GPU share it."""
        key = (t, total)
        found = self._sweeps.get(key)
        if found is None:
            found = list(self._sweep(t, total))
            self._sweeps[key] = found
        return found

    def _sweep(self, t: int, total: int) -> Iterator[tuple[ParallelPlan, MemoryBreakdown]]:
        """The most-sharded plan of each PP degree for TP ``t`` over ``total`` GPUs, with its
        requirement, PP ascending. Stops once doubling PP saves under
        :data:`PIPELINE_MIN_SAVING` of the requirement: PP then only adds bubble (with ZeRO-3
        the model states are already sharded over every GPU whatever PP is)."""
        previous: int | None = None
        for p in powers_of_two(min(self.space.arch.num_layers, total // t, PIPELINE_MAX)):
            if total % (t * p):
                continue
            d = total // (t * p)
            loosest = ParallelPlan(
                tensor_parallel=t,
                pipeline_parallel=p,
                data_parallel=d,
                expert_parallel=self.space.expert_degrees(d)[-1],
                sharding=self.shardings[-1],
                sequence_parallel=t > 1,
            )
            need = self.space.memory(loosest)
            if need is None:
                continue
            yield loosest, need
            if previous is not None and need.total_bytes > previous * (1 - PIPELINE_MIN_SAVING):
                return
            previous = need.total_bytes

    def _search(
        self,
        gpus_per_node: int,
        nodes: int,
        tp_cap: int,
        usable: float,
        best: list[MemoryBreakdown],
    ) -> list[ParallelPlan]:
        total = gpus_per_node * nodes
        fitting: list[ParallelPlan] = []
        degrees = self.space.tensor_degrees(gpus_per_node, tp_cap)
        # Narrower TP holds more per GPU: when the widest cannot fit, none can.
        widest = self._pipeline_sweep(degrees[-1], total) if degrees else []
        if widest:
            smallest = min((need for _, need in widest), key=lambda need: need.total_bytes)
            if not best or smallest.total_bytes < best[0].total_bytes:
                best[:] = [smallest]
            if smallest.total_bytes > usable:
                return fitting
        for t in degrees:
            for loosest, need in self._pipeline_sweep(t, total):
                if not best or need.total_bytes < best[0].total_bytes:
                    best[:] = [need]
                if need.total_bytes > usable:
                    continue
                p, d = loosest.pipeline_parallel, loosest.data_parallel
                found = self._first_fit(t, p, d, self.space.expert_degrees(d), usable)
                if found is not None:
                    fitting.append(found)
                    break
        return fitting

    def _first_fit(
        self, t: int, p: int, d: int, experts: list[int], usable: float
    ) -> ParallelPlan | None:
        """The first fitting plan in preference order (less EP, then the lowest ZeRO stage).

        Memory falls along the ZeRO stages, so for each EP degree the preferred stage is asked
        first, then the loosest (a degree that cannot fit costs two calls), and the first fitting
        stage between them is found by binary search. With one data-parallel rank ZeRO shards
        nothing: no stage is searched.
        """
        stages = self.shardings if d > 1 or len(self.shardings) == 1 else ("none",)
        for e in experts:
            plans = [
                ParallelPlan(
                    tensor_parallel=t,
                    pipeline_parallel=p,
                    data_parallel=d,
                    expert_parallel=e,
                    sharding=stage,
                    sequence_parallel=t > 1,
                )
                for stage in stages
            ]
            if self._plan_fits(plans[0], usable):
                return plans[0]
            if not self._plan_fits(plans[-1], usable):
                continue
            low, high = 1, len(plans) - 1  # plans[high] fits, plans[0] does not
            while low < high:
                middle = (low + high) // 2
                if self._plan_fits(plans[middle], usable):
                    high = middle
                else:
                    low = middle + 1
            return plans[high]
        return None

    def _plan_fits(self, plan: ParallelPlan, usable: float) -> bool:
        found = self.space.memory(plan)
        return found is not None and found.total_bytes <= usable

    def node_counts(self, key: GroupKey) -> list[int]:
        """Node counts searched: powers of two within max_nodes and max_gpus; 1 without a
        cluster network."""
        constraints = self.space.constraints
        limit = constraints.max_nodes if key.network_gbit_per_s else 1
        if constraints.max_gpus is not None:
            limit = min(limit, constraints.max_gpus // key.gpu_count)
        return list(powers_of_two(limit))

    def _speed(
        self, plan: ParallelPlan, memory: MemoryBreakdown, ctx: GroupContext, link: Links
    ) -> TrainingEstimate:
        """:func:`estimate_training`, memoised across groups with the same GPU and links."""
        key = (plan, memory.total_bytes, ctx.compute, link, ctx.efficiency)
        found = self._speeds.get(key)
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
            self._speeds[key] = found
        return found

    def _fast_enough(self, option: PlanOption) -> bool:
        """No deadline, or this option meets it: larger node counts would only cost more."""
        deadline = self.space.constraints.deadline_hours
        return deadline is None or option.time_hours is None or option.time_hours <= deadline

    def plan(self, ctx: GroupContext) -> GroupVerdict:
        """Per node count, the fastest fitting plan; or why none fits. Node counts stop at the
        first that fits (meeting the deadline, if any) unless the objective is
        ``time_to_result``."""
        key, gpu = ctx.key, ctx.gpu
        g = key.gpu_count
        best: list[MemoryBreakdown] = []
        options: list[PlanOption] = []
        for n in self.node_counts(key):
            plans = self.first_fits(g, n, ctx.tp_cap, ctx.usable_bytes, best)
            link = links(gpu, ctx.domain, g, n, key.network_gbit_per_s)
            fastest: tuple[float, ParallelPlan, MemoryBreakdown, TrainingEstimate] | None = None
            for plan in plans:
                memory = self.space.memory(plan, key.memory_exposed_bytes)
                if memory is None:  # pragma: no cover - the requirement call accepted it
                    continue
                estimate = self._speed(plan, memory, ctx, link)
                seconds_per_token = 1.0 / estimate.tokens_per_second
                if fastest is None or seconds_per_token < fastest[0]:
                    fastest = (seconds_per_token, plan, memory, estimate)
            if fastest is not None:
                _, plan, memory, estimate = fastest
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
            return smallest_fitting_power(
                lambda n: self.fits_somewhere(g, n, tp_cap, ctx.usable_bytes), max_nodes
            )

        return GroupVerdict(rejection=self.space.no_fit_reason(ctx, fits_on, best))
