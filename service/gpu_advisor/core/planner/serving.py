"""Serving plans: replica shape (TP x PP, EP), replicas and instances for one group.

A replica is ``t x p`` GPUs inside one node, or whole nodes when it is larger than a node
(then the group needs a cluster network). Replicas of a deployment are independent: they need
no network between them. The deployment is sized to hold ``concurrency`` sequences (the KV
pool of a replica bounds how many it holds) and to sustain ``target_tokens_per_second``.

Replica sizes, in the order they are tried (:meth:`ServingPlanner.replica_sizes`): the
divisors of the node's GPU count (so replicas fill the node: 6 GPUs hold replicas of 1, 2,
3 or 6 GPUs, e.g. TP=2 x PP=3), then -- only where none of those fits -- powers of two that
leave GPUs idle (4 on 6 GPUs, noted ``idle_gpus``: they are paid for), then whole nodes.

Choice (DESIGN "Serving"): when the model fits one GPU, one GPU per replica is preferred
over splitting it with TP. TP is chosen because the model does not fit, or for throughput when
the objective is ``cost_per_million_tokens`` or a throughput target is set: then the replica
shape with the fewest instances, then the most output tokens per paid GPU, wins (ties to the
smaller replica). The rationale says which.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

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
    Nearest,
    PlanOption,
    SearchSpace,
    divisors,
    powers_of_two,
)
from gpu_advisor.core.results import MemoryBreakdown, ParallelPlan, Reason
from gpu_advisor.core.spec import InferenceWorkload, Objective


def _total(memory: MemoryBreakdown | None) -> int | None:
    return None if memory is None else memory.total_bytes


class _ReplicaFit(NamedTuple):
    """A remembered :meth:`ServingPlanner.fit_replica` answer and what it noted."""

    result: tuple[ParallelPlan, MemoryBreakdown, int | None] | None
    nearest: Nearest
    pool: list[Reason]


class ServingPlanner:
    """Serving plans for the groups of one request."""

    def __init__(self, space: SearchSpace, workload: InferenceWorkload, objective: Objective):
        self.space = space
        self.workload = workload
        self.throughput_matters = (
            objective == "cost_per_million_tokens" or workload.target_tokens_per_second is not None
        )
        # Per-request memos: groups of one GPU type and count share their replica searches.
        self._replica_fits: dict[tuple[Any, ...], _ReplicaFit] = {}
        self._sizes: dict[tuple[int, int], list[tuple[int, bool]]] = {}
        self._shapes: dict[tuple[int, int, int], list[tuple[int, int]]] = {}
        self._fits_on: dict[tuple[Any, ...], int | None] = {}
        self._speeds: dict[tuple[Any, ...], InferenceEstimate] = {}

    def replica_sizes(self, g: int, max_replica_nodes: int) -> list[tuple[int, bool]]:
        """Replica sizes ``(r, idle)`` in the order they are tried: divisors of ``g``
        ascending, then powers of two below ``g`` that do not divide it (``idle``: the node
        keeps ``g mod r`` GPUs idle), then ``g`` times 2, 4, ... nodes. Memoised."""
        key = (g, max_replica_nodes)
        found = self._sizes.get(key)
        if found is None:
            inside = [(r, False) for r in divisors(g, g)]
            idle = [(r, True) for r in powers_of_two(g) if g % r]
            across = [(g * n, False) for n in powers_of_two(max_replica_nodes) if n > 1]
            found = self._sizes[key] = inside + idle + across
        return found

    def replica_shapes(self, r: int, g: int, tp_cap: int) -> list[tuple[int, int]]:
        """``(t, p)`` with ``t x p = r``, TP first (TP speeds decode, PP only adds memory):
        TP a power of two dividing ``r`` (inside one node) or, for a replica of whole nodes,
        dividing ``g``; PP at most the layers and :data:`PIPELINE_MAX`. Memoised."""
        key = (r, g, tp_cap)
        found = self._shapes.get(key)
        if found is None:
            tps = self.space.tensor_degrees(r if r <= g else g, tp_cap)
            most = min(self.space.arch.num_layers, PIPELINE_MAX)
            found = self._shapes[key] = [
                (t, r // t) for t in reversed(tps) if r % t == 0 and r // t <= most
            ]
        return found

    def fit_replica(
        self,
        t: int,
        p: int,
        ctx: GroupContext,
        nearest: Nearest,
        pool: list[Reason],
    ) -> tuple[ParallelPlan, MemoryBreakdown, int | None] | None:
        """The first EP degree at which a ``t x p`` replica fits and its KV pool holds one
        full-context sequence; ``nearest`` / ``pool`` collect what a rejection would cite.
        Memoised per GPU and usable bytes (the side effects are replayed)."""
        key = (t, p, ctx.key.memory_exposed_bytes, ctx.usable_bytes)
        found = self._replica_fits.get(key)
        if found is None:
            seen = Nearest()
            reasons: list[Reason] = []
            result = self._fit_replica(t, p, ctx, seen, reasons)
            found = self._replica_fits[key] = _ReplicaFit(result, seen, reasons[-1:])
        nearest.merge(found.nearest)
        if found.pool:  # the GPU's own id: GPUs of one capacity share the memo
            reason = found.pool[0]
            pool[:] = [Reason(code=reason.code, data={**reason.data, "gpu": ctx.gpu.id})]
        return found.result

    def replica_fits(self, t: int, p: int, ctx: GroupContext) -> bool:
        """Whether a ``t x p`` replica fits the group's GPU (:meth:`fit_replica`)."""
        found = self._replica_fits.get((t, p, ctx.key.memory_exposed_bytes, ctx.usable_bytes))
        if found is not None:
            return found.result is not None
        return self.fit_replica(t, p, ctx, Nearest(), []) is not None

    def _fit_replica(
        self,
        t: int,
        p: int,
        ctx: GroupContext,
        nearest: Nearest,
        pool: list[Reason],
    ) -> tuple[ParallelPlan, MemoryBreakdown, int | None] | None:
        memory_of, usable = self.space.memory, ctx.usable_bytes
        for e in self.space.expert_degrees(1):
            plan = ParallelPlan(tensor_parallel=t, pipeline_parallel=p, expert_parallel=e)
            # the requirement on this GPU (a serving engine's defaults depend on its size)
            memory = memory_of(plan, ctx.key.memory_exposed_bytes)
            if memory is None:
                continue
            if nearest.note(plan, memory) > usable:
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
        nearest = Nearest()
        pool: list[Reason] = []
        limits: list[Reason] = []
        candidates: list[PlanOption] = []
        for r, idle in self.replica_sizes(g, max_replica_nodes):
            if candidates and (not self.throughput_matters or idle):
                # plans that use every GPU win over plans that leave some idle
                break
            if candidates and max(1, r // g) > min(c.nodes for c in candidates):
                # replicas of more nodes than a deployment found need more instances than it:
                # they cannot win (the choice ranks fewer instances first), nor can larger ones
                break
            for t, p in self.replica_shapes(r, g, ctx.tp_cap):
                fit = self.fit_replica(t, p, ctx, nearest, pool)
                if fit is None:
                    continue
                option = self._deploy(ctx, *fit, limits)
                if option is not None:
                    candidates.append(option)
                break
        if candidates:
            return GroupVerdict(options=(self._choose(candidates, ctx),))
        if limits:
            return GroupVerdict(rejection=limits[0])
        if pool:
            return GroupVerdict(rejection=pool[0])

        def fits_on(tp_cap: int, max_nodes: int) -> int | None:
            """Nodes of the smallest replica size that fits (sizes ascend in nodes)."""
            key = (g, tp_cap, max_nodes, ctx.key.memory_exposed_bytes, ctx.usable_bytes)
            if key not in self._fits_on:
                self._fits_on[key] = next(
                    (
                        max(1, r // g)
                        for r, _ in self.replica_sizes(g, max_nodes)
                        if any(
                            self.replica_fits(t, p, ctx)
                            for t, p in self.replica_shapes(r, g, tp_cap)
                        )
                    ),
                    None,
                )
            return self._fits_on[key]

        return GroupVerdict(rejection=self.space.no_fit_reason(ctx, fits_on, nearest))

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
        # memoised: groups of one GPU differing only in what the replica does not use (the
        # network of a one-node replica, the provider) share the estimate
        speed_key = (
            replica.tensor_parallel,
            replica.pipeline_parallel,
            replica.expert_parallel,
            key.memory_exposed_bytes,
            ctx.gpu.id,
            link.tp_medium,
            link.tp_bytes_per_s,
            link.dp_bytes_per_s,
            limit,
        )
        estimate: InferenceEstimate | None = self._speeds.get(speed_key)
        if estimate is None:
            estimate = self._speeds[speed_key] = estimate_inference(
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
            notes=self.space.topology_notes(plan, ctx, replica_nodes, nodes),
            warnings=ctx.warnings,
        )

    def _choose(self, candidates: list[PlanOption], ctx: GroupContext) -> PlanOption:
        smallest = candidates[0]
        chosen = smallest
        if self.throughput_matters:
            g = ctx.key.gpu_count
            chosen = min(
                candidates,
                key=lambda o: (o.nodes, -o.tokens_per_second / (o.nodes * g), o.plan.gpus),
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
                    "one_gpu_need_bytes": _total(
                        self.space.memory(ParallelPlan(), ctx.key.memory_exposed_bytes)
                    ),
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
