"""Serving plans: replica shape (TP x PP, EP), replicas and instances for one group.

``concurrency`` counts the concurrent sequences the WHOLE deployment serves. A deployment of
``R`` replicas (``data_parallel = R``) spreads them as evenly as it can, so one replica holds
``ceil(concurrency / R)``; each GPU's KV cache and activations are sized for that share. A
replica is ``t x p`` GPUs inside one node, or whole nodes when it is larger than a node (then
the group needs a cluster network). Replicas are independent: they need no network between
them.

Replica sizes, in the order they are tried (:meth:`ServingPlanner.replica_sizes`): the
divisors of the node's GPU count (so replicas fill the node: 6 GPUs hold replicas of 1, 2,
3 or 6 GPUs, e.g. TP=2 x PP=3 -- pipeline stages need not be a power of two), then -- only
where none of those makes a deployment -- powers of two that leave GPUs idle (4 on 6 GPUs,
noted ``idle_gpus``: they are paid for), then whole nodes (2, 4, ... of them). Sizes that
are not a power of two are tried only until a deployment is found: throughput comparisons
(``cost_per_million_tokens``, a target) run over power-of-two replicas, as vLLM's TP x PP
layouts mostly are; the extra sizes are there so that 6, 10 or 12 GPUs can serve at all.

Sizing one replica shape:

* it must hold one full-context sequence (weights, one sequence's KV cache, activations and
  overhead within the usable memory, and that KV cache within the engine's pool);
* ``R_memory = ceil(concurrency / most sequences one replica holds)``, where a vLLM replica
  runs at most ``max_num_seqs`` of them at once (noted ``engine_max_num_seqs`` where that,
  not memory, sets the count);
* with ``target_tokens_per_second``: the fewest replicas ``R_target >= R_memory`` whose
  combined rate reaches it, each replica decoding its share of the sequences
  (:func:`~gpu_advisor.core.planner.performance.deployment_tokens_per_second`). One sequence
  runs on one replica, so a target above ``concurrency`` x the one-sequence rate needs more
  concurrent sequences, not more replicas (``target_over_concurrency``);
* the instances needed for ``max(R_memory, R_target)`` replicas; the free GPUs of the last
  instance run replicas too (they lower every replica's share).

Choice (DESIGN "Serving"): the deployment with the fewest instances wins; among those, when
the model fits one GPU, one GPU per replica is preferred over splitting it with TP, unless
the objective is ``cost_per_million_tokens`` or a throughput target is set: then the most
output tokens per GPU paid for wins (ties to the smaller replica). The rationale says which,
and why a replica has more than one GPU: the model does not fit one (``split_to_fit``), the engine's
reservation leaves one GPU no KV cache (``split_for_kv_pool``), fewer instances hold the
concurrency (``split_for_concurrency``), one-GPU replicas cannot reach the throughput target
at this concurrency (``split_for_target``) or throughput per GPU (``tp_for_throughput``).
"""

from __future__ import annotations

import math
from typing import Any

from msgspec import Struct

from gpu_advisor.core.gpus import GpuSpec
from gpu_advisor.core.planner.hardware import ComputePath, Links, links
from gpu_advisor.core.planner.performance import (
    engine_sequence_limit,
    max_concurrency,
    serving_flops,
)
from gpu_advisor.core.planner.serving_speed import ReplicaSpeed, deployed
from gpu_advisor.core.planner.topology import (
    PIPELINE_MAX,
    GroupContext,
    GroupVerdict,
    Nearest,
    PlanOption,
    SearchSpace,
    divisors,
    plan_data,
    powers_of_two,
    smallest_true,
)
from gpu_advisor.core.results import MemoryBreakdown, ParallelPlan, Reason
from gpu_advisor.core.spec import InferenceWorkload, Objective

RATE_TOLERANCE = 1e-9
"""Relative slack when comparing a deployment's rate with ``target_tokens_per_second``
(floating-point sums of per-replica rates)."""


