"""Serving plans: replica shape (TP x PP, EP), replicas and instances for one group.

A replica is ``t x p`` GPUs inside one node, or whole nodes when it is larger than a node
(then the group needs a cluster network). Replicas of a deployment are independent: they need
no network between them. The deployment is sized to hold ``concurrency`` sequences (the KV
pool of a replica bounds how many it holds) and to sustain ``target_tokens_per_second``.

Choice (DESIGN "Serving"): when the model fits one GPU, one GPU per replica is preferred
over splitting it with TP. TP is chosen because the model does not fit, or for throughput when
the objective is ``cost_per_million_tokens`` or a throughput target is set: then the replica
shape with the fewest instances, then the most output tokens per GPU, wins (ties to the
smaller replica). The rationale says which.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from gpu_advisor.core.planner.hardware import links
from gpu_advisor.core.planner.performance import (
    InferenceEstimate,
    estimate_inference,
    max_concurrency,
)
from gpu_advisor.core.planner.topology import (
    PIPELINE_MAX,
    GroupContext,
    GroupVerdict,
    PlanOption,
    SearchSpace,
    powers_of_two,
    smallest_fitting_power,
)
from gpu_advisor.core.results import MemoryBreakdown, ParallelPlan, Reason
from gpu_advisor.core.spec import InferenceWorkload, Objective


def _total(memory: MemoryBreakdown | None) -> int | None:
    return None if memory is None else memory.total_bytes


class ServingPlanner:
    """Serving plans for the groups of one request."""

    def __init__(self, space: SearchSpace, workload: InferenceWorkload, objective: Objective):
        self.space = space
        self.workload = workload
        self.throughput_matters = (
            objective == "cost_per_million_tokens" or workload.target_tokens_per_second is not None
        )

    def replica_shapes(
        self, g: int, tp_cap: int, max_replica_nodes: int
    ) -> Iterator[tuple[int, int]]:
        """(t, p) for each replica size ``r = t x p``, ascending ``r``; TP first within a size
        (TP speeds decode, PP only adds memory)."""
        tps = sorted(self.space.tensor_degrees(g, tp_cap), reverse=True)
        for r in powers_of_two(g * max_replica_nodes):
            if (r > g and r % g) or (r <= g and g % r):
                continue
            for t in tps:
                if r % t == 0 and r // t <= min(self.space.arch.num_layers, PIPELINE_MAX):
                    yield t, r // t

    def fit_replica(
        self,
        t: int,
        p: int,
        ctx: GroupContext,
        best: list[MemoryBreakdown],
        pool: list[Reason],
    ) -> tuple[ParallelPlan, MemoryBreakdown, int | None] | None:
        """The first EP degree at which a ``t x p`` replica fits and its KV pool holds one
        full-context sequence; ``best`` / ``pool`` collect what a rejection would cite."""
        memory_of, usable = self.space.memory, ctx.usable_bytes
        for e in self.space.expert_degrees(1):
            plan = ParallelPlan(tensor_parallel=t, pipeline_parallel=p, expert_parallel=e)
            need = memory_of(plan)
            if need is None:
                continue
            if not best or need.total_bytes < best[0].total_bytes:
                best[:] = [need]
            if need.total_bytes > usable:
                continue
            memory = memory_of(plan, ctx.key.memory_exposed_bytes)
            if memory is None:  # pragma: no cover - the requirement call accepted it
                continue
            limit = max_concurrency(memory, self.workload, usable)
            if limit is not None and limit < 1:
                non_kv = memory.total_bytes - memory.kv_cache_bytes
                kv_pool = (
                    memory.kv_pool_bytes
                    if memory.kv_pool_bytes is not None
                    else int(usable - non_kv)
                )
                pool[:] = [
                    Reason(
                        code="kv_pool_too_small",
                        data={
                            "gpu": ctx.gpu.id,
                            "kv_pool_bytes": kv_pool,
                            "sequence_bytes": int(
                                memory.kv_cache_bytes / self.workload.concurrency
                            ),
                            "context_length": self.workload.context_length,
                            "tensor_parallel": t,
                            "pipeline_parallel": p,
                        },
                    )
                ]
                continue
            return plan, memory, limit
        return None

    def plan(self, ctx: GroupContext) -> GroupVerdict:
        """The chosen deployment of one group, or why none is possible."""
        key = ctx.key
        g = key.gpu_count
        max_replica_nodes = self.space.constraints.max_nodes if key.network_gbit_per_s else 1
        best: list[MemoryBreakdown] = []
        pool: list[Reason] = []
        limits: list[Reason] = []
        candidates: list[PlanOption] = []
        sizes_done: set[int] = set()
        for t, p in self.replica_shapes(g, ctx.tp_cap, max_replica_nodes):
            if t * p in sizes_done:
                continue
            if candidates and not self.throughput_matters:
                break
            fit = self.fit_replica(t, p, ctx, best, pool)
            if fit is None:
                continue
            sizes_done.add(t * p)
            option = self._deploy(ctx, *fit, limits)
            if option is not None:
                candidates.append(option)
        if candidates:
            return GroupVerdict(options=(self._choose(candidates, ctx),))
        if limits:
            return GroupVerdict(rejection=limits[0])
        if pool:
            return GroupVerdict(rejection=pool[0])

        def fits_on(tp_cap: int, max_nodes: int) -> int | None:
            def fits(nodes: int) -> bool:  # some replica of up to ``nodes`` nodes fits
                return any(
                    self.fit_replica(t, p, ctx, [], []) is not None
                    for t, p in self.replica_shapes(g, tp_cap, nodes)
                )

            return smallest_fitting_power(fits, max_nodes)

        return GroupVerdict(rejection=self.space.no_fit_reason(ctx, fits_on, best))

    def _deploy(
        self,
        ctx: GroupContext,
        replica: ParallelPlan,
        memory: MemoryBreakdown,
        limit: int | None,
        limits: list[Reason],
    ) -> PlanOption | None:
        """Size the deployment of one replica shape; None (with a reason in ``limits``) when
        it exceeds max_nodes or max_gpus."""
        key, workload, constraints = ctx.key, self.workload, self.space.constraints
        g = key.gpu_count
        r = replica.gpus
        replica_nodes = max(1, r // g)
        link = links(ctx.gpu, ctx.domain, g, replica_nodes, key.network_gbit_per_s)
        estimate: InferenceEstimate = estimate_inference(
            self.space.arch,
            workload,
            replica,
            memory,
            ctx.gpu,
            ctx.compute,
            link,
            limit,
            ctx.efficiency,
        )
        needed = 1
        if limit:
            needed = max(needed, math.ceil(workload.concurrency / limit))
        if workload.target_tokens_per_second is not None:
            needed = max(
                needed, math.ceil(workload.target_tokens_per_second / estimate.tokens_per_second)
            )
        if r <= g:
            nodes = math.ceil(needed / (g // r))
            replicas = nodes * (g // r)
        else:
            nodes = needed * replica_nodes
            replicas = needed
        if nodes > constraints.max_nodes:
            limits[:] = [
                Reason(
                    code="over_max_nodes",
                    data={
                        "gpu": ctx.gpu.id,
                        "gpu_count": g,
                        "nodes_needed": nodes,
                        "max_nodes": constraints.max_nodes,
                    },
                )
            ]
            return None
        if constraints.max_gpus is not None and nodes * g > constraints.max_gpus:
            limits[:] = [
                Reason(
                    code="over_max_gpus",
                    data={
                        "gpu": ctx.gpu.id,
                        "gpus_needed": nodes * g,
                        "max_gpus": constraints.max_gpus,
                    },
                )
            ]
            return None
        plan = ParallelPlan(
            tensor_parallel=replica.tensor_parallel,
            pipeline_parallel=replica.pipeline_parallel,
            data_parallel=replicas,
            expert_parallel=replica.expert_parallel,
        )
        return PlanOption(
            nodes=nodes,
            plan=plan,
            memory=memory,
            inference=estimate,
            replicas=replicas,
            time_hours=workload.serving_hours,
            tokens_per_second=replicas * estimate.tokens_per_second,
            notes=self.space.topology_notes(plan, ctx, replica_nodes),
            warnings=ctx.warnings,
        )

    def _choose(self, candidates: list[PlanOption], ctx: GroupContext) -> PlanOption:
        smallest = candidates[0]
        chosen = smallest
        if self.throughput_matters:
            chosen = min(
                candidates,
                key=lambda o: (o.nodes, -o.tokens_per_second / o.plan.gpus, o.plan.gpus),
            )
        replica_gpus = chosen.plan.tensor_parallel * chosen.plan.pipeline_parallel
        smallest_gpus = smallest.plan.tensor_parallel * smallest.plan.pipeline_parallel
        if chosen is not smallest:
            note = Reason(
                code="tp_for_throughput",
                data={
                    "replica_gpus": replica_gpus,
                    "smallest_replica_gpus": smallest_gpus,
                    "tokens_per_second_per_gpu": chosen.tokens_per_second / chosen.plan.gpus,
                    "smallest_tokens_per_second_per_gpu": smallest.tokens_per_second
                    / smallest.plan.gpus,
                },
            )
        elif replica_gpus == 1:
            note = Reason(code="single_gpu_replica", data={})
        else:
            note = Reason(
                code="split_to_fit",
                data={
                    "replica_gpus": replica_gpus,
                    "one_gpu_need_bytes": _total(self.space.memory(ParallelPlan())),
                    "usable_bytes": int(ctx.usable_bytes),
                },
            )
        return PlanOption(
            nodes=chosen.nodes,
            plan=chosen.plan,
            memory=chosen.memory,
            inference=chosen.inference,
            replicas=chosen.replicas,
            time_hours=chosen.time_hours,
            tokens_per_second=chosen.tokens_per_second,
            notes=(*chosen.notes, note),
            warnings=chosen.warnings,
        )
