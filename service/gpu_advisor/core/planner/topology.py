"""The plan search space for one group of identical offers (same GPU, count, memory,
interconnect and network), the values it produces, and the explanations of a group that
fits nothing.

Search space (bounded and deterministic):

* tensor parallel ``t``: a power of two dividing the GPUs of a node in use and the attention
  heads (KV heads may replicate, DESIGN "Inference"), at most the NVLink domain (itself at
  most the GPU's scale-up domain: 8 on an HGX H100 board,
  :func:`~gpu_advisor.core.planner.hardware.nvlink_domain_size`), or
  :data:`~gpu_advisor.core.planner.hardware.PCIE_MAX_TENSOR_PARALLEL` on PCIe-only GPUs;
  never across nodes;
* pipeline parallel ``p``: any divisor of the GPUs left after TP (pipeline stages need not
  be a power of two: 6 GPUs run TP=2 x PP=3), at most the layer count and
  :data:`PIPELINE_MAX`; stages may span nodes;
* expert parallel ``e`` (MoE): a power of two dividing the routed experts and ``d``;
* data parallel: the rest of the GPUs; ZeRO stage (training): the workload's ``sharding``,
  else the lowest of none / zero1 / zero2 / zero3 that fits (ZeRO-1/2 move the same bytes as
  plain data parallel, ZeRO-3 1.5x: Rajbhandari et al. 2020, section 7);
* nodes: 1, 2, 4, ... up to ``max_nodes`` and ``max_gpus`` -- more than one only on offers whose
  network is cluster-grade (InfiniBand, EFA, RoCE with a bandwidth).

Plans use every GPU of the instances they run on where one fits. Where none does on a node
whose GPU count is not a power of two, plans that leave GPUs idle are searched too: training
on :func:`idle_width` GPUs of each node (6 -> 4), serving replicas of a power-of-two size that
does not divide the node (4 on 6 GPUs); the rationale says how many GPUs sit idle, which the
price still pays for (``idle_gpus``).

Memory falls as any degree grows, so the search stops at the first fitting plan in the order
t, p, e, ZeRO: for each ``(t, p)`` the preferred plan (least EP, lowest ZeRO stage) is asked
first, then the most-sharded one, then a binary search between them -- at most
``|t| x |p| x (2 + |e| x log |zero|)`` estimator calls per node count, memoised per request
(plans recur across groups with the same GPU count, whatever the GPU). With one data-parallel
rank no ZeRO stage is searched (it would shard nothing).

Training chooses, per node count, the plan with the shortest time per token; node counts stay
separate options (cost, time and deadline trade them off per offer), from the first that fits
up to the first that meets the deadline -- or all of them for ``time_to_result``.
Training is in :mod:`gpu_advisor.core.planner.training`, serving in
:mod:`gpu_advisor.core.planner.serving`.

A group that fits nothing is explained by its nearest miss: the plan with the smallest
per-GPU requirement the search met (:class:`Nearest`), quoted with its numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

from msgspec import Struct

from gpu_advisor.core.architecture import Architecture
from gpu_advisor.core.gpus import GpuSpec
from gpu_advisor.core.offers import Interconnect
from gpu_advisor.core.planner.estimator import MemoMemory
from gpu_advisor.core.planner.hardware import (
    PCIE_MAX_TENSOR_PARALLEL,
    ComputePath,
    max_tensor_parallel,
    nvlink_domain_size,
    scale_up_fabric,
)
from gpu_advisor.core.planner.performance import (
    InferenceEstimate,
    TrainingEstimate,
    default_mfu,
)
from gpu_advisor.core.results import MemoryBreakdown, ParallelPlan, Reason
from gpu_advisor.core.spec import Constraints, Sharding

NODE_PROBE_LIMIT = 64
"""Largest node count probed to explain a rejection ("needs 4 nodes ..."): 64 nodes of 8 GPUs
is already a 512-GPU cluster; an offer that needs more is explained by its memory shortfall
instead. (``max_nodes`` itself may go to 1024.)"""

PIPELINE_MIN_SAVING = 0.02
"""The PP search stops when doubling PP lowers the per-GPU requirement by less than this (a
step from ``p`` to ``p'`` must save ``PIPELINE_MIN_SAVING x log2(p' / p)``)."""

PIPELINE_MAX = 64
"""Largest pipeline-parallel degree searched: the 1-trillion-parameter Megatron-LM run used
PP = 64 (Narayanan et al. 2021, Table 1); Llama 3 405B used 16 (Dubey et al. 2024, Table 4)."""


def smallest_true(ok: Callable[[int], bool], low: int, high: int) -> int:
    """Smallest ``n`` in ``[low, high]`` with ``ok(n)``, for ``ok`` monotone (false then true)
    and ``ok(high)`` true."""
    while low < high:
        middle = (low + high) // 2
        if ok(middle):
            high = middle
        else:
            low = middle + 1
    return high


def smallest_fitting_count(fits: Callable[[int], bool], limit: int) -> int | None:
    """Smallest ``n`` in ``1..limit`` with ``fits(n)``: ``fits`` is probed at 1, 2, 4, ...
    (and ``limit``) until it holds, then the smallest count in the last doubling is found by
    binary search (memory per GPU falls as nodes are added, so ``fits`` is monotone). None
    when even ``limit`` does not fit. A job that needs 11 nodes is told 11, not 16: nodes
    need not be a power of two (data parallel and ZeRO shard over any count; pipeline stages
    over any divisor). ``O(log limit)`` probes; a power-of-two answer costs no more probes
    than the doubling alone."""
    if limit < 1:
        return None
    below, probe = 0, 1  # fits(below) is false (0: nothing probed)
    while not fits(probe):
        if probe >= limit:
            return None
        below, probe = probe, min(probe * 2, limit)
    return smallest_true(fits, below + 1, probe)  # fits(probe): the answer is in between


ZERO_STAGES: tuple[Sharding, ...] = ("none", "zero1", "zero2", "zero3")


class GroupKey(Struct, frozen=True, kw_only=True):
    """What makes offers interchangeable for planning (price aside).

    Attributes:
        network_gbit_per_s: per-node bandwidth of a cluster-grade network; None without one.
    """

    gpu: str
    gpu_count: int
    memory_exposed_bytes: int
    interconnect: Interconnect
    network_fabric: str | None = None
    network_gbit_per_s: float | None = None


class PlanOption(Struct, frozen=True, kw_only=True):
    """One feasible way to run the workload on ``nodes`` instances of a group.

    Attributes:
        nodes: instances used (training: nodes of one job; serving: instances deployed).
        plan: the parallel plan over all ``nodes x gpu_count`` GPUs.
        memory: per-GPU breakdown with the GPU's capacity.
        training / inference: the speed estimate of the workload kind.
        replicas: serving replicas deployed (1 for training).
        time_hours: training time to result (None without ``tokens``); serving: serving_hours.
        tokens_per_second: whole deployment (training: trained tokens/s; serving: output
            tokens/s of all replicas).
        notes: rationale codes of the plan choice; warnings: caveats (emulated dtypes).
    """

    nodes: int
    plan: ParallelPlan
    memory: MemoryBreakdown
    training: TrainingEstimate | None = None
    inference: InferenceEstimate | None = None
    replicas: int = 1
    time_hours: float | None
    tokens_per_second: float
    notes: tuple[Reason, ...] = ()
    warnings: tuple[Reason, ...] = ()


class GroupVerdict(Struct, frozen=True, kw_only=True):
    """Feasible options (ascending nodes) or the one reason there are none."""

    options: tuple[PlanOption, ...] = ()
    rejection: Reason | None = None


def powers_of_two(limit: int) -> Iterator[int]:
    """1, 2, 4, ... up to ``limit`` inclusive."""
    value = 1
    while value <= limit:
        yield value
        value *= 2


def divisors(n: int, limit: int) -> list[int]:
    """The divisors of ``n`` up to ``limit``, ascending (O(sqrt n))."""
    small: list[int] = []
    large: list[int] = []
    d = 1
    while d * d <= n:
        if n % d == 0:
            small.append(d)
            if d * d != n:
                large.append(n // d)
        d += 1
    return [v for v in (*small, *reversed(large)) if v <= limit]


def idle_width(gpus_per_node: int) -> int | None:
    """GPUs per node that plans leaving GPUs idle use: the largest power of two below
    ``gpus_per_node`` (6 -> 4, 10 -> 8, 12 -> 8); None when the count is a power of two
    (its plans already use every GPU)."""
    if gpus_per_node & (gpus_per_node - 1) == 0:
        return None
    return 1 << (gpus_per_node.bit_length() - 1)


def pipeline_step_saves(previous: int, need: int, p_previous: int, p: int) -> bool:
    """Whether going from ``p_previous`` to ``p`` pipeline stages saved enough of the
    per-GPU requirement to keep searching (:data:`PIPELINE_MIN_SAVING`)."""
    return need <= previous * (1 - PIPELINE_MIN_SAVING * math.log2(p / p_previous))


def plan_data(plan: ParallelPlan) -> dict[str, Any]:
    """A plan's degrees for a reason's data (rendered as ``TP=2, PP=3, DP=1``)."""
    return {
        "tensor_parallel": plan.tensor_parallel,
        "pipeline_parallel": plan.pipeline_parallel,
        "data_parallel": plan.data_parallel,
        "expert_parallel": plan.expert_parallel,
        "sharding": plan.sharding,
    }


class Nearest:
    """The smallest per-GPU requirement a search met, with its plan (the nearest miss a
    rejection quotes, and the plan an estimate shows when nothing fits)."""

    __slots__ = ("memory", "one_sequence_per_replica", "plan")

    def __init__(self, *, one_sequence_per_replica: bool = False) -> None:
        self.memory: MemoryBreakdown | None = None
        self.plan: ParallelPlan | None = None
        self.one_sequence_per_replica = one_sequence_per_replica
        """Serving: ``plan`` is one replica, measured holding one sequence (the least any
        deployment of that shape needs)."""

    def note(self, plan: ParallelPlan, memory: MemoryBreakdown) -> int:
        """Keep ``(plan, memory)`` if it is the smallest so far; ``memory.total_bytes``."""
        if self.memory is None or memory.total_bytes < self.memory.total_bytes:
            self.memory, self.plan = memory, plan
        return memory.total_bytes

    def merge(self, other: Nearest) -> None:
        """Keep ``other``'s nearest miss where it is smaller."""
        if other.memory is not None and other.plan is not None:
            self.note(other.plan, other.memory)

    def data(self) -> dict[str, Any]:
        """``need_bytes`` and the ``plan`` behind it (nothing when no plan was sized)."""
        if self.memory is None or self.plan is None:
            return {}
        data: dict[str, Any] = {
            "need_bytes": self.memory.total_bytes,
            "plan": plan_data(self.plan),
        }
        if self.one_sequence_per_replica:
            data["one_sequence_per_replica"] = True
        return data