class ReplicaFit:
    """A replica shape that holds at least one full-context sequence on one GPU capacity,
    with what the groups of a request derive from it. The planner makes one per shape and
    capacity (:meth:`ServingPlanner._fit_shape`), so the memos it carries are keyed by both.

    Attributes:
        replica: the replica's TP x PP (x EP) with ``data_parallel`` 1.
        gpus: the replica's GPUs, TP x PP.
        one: the per-GPU requirement with one sequence per replica.
        per_replica: most full-context sequences one replica runs at once: what its memory
            holds, at most the engine's ``max_num_seqs`` (None: neither bounds it).
        engine_limited: the engine's limit, not memory, sets ``per_replica``.
        exposed_bytes, usable_bytes: the GPU capacity it was fitted on.
        by_memory: fewest replicas whose share of the sequences fits
            (:meth:`ServingPlanner._replicas_for_memory`); None until a group asks.
        speeds: its speeds per GPU, compute path, efficiency and links
            (:meth:`ServingPlanner._speed`).
    """

    __slots__ = (
        "by_memory",
        "engine_limited",
        "exposed_bytes",
        "gpus",
        "one",
        "per_replica",
        "replica",
        "speeds",
        "usable_bytes",
    )

    def __init__(
        self,
        replica: ParallelPlan,
        one: MemoryBreakdown,
        per_replica: int | None,
        engine_limited: bool,
        exposed_bytes: int,
        usable_bytes: float,
    ) -> None:
        self.replica = replica
        self.gpus = replica.tensor_parallel * replica.pipeline_parallel
        self.one = one
        self.per_replica = per_replica
        self.engine_limited = engine_limited
        self.exposed_bytes = exposed_bytes
        self.usable_bytes = usable_bytes
        self.by_memory: int | None = None
        self.speeds: dict[tuple[GpuSpec, ComputePath, float, Links], ReplicaSpeed] = {}


_Miss = tuple[ParallelPlan, MemoryBreakdown]
"""A plan a search sized and its per-GPU requirement (a nearest miss, :class:`Nearest`)."""


class _Fitted(Struct, frozen=True):
    """Whether a replica shape, or the first of a replica size's shapes, holds one
    full-context sequence on one GPU capacity (:meth:`ServingPlanner.fit_size`).

    Attributes:
        fit: the fitting shape, None when none does.
        nearest: the smallest requirement the shapes tried met (the first of equal ones),
            None when none was sized.
        pool: the last ``kv_pool_too_small`` among the shapes tried, its data without the
            GPU id (:func:`_on_gpu` adds the group's).
    """

    fit: ReplicaFit | None
    nearest: _Miss | None
    pool: Reason | None


class _Rung(Struct, frozen=True):
    """One replica size as the searches of a GPU count try it
    (:meth:`ServingPlanner.replica_sizes`).

    Attributes:
        gpus: the replica's GPUs.
        idle: the size leaves GPUs of a node idle.
        nodes: instances one replica needs at least.
    """

    gpus: int
    idle: bool
    nodes: int


class _Deployable(Struct, frozen=True):
    """A deployment of one fitted replica shape on a group, sized but not yet built: its
    per-GPU breakdown, estimate, notes and :class:`PlanOption` are taken only if the group
    chooses it (:meth:`ServingPlanner._option`).

    Attributes:
        fit: the replica shape.
        speed: its speeds on the group's GPU and links.
        nodes: instances deployed.
        replicas: replicas on them (``data_parallel`` of the deployed plan).
        replica_nodes: instances one replica spans (1 inside a node).
        by_memory: fewest replicas whose share of the sequences fits.
        tokens_per_second: output tokens per second of all replicas.
        gpus: GPUs the replicas run on (idle GPUs of the instances not counted).
    """

    fit: ReplicaFit
    speed: ReplicaSpeed
    nodes: int
    replicas: int
    replica_nodes: int
    by_memory: int
    tokens_per_second: float
    gpus: int