class GroupContext(Struct, frozen=True, kw_only=True):
    """One group's facts derived once: its GPU, NVLink domain, TP cap and usable bytes."""

    key: GroupKey
    gpu: GpuSpec
    compute: ComputePath
    domain: int
    tp_cap: int
    usable_bytes: float
    efficiency: float
    warnings: tuple[Reason, ...] = ()


class SearchSpace:
    """The plan search shared by training and serving for one request."""

    def __init__(self, arch: Architecture, constraints: Constraints, memory: MemoMemory) -> None:
        self.arch = arch
        self.constraints = constraints
        self.memory = memory
        self._tensor_degrees: dict[tuple[int, int], list[int]] = {}
        self._default_mfu: dict[str, tuple[GpuSpec, float]] = {}  # GPU id -> (GPU, MFU)

    def context(
        self, key: GroupKey, gpu: GpuSpec, compute: ComputePath, mfu_override: float | None
    ) -> GroupContext:
        """Derive a group's planning facts (domain, TP cap, usable bytes, efficiency). The
        GPU's default MFU is remembered per GPU (keyed by its id, taken again for another GPU
        of that id): the groups of a request have a few GPU types."""
        domain = nvlink_domain_size(key.interconnect, gpu, key.gpu_count)
        efficiency = mfu_override
        if efficiency is None:
            known = self._default_mfu.get(gpu.id)
            if known is None or known[0] is not gpu:
                known = self._default_mfu[gpu.id] = (gpu, default_mfu(gpu))
            efficiency = known[1]
        warnings: tuple[Reason, ...] = ()
        if compute.emulated:
            warnings = (
                Reason(
                    code="dtype_emulated",
                    data={
                        "dtype": compute.dtype,
                        "gpu": gpu.id,
                        "path": compute.path,
                        "tflops": compute.tflops,
                    },
                ),
            )
        return GroupContext(
            key=key,
            gpu=gpu,
            compute=compute,
            domain=domain,
            tp_cap=max_tensor_parallel(domain),
            usable_bytes=key.memory_exposed_bytes * (1.0 - self.constraints.min_headroom_fraction),
            efficiency=efficiency,
            warnings=warnings,
        )

    def tensor_degrees(self, gpus_per_node: int, cap: int) -> list[int]:
        """TP degrees: powers of two dividing the node's GPUs and the attention heads, and
        dividing the KV heads or a multiple of them (KV heads are split or replicated whole;
        vLLM ``QKVParallelLinear``); MLA has no per-head KV cache to split. Memoised."""
        key = (gpus_per_node, cap)
        found = self._tensor_degrees.get(key)
        if found is None:
            found = self._compute_tensor_degrees(gpus_per_node, cap)
            self._tensor_degrees[key] = found
        return found

    def _compute_tensor_degrees(self, gpus_per_node: int, cap: int) -> list[int]:
        heads, kv = self.arch.num_attention_heads, self.arch.num_kv_heads
        mla = self.arch.mla is not None
        return [
            t
            for t in powers_of_two(min(gpus_per_node, cap))
            if gpus_per_node % t == 0 and heads % t == 0 and (mla or kv % t == 0 or t % kv == 0)
        ]

    def expert_degrees(self, data_parallel: int) -> list[int]:
        """EP degrees: powers of two dividing the routed experts and the data-parallel degree
        (experts are spread over ranks carved out of the data-parallel group, Megatron-Core
        ``expert_model_parallel_size``). A serving replica (DP = 1) keeps EP = 1; its experts
        are split by TP and PP."""
        experts = self.arch.num_experts
        if experts <= 0:
            return [1]
        return [
            e
            for e in powers_of_two(min(experts, data_parallel))
            if experts % e == 0 and data_parallel % e == 0
        ]

    def topology_notes(
        self, plan: ParallelPlan, ctx: GroupContext, nodes_spanned: int, nodes_paid: int = 0
    ) -> tuple[Reason, ...]:
        """Rationale codes for where the plan's parallelism runs, and the GPUs it leaves idle
        on the ``nodes_paid`` instances (default: the nodes it spans)."""
        notes: list[Reason] = []
        t = plan.tensor_parallel
        if t > 1 and ctx.domain >= t:
            notes.append(
                Reason(
                    code="tp_in_nvlink_domain",
                    data={
                        "tensor_parallel": t,
                        "domain": ctx.domain,
                        "fabric": scale_up_fabric(ctx.gpu),
                    },
                )
            )
        elif t * plan.pipeline_parallel > ctx.tp_cap and ctx.tp_cap < ctx.key.gpu_count:
            notes.append(
                Reason(
                    code="tp_limited_pcie",
                    data={
                        "tensor_parallel": t,
                        "max_tensor_parallel": ctx.tp_cap,
                        "pipeline_parallel": plan.pipeline_parallel,
                    },
                )
            )
        if nodes_spanned > 1:
            notes.append(
                Reason(
                    code="multi_node",
                    data={
                        "nodes": nodes_spanned,
                        "fabric": ctx.key.network_fabric,
                        "gbit_per_s": ctx.key.network_gbit_per_s,
                    },
                )
            )
        paid = (nodes_paid or nodes_spanned) * ctx.key.gpu_count
        if plan.gpus < paid:
            notes.append(
                Reason(
                    code="idle_gpus",
                    data={
                        "gpu": ctx.gpu.id,
                        "gpus_used": plan.gpus,
                        "gpus_paid": paid,
                        "searched": True,
                    },
                )
            )
        return tuple(notes)

    def no_fit_reason(
        self,
        ctx: GroupContext,
        fits_on: Callable[[int, int], int | None],
        nearest: Nearest,
    ) -> Reason:
        """Why nothing fits a group, in order: TP over PCIe would fit; more nodes would fit
        (no cluster network / over max_nodes / over max_gpus); else insufficient memory with
        the smallest per-GPU requirement seen and the plan behind it.

        Args:
            fits_on: ``(tp_cap, max_nodes) -> nodes | None``, the smallest node count on which
                some plan fits.
        """
        key, gpu = ctx.key, ctx.gpu
        g = key.gpu_count
        if ctx.domain <= PCIE_MAX_TENSOR_PARALLEL < g and fits_on(g, 1) == 1:
            return Reason(
                code="tp_over_pcie",
                data={
                    "gpu": gpu.id,
                    "gpu_count": g,
                    "max_tensor_parallel": ctx.tp_cap,
                    "fabric": scale_up_fabric(gpu),
                },
            )
        # A one-GPU instance without a cluster network is not a cluster building block: its
        # rejection is the memory shortfall, with the numbers (issue 2 acceptance).
        probe = key.network_gbit_per_s is not None or g > 1
        nodes = fits_on(ctx.tp_cap, NODE_PROBE_LIMIT) if probe else None
        if nodes is not None and nodes > 1:
            if key.network_gbit_per_s is None:
                network: dict[str, Any] = {
                    "gpu": gpu.id,
                    "gpu_count": g,
                    "nodes_needed": nodes,
                    "exposed_bytes": key.memory_exposed_bytes,
                }
                return Reason(code="no_cluster_network", data={**network, **nearest.data()})
            if nodes > self.constraints.max_nodes:
                return Reason(
                    code="over_max_nodes",
                    data={
                        "gpu": gpu.id,
                        "gpu_count": g,
                        "nodes_needed": nodes,
                        "max_nodes": self.constraints.max_nodes,
                        "exposed_bytes": key.memory_exposed_bytes,
                        **nearest.data(),
                    },
                )
            return Reason(
                code="over_max_gpus",
                data={
                    "gpu": gpu.id,
                    "gpu_count": g,
                    "gpus_needed": nodes * g,
                    "max_gpus": self.constraints.max_gpus,
                    "exposed_bytes": key.memory_exposed_bytes,
                    **nearest.data(),
                },
            )
        data: dict[str, Any] = {
            "gpu": gpu.id,
            "usable_bytes": int(ctx.usable_bytes),
            "exposed_bytes": key.memory_exposed_bytes,
            "gpu_count": g,
            **nearest.data(),
        }
        return Reason(code="insufficient_memory", data=data)