class _Sized(Struct, frozen=True):
    """One replica size sized for the workload: a deployment, or why it is not one (then
    with the instances it needed, when a limit on them set it)."""

    replica_gpus: int
    nodes: int | None = None
    deployable: _Deployable | None = None
    rejection: Reason | None = None


def context_limit_reason(arch_name: str, limit: int | None, context: int) -> Reason | None:
    """``context_exceeds_model`` when a serving context (prompt + output tokens) is longer than
    the model's trained context (``max_position_embeddings``): vLLM refuses such a
    ``max_model_len`` ("User-specified max_model_len ... is greater than the derived
    max_model_len", ``vllm/config`` ``_get_and_verify_max_len``). None when it is within the
    limit or the limit is unknown."""
    if limit is None or context <= limit:
        return None
    return Reason(
        code="context_exceeds_model",
        data={"model": arch_name, "context_length": context, "max_position_embeddings": limit},
    )


class ServingPlanner:
    """Serving plans for the groups of one request."""

    def __init__(self, space: SearchSpace, workload: InferenceWorkload, objective: Objective):
        self.space = space
        self.workload = workload
        self.throughput_matters = (
            objective == "cost_per_million_tokens" or workload.target_tokens_per_second is not None
        )
        arch = space.arch
        self._too_long = context_limit_reason(
            arch.name, arch.max_position_embeddings, workload.context_length
        )
        self._flops = serving_flops(arch, workload)
        # Per-request memos shared by the groups: a replica's fit depends on the group only
        # through its GPU capacity (exposed and usable bytes); the replicas its memory needs
        # only through the fit, its speed through the fit, the GPU, compute path, efficiency
        # and links (ReplicaSpeed): those two are kept on the fit (ReplicaFit).
        self._shape_fits: dict[tuple[int, int, int, float], _Fitted] = {}
        self._size_fits: dict[tuple[tuple[tuple[int, int], ...], int, float], _Fitted] = {}
        self._rungs: dict[tuple[int, int], list[_Rung]] = {}
        self._shapes: dict[tuple[int, int, int], tuple[tuple[int, int], ...]] = {}
        self._fits_on: dict[tuple[Any, ...], int | None] = {}

    def replica_sizes(self, g: int, max_replica_nodes: int) -> list[tuple[int, bool]]:
        """Replica sizes ``(r, idle)`` in the order they are tried: divisors of ``g``
        ascending, then powers of two below ``g`` that do not divide it (``idle``: the node
        keeps ``g mod r`` GPUs idle), then ``g`` times 2, 4, ... nodes. Those of fewer nodes
        are a prefix of those of more."""
        inside = [(r, False) for r in divisors(g, g)]
        idle = [(r, True) for r in powers_of_two(g) if g % r]
        across = [(g * n, False) for n in powers_of_two(max_replica_nodes) if n > 1]
        return inside + idle + across

    def replica_shapes(self, r: int, g: int, tp_cap: int) -> tuple[tuple[int, int], ...]:
        """``(t, p)`` with ``t x p = r``, TP first (TP speeds decode, PP only adds memory):
        TP a power of two dividing ``r`` (inside one node) or, for a replica of whole nodes,
        dividing ``g``; PP at most the layers and :data:`PIPELINE_MAX`. Memoised."""
        key = (r, g, tp_cap)
        found = self._shapes.get(key)
        if found is None:
            tps = self.space.tensor_degrees(r if r <= g else g, tp_cap)
            most = min(self.space.arch.num_layers, PIPELINE_MAX)
            found = self._shapes[key] = tuple(
                (t, r // t) for t in reversed(tps) if r % t == 0 and r // t <= most
            )
        return found

    def rungs(self, g: int, max_replica_nodes: int) -> list[_Rung]:
        """:meth:`replica_sizes` as the searches read them. Memoised."""
        found = self._rungs.get((g, max_replica_nodes))
        if found is None:
            found = self._rungs[g, max_replica_nodes] = [
                _Rung(r, idle, max(1, r // g))
                for r, idle in self.replica_sizes(g, max_replica_nodes)
            ]
        return found

    # --- memory -----------------------------------------------------------------------------

    def _holds(self, memory: MemoryBreakdown | None, usable: float) -> bool:
        """The requirement fits the usable memory and its KV cache fits the engine's pool."""
        if memory is None or memory.total_bytes > usable:
            return False
        return memory.kv_pool_bytes is None or memory.kv_cache_bytes <= memory.kv_pool_bytes

    def fit_size(self, r: int, g: int, tp_cap: int, exposed: int, usable: float) -> _Fitted:
        """The first of :meth:`replica_shapes` ``(r, g, tp_cap)`` that holds one full-context
        sequence on a GPU exposing ``exposed`` bytes with ``usable`` of them usable, with the
        nearest miss and ``kv_pool_too_small`` of the shapes tried. Memoised per shapes and
        capacity: groups of any GPU type, count and links with these share it."""
        shapes = self._shapes.get((r, g, tp_cap)) or self.replica_shapes(r, g, tp_cap)
        key = (shapes, exposed, usable)
        found = self._size_fits.get(key)
        if found is None:
            nearest: _Miss | None = None
            pool: Reason | None = None
            fit: ReplicaFit | None = None
            for t, p in shapes:
                shape = self._fit_shape(t, p, exposed, usable)
                nearest = _nearer(nearest, shape.nearest)
                if shape.pool is not None:
                    pool = shape.pool
                if shape.fit is not None:
                    fit = shape.fit
                    break
            found = self._size_fits[key] = _Fitted(fit, nearest, pool)
        return found

    def _fit_shape(self, t: int, p: int, exposed: int, usable: float) -> _Fitted:
        """Whether a ``t x p`` replica holds one full-context sequence (memoised per
        capacity, as :meth:`fit_size`)."""
        key = (t, p, exposed, usable)
        found = self._shape_fits.get(key)
        if found is None:
            found = self._shape_fits[key] = self._compute_fit_shape(t, p, exposed, usable)
        return found

    def _compute_fit_shape(self, t: int, p: int, exposed: int, usable: float) -> _Fitted:
        """:meth:`_fit_shape` computed. The replica's EP degree is 1: it has one
        data-parallel rank, and :meth:`SearchSpace.expert_degrees` of one rank is ``[1]``."""
        workload = self.workload
        # one sequence per replica: as many replicas as sequences
        single = ParallelPlan(
            tensor_parallel=t, pipeline_parallel=p, data_parallel=workload.concurrency
        )
        memory = self.space.memory(single, exposed)
        if memory is None:
            return _Fitted(None, None, None)
        if memory.total_bytes > usable:
            return _Fitted(None, (single, memory), None)
        most = max_concurrency(memory, workload, single, usable)
        if most is not None and most < 1:
            kv_pool = max(
                0,
                memory.kv_pool_bytes
                if memory.kv_pool_bytes is not None
                else int(usable - (memory.total_bytes - memory.kv_cache_bytes)),
            )
            pool = Reason(
                code="kv_pool_too_small",
                data={
                    "kv_pool_bytes": kv_pool,
                    "sequence_bytes": memory.kv_cache_bytes,
                    "context_length": workload.context_length,
                    "tensor_parallel": t,
                    "pipeline_parallel": p,
                    "weights_bytes": memory.weights_bytes,
                    "reserved_bytes": memory.engine_reserved_bytes,
                    "gpu_memory_utilization": workload.gpu_memory_utilization,
                    "exposed_bytes": exposed,
                },
            )
            return _Fitted(None, (single, memory), pool)
        limit = engine_sequence_limit(workload, exposed)
        limited = limit is not None and (most is None or most > limit)
        replica = ParallelPlan(tensor_parallel=t, pipeline_parallel=p)
        fit = ReplicaFit(replica, memory, limit if limited else most, limited, exposed, usable)
        return _Fitted(fit, (single, memory), None)

    def _replicas_for_memory(self, fit: ReplicaFit) -> int:
        """Fewest replicas of ``fit``'s shape whose share of the sequences fits on its GPU
        capacity: the linear estimate ``ceil(concurrency / per_replica)``, confirmed with the
        estimator (the generic engine's prefill peak grows with the share, a little faster
        than the estimate), else the smallest count that fits. Kept on ``fit``."""
        found = fit.by_memory
        if found is not None:
            return found
        exposed, usable = fit.exposed_bytes, fit.usable_bytes
        concurrency = self.workload.concurrency
        if fit.per_replica is None:
            found = 1
        else:
            guess = min(concurrency, math.ceil(concurrency / fit.per_replica))

            def holds(replicas: int) -> bool:
                return self._holds(
                    self.space.memory(deployed(fit.replica, replicas), exposed), usable
                )

            if guess >= concurrency or holds(guess):
                found = guess
            else:
                found = smallest_true(holds, guess + 1, concurrency)
        fit.by_memory = found
        return found

    # --- the deployment ---------------------------------------------------------------------

    def plan(self, ctx: GroupContext) -> GroupVerdict:
        """The chosen deployment of one group, or why none is possible."""
        if self._too_long is not None:
            return GroupVerdict(rejection=self._too_long)
        key = ctx.key
        g = key.gpu_count
        exposed, usable = key.memory_exposed_bytes, ctx.usable_bytes
        max_replica_nodes = self.space.constraints.max_nodes if key.network_gbit_per_s else 1
        tried: list[_Fitted] = []  # the fits of the sizes tried (their nearest misses)
        last_pool: Reason | None = None  # the last kv_pool_too_small met, without the GPU id
        limit: Reason | None = None  # the limit nearest to being met
        sized: list[_Sized] = []
        fewest = 0  # fewest instances of a deployment found so far (0: none yet)
        one_gpu: str | None = None  # why a one-GPU replica is not a candidate
        rungs = self.rungs(g, max_replica_nodes)
        for rung in rungs:
            if fewest:
                if rung.idle:
                    continue  # plans that use every GPU win over plans that leave some idle
                if rung.gpus & (rung.gpus - 1):
                    # replicas of 3, 5, 6... GPUs (PP stages that are not a power of two) are
                    # tried for fit; once a deployment is found, throughput is compared over
                    # power-of-two replicas only (each size costs estimates and rate searches)
                    continue
                least = rung.nodes  # instances a replica of this size needs at least
                if least > fewest or (least == fewest and not self.throughput_matters):
                    # it cannot need fewer instances, and a tie goes to the smaller replica
                    break
            fitted = self.fit_size(rung.gpus, g, ctx.tp_cap, exposed, usable)
            tried.append(fitted)
            if fitted.pool is not None:
                last_pool = fitted.pool
            fit = fitted.fit
            if fit is None:
                if rung.gpus == 1:
                    one_gpu = "pool" if last_pool is not None else "fit"
                continue
            outcome = self._size(ctx, fit)
            sized.append(outcome)
            if outcome.deployable is not None:
                if not fewest or outcome.deployable.nodes < fewest:
                    fewest = outcome.deployable.nodes
            elif outcome.rejection is not None and (
                limit is None or _distance(outcome.rejection) < _distance(limit)
            ):
                limit = outcome.rejection
        pool = None if last_pool is None else _on_gpu(last_pool, ctx.gpu.id)
        if fewest:
            return GroupVerdict(options=(self._choose(sized, ctx, one_gpu, pool),))
        if limit is not None:
            return GroupVerdict(rejection=limit)
        if pool is not None:
            return GroupVerdict(rejection=pool)
        # nothing was skipped: the nearest miss is the smallest of every size's
        nearest: _Miss | None = None
        for fitted in tried:
            nearest = _nearer(nearest, fitted.nearest)

        def fits_on(tp_cap: int, max_nodes: int) -> int | None:
            """Nodes of the smallest replica size that fits (sizes ascend in nodes)."""
            key = (g, tp_cap, max_nodes, exposed, usable)
            if key not in self._fits_on:
                found = None
                # under the group's TP cap, the sizes it tried fit nothing (the sizes of
                # fewer nodes are a prefix of those of more)
                start = len(tried) if tp_cap == ctx.tp_cap else 0
                for rung in self.rungs(g, max_nodes)[start:]:
                    if self.fit_size(rung.gpus, g, tp_cap, exposed, usable).fit is not None:
                        found = rung.nodes
                        break
                self._fits_on[key] = found
            return self._fits_on[key]

        return GroupVerdict(
            rejection=self.space.no_fit_reason(ctx, fits_on, self._per_replica(nearest))
        )

    def _per_replica(self, nearest: _Miss | None) -> Nearest:
        """The nearest miss as a replica shape (``data_parallel`` 1) with the requirement it
        was measured at: one sequence per replica, the least any deployment of that shape
        needs (a rejection says so). Empty when nothing was sized."""
        quoted = Nearest(one_sequence_per_replica=self.workload.concurrency > 1)
        if nearest is not None:
            quoted.note(deployed(nearest[0], 1), nearest[1])
        return quoted

    def _speed(self, fit: ReplicaFit, ctx: GroupContext, link: Links) -> ReplicaSpeed:
        """The speeds of ``fit``'s shape on the group's GPU over ``link``, shared by every
        group with the same fit (shape and capacity), GPU, compute path, efficiency and
        links (:mod:`.serving_speed`); kept on ``fit``."""
        key = (ctx.gpu, ctx.compute, ctx.efficiency, link)
        found = fit.speeds.get(key)
        if found is None:
            found = fit.speeds[key] = ReplicaSpeed(
                self.space,
                self.workload,
                self._flops,
                replica=fit.replica,
                one=fit.one,
                per_replica=fit.per_replica,
                capacity_bytes=fit.exposed_bytes,
                gpu=ctx.gpu,
                compute=ctx.compute,
                efficiency=ctx.efficiency,
                link=link,
            )
        return found

    def _size(self, ctx: GroupContext, fit: ReplicaFit) -> _Sized:
        """Replicas and instances of one replica shape (module docstring), or the limit
        (max_nodes, max_gpus, the throughput target) it runs into."""
        key, workload = ctx.key, self.workload
        g = key.gpu_count
        concurrency = workload.concurrency
        r = fit.gpus
        replica_nodes = max(1, r // g)
        slots = max(1, g // r)  # replicas per instance (a replica of whole nodes: 1)
        link = links(ctx.gpu, ctx.domain, g, replica_nodes, key.network_gbit_per_s)
        speed = self._speed(fit, ctx, link)
        by_memory = self._replicas_for_memory(fit)
        needed = by_memory
        target = workload.target_tokens_per_second
        if target is not None:
            goal = target * (1 - RATE_TOLERANCE)
            one_sequence = speed.rate(1)
            if concurrency * one_sequence < goal:
                return _Sized(
                    replica_gpus=r,
                    rejection=Reason(
                        code="target_over_concurrency",
                        data={
                            "gpu": ctx.gpu.id,
                            "gpu_count": g,
                            "replica_gpus": r,
                            "target_tokens_per_second": target,
                            "concurrency": concurrency,
                            "sequence_tokens_per_second": one_sequence,
                            "concurrency_needed": math.ceil(target / one_sequence),
                        },
                    ),
                )
            needed = speed.replicas_for(goal, by_memory)
        nodes = math.ceil(needed / slots) * replica_nodes
        limit = self._limit(ctx, fit, nodes, by_memory == needed, slots, replica_nodes)
        if limit is not None:
            return _Sized(replica_gpus=r, nodes=nodes, rejection=limit)
        replicas = nodes // replica_nodes * slots
        deployable = _Deployable(
            fit,
            speed,
            nodes,
            replicas,
            replica_nodes,
            by_memory,
            speed.tokens_per_second(replicas),
            r * replicas,
        )
        return _Sized(replica_gpus=r, nodes=nodes, deployable=deployable)

    def _option(self, ctx: GroupContext, chosen: _Deployable, note: Reason) -> PlanOption:
        """The chosen deployment as an option: its breakdown and estimate, the notes on
        where it runs, the engine's limit on sequences, and ``note`` (why its replica has the
        GPUs it has)."""
        fit = chosen.fit
        deployment = chosen.speed.deployment(chosen.replicas)
        notes = self.space.topology_notes(deployment.plan, ctx, chosen.replica_nodes, chosen.nodes)
        if fit.engine_limited and fit.per_replica is not None and chosen.by_memory > 1:
            # the engine's max_num_seqs, not memory, sets how many replicas the sequences need
            notes = (
                *notes,
                Reason(
                    code="engine_max_num_seqs",
                    data={
                        "max_num_seqs": fit.per_replica,
                        "concurrency": self.workload.concurrency,
                        "replicas_needed": chosen.by_memory,
                    },
                ),
            )
        return PlanOption(
            nodes=chosen.nodes,
            plan=deployment.plan,
            memory=deployment.memory,
            inference=deployment.estimate,
            replicas=chosen.replicas,
            time_hours=self.workload.serving_hours,
            tokens_per_second=deployment.tokens_per_second,
            notes=(*notes, note),
            warnings=ctx.warnings,
        )

    def _limit(
        self,
        ctx: GroupContext,
        fit: ReplicaFit,
        nodes: int,
        memory_bound: bool,
        slots: int,
        replica_nodes: int,
    ) -> Reason | None:
        """``over_max_nodes`` / ``over_max_gpus`` when the deployment is too large; when the
        concurrency (not a throughput target) sets its size, with the most sequences the
        limit allows (``max_concurrency``)."""
        constraints = self.space.constraints
        g = ctx.key.gpu_count
        allowed_nodes = constraints.max_nodes
        if constraints.max_gpus is not None:
            allowed_nodes = min(allowed_nodes, constraints.max_gpus // g)
        if nodes <= allowed_nodes:
            return None
        # the replica shape the deployment was sized with (/v1/estimate shows it when nothing
        # fits, spread over the hardware it was given)
        data: dict[str, Any] = {
            "gpu": ctx.gpu.id,
            "gpu_count": g,
            "replica_gpus": fit.gpus,
            "plan": plan_data(fit.replica),
        }
        if memory_bound and fit.per_replica is not None:
            replicas = allowed_nodes // replica_nodes * slots
            data.update(
                concurrency=self.workload.concurrency,
                per_replica=fit.per_replica,
                max_concurrency=replicas * fit.per_replica,
            )
        if nodes > constraints.max_nodes:
            return Reason(
                code="over_max_nodes",
                data={**data, "nodes_needed": nodes, "max_nodes": constraints.max_nodes},
            )
        return Reason(
            code="over_max_gpus",
            data={**data, "gpus_needed": nodes * g, "max_gpus": constraints.max_gpus},
        )

    def _choose(
        self,
        sized: list[_Sized],
        ctx: GroupContext,
        one_gpu: str | None,
        pool: Reason | None,
    ) -> PlanOption:
        """The deployment with the fewest instances, then the smallest replica (or, when
        throughput matters, the most tokens per GPU); with the note saying why its replica
        has the GPUs it has."""
        g = ctx.key.gpu_count  # tokens per GPU paid for: idle GPUs count
        first: _Deployable | None = None
        chosen: _Deployable | None = None
        best: tuple[float, ...] = ()
        for candidate in sized:  # the first of the smallest keys, as min() keeps it
            d = candidate.deployable
            if d is None:
                continue
            if self.throughput_matters:
                rank: tuple[float, ...] = (d.nodes, -d.tokens_per_second / (d.nodes * g), d.gpus)
            else:
                rank = (d.nodes, d.fit.gpus)
            if chosen is None:
                first = chosen = d
                best = rank
            elif rank < best:
                chosen, best = d, rank
        if first is None or chosen is None:  # pragma: no cover - plan() sized a deployment
            raise LookupError("no deployment to choose from")
        size = chosen.fit.gpus
        # sizes are tried from one GPU up, each sized once
        one = sized[0] if sized[0].replica_gpus == 1 else None
        note: Reason
        if size == 1:
            note = Reason(code="single_gpu_replica", data={})
        elif one is None and one_gpu == "pool" and pool is not None:
            # the model fits one GPU, but the engine's reservation leaves it no KV cache
            note = Reason(code="split_for_kv_pool", data={**pool.data, "replica_gpus": size})
        elif one is None:
            # one GPU holding one sequence per replica, as the one-GPU size was tried
            alone = self._fit_shape(1, 1, ctx.key.memory_exposed_bytes, ctx.usable_bytes).nearest
            note = Reason(
                code="split_to_fit",
                data={
                    "replica_gpus": size,
                    "one_gpu_need_bytes": None if alone is None else alone[1].total_bytes,
                    "usable_bytes": int(ctx.usable_bytes),
                },
            )
        elif one.rejection is not None and one.rejection.code == "target_over_concurrency":
            data = one.rejection.data
            note = Reason(
                code="split_for_target",
                data={
                    "replica_gpus": size,
                    "target_tokens_per_second": data["target_tokens_per_second"],
                    "concurrency": data["concurrency"],
                    "one_gpu_tokens_per_second": data["concurrency"]
                    * data["sequence_tokens_per_second"],
                },
            )
        elif one.nodes is not None and chosen.nodes < one.nodes:
            note = Reason(
                code="split_for_concurrency",
                data={
                    "replica_gpus": size,
                    "concurrency": self.workload.concurrency,
                    "nodes": chosen.nodes,
                    "one_gpu_nodes": one.nodes,
                    "one_gpu_sequences": _per_replica(one),
                },
            )
        else:
            smallest = one.deployable if one.deployable is not None else first
            note = Reason(
                code="tp_for_throughput",
                data={
                    "replica_gpus": size,
                    "smallest_replica_gpus": smallest.fit.gpus,
                    "tokens_per_second_per_gpu": chosen.tokens_per_second / chosen.gpus,
                    "smallest_tokens_per_second_per_gpu": smallest.tokens_per_second
                    / smallest.gpus,
                },
            )
        return self._option(ctx, chosen, note)


def _nearer(nearest: _Miss | None, miss: _Miss | None) -> _Miss | None:
    """The smaller requirement of ``nearest`` and a later ``miss`` (``nearest`` where they
    are equal), as :meth:`Nearest.note` keeps it; None where neither was sized."""
    if miss is None or (nearest is not None and miss[1].total_bytes >= nearest[1].total_bytes):
        return nearest
    return miss


def _on_gpu(reason: Reason, gpu_id: str) -> Reason:
    """``reason`` (a memo's, shared by groups of several GPU types) quoting ``gpu_id``
    first."""
    return Reason(code=reason.code, data={"gpu": gpu_id, **reason.data})


def _distance(reason: Reason) -> tuple[int, float]:
    """How far a replica shape's limit is from being met, to quote the nearest: a limit on
    nodes or GPUs (the nodes or GPUs needed) before a throughput target that needs more
    concurrency (the concurrency needed)."""
    data = reason.data
    for rank, key in ((0, "nodes_needed"), (0, "gpus_needed"), (1, "concurrency_needed")):
        if key in data:
            return (rank, float(data[key]))
    return (2, math.inf)


def _per_replica(sized: _Sized) -> int | None:
    """Most sequences one replica of ``sized`` runs at once, where it says."""
    if sized.deployable is not None:
        return sized.deployable.fit.per_replica
    if sized.rejection is not None:
        value = sized.rejection.data.get("per_replica")
        return int(value) if value is not None else None
    return None
