"""The plan search space for one group of identical offers (same GPU, count, memory,
interconnect and network), the values it produces, and the explanations of a group that
fits nothing.

Search space (bounded and deterministic; every degree is a power of two):

* tensor parallel ``t``: divides the node's GPU count and the attention heads (KV heads may
  replicate, DESIGN "Inference"), at most the NVLink domain, or
  :data:`~gpu_advisor.core.planner.hardware.PCIE_MAX_TENSOR_PARALLEL` on PCIe-only GPUs;
  never across nodes;
* pipeline parallel ``p``: at most the layer count; stages may span nodes;
* expert parallel ``e`` (MoE): divides the routed experts and ``t x d``;
* data parallel: the rest of the GPUs; ZeRO stage (training): the workload's ``sharding``,
  else the lowest of none / zero1 / zero2 / zero3 that fits (ZeRO-1/2 move the same bytes as
  plain data parallel, ZeRO-3 1.5x: Rajbhandari et al. 2020, section 7);
* nodes: 1, 2, 4, ... up to ``max_nodes`` and ``max_gpus`` -- more than one only on offers whose
  network is cluster-grade (InfiniBand, EFA, RoCE with a bandwidth).

Memory falls as any degree grows, so for each ``(t, p)`` the most-sharded plan is tried first
and the search stops at the first fitting plan in the order t, p, e, ZeRO: at most
``|t| x |p| x (1 + |e| x |zero|)`` estimator calls per node count, memoised per request (plans
recur across groups with the same GPU count, whatever the GPU).

Training chooses, per node count, the plan with the shortest time per token; node counts stay
separate options (cost, time and deadline trade them off per offer), from the first that fits
up to the first that meets the deadline -- or all of them for ``time_to_result``.
Training is in :mod:`gpu_advisor.core.planner.training`, serving in
:mod:`gpu_advisor.core.planner.serving`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from msgspec import Struct

from gpu_advisor.core.architecture import Architecture
from gpu_advisor.core.gpus import GpuSpec
from gpu_advisor.core.offers import Interconnect
from gpu_advisor.core.planner.estimator import MemoMemory
from gpu_advisor.core.planner.hardware import (
    ComputePath,
    max_tensor_parallel,
    nvlink_domain_size,
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
"""The PP search stops when doubling PP lowers the per-GPU requirement by less than this."""

PIPELINE_MAX = 64
"""Largest pipeline-parallel degree searched: the 1-trillion-parameter Megatron-LM run used
PP = 64 (Narayanan et al. 2021, Table 1); Llama 3 405B used 16 (Dubey et al. 2024, Table 4)."""


def smallest_fitting_power(fits: Callable[[int], bool], limit: int) -> int | None:
    """Smallest power of two ``n <= limit`` with ``fits(n)``, by binary search over the
    exponents (memory per GPU falls as nodes are added, so ``fits`` is monotone); None when
    even ``limit`` (rounded down to a power of two) does not fit."""
    powers = list(powers_of_two(limit))
    if not powers or not fits(powers[-1]):
        return None
    low, high = 0, len(powers) - 1  # powers[high] fits
    while low < high:
        middle = (low + high) // 2
        if fits(powers[middle]):
            high = middle
        else:
            low = middle + 1
    return powers[high]


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

    def context(
        self, key: GroupKey, gpu: GpuSpec, compute: ComputePath, mfu_override: float | None
    ) -> GroupContext:
        """Derive a group's planning facts (domain, TP cap, usable bytes, efficiency)."""
        domain = nvlink_domain_size(key.interconnect, gpu, key.gpu_count)
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
            efficiency=mfu_override if mfu_override is not None else default_mfu(gpu),
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
        self, plan: ParallelPlan, ctx: GroupContext, nodes_spanned: int
    ) -> tuple[Reason, ...]:
        """Rationale codes for where the plan's parallelism runs."""
        notes: list[Reason] = []
        t = plan.tensor_parallel
        if t > 1 and ctx.domain >= t:
            fabric = "Infinity Fabric" if ctx.gpu.vendor == "amd" else "NVLink"
            notes.append(
                Reason(
                    code="tp_in_nvlink_domain",
                    data={"tensor_parallel": t, "domain": ctx.domain, "fabric": fabric},
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
        return tuple(notes)

    def no_fit_reason(
        self,
        ctx: GroupContext,
        fits_on: Callable[[int, int], int | None],
        best: list[MemoryBreakdown],
    ) -> Reason:
        """Why nothing fits a group, in order: TP over PCIe would fit; more nodes would fit
        (no cluster network / over max_nodes / over max_gpus); else insufficient memory with
        the smallest per-GPU requirement seen.

        Args:
            fits_on: ``(tp_cap, max_nodes) -> nodes | None``, the smallest node count on which
                some plan fits.
        """
        key, gpu = ctx.key, ctx.gpu
        g = key.gpu_count
        if ctx.tp_cap < g and fits_on(g, 1) == 1:
            return Reason(
                code="tp_over_pcie",
                data={"gpu": gpu.id, "gpu_count": g, "max_tensor_parallel": ctx.tp_cap},
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
                if best:
                    network["need_bytes"] = best[0].total_bytes
                return Reason(code="no_cluster_network", data=network)
            if nodes > self.constraints.max_nodes:
                return Reason(
                    code="over_max_nodes",
                    data={
                        "gpu": gpu.id,
                        "gpu_count": g,
                        "nodes_needed": nodes,
                        "max_nodes": self.constraints.max_nodes,
                    },
                )
            return Reason(
                code="over_max_gpus",
                data={
                    "gpu": gpu.id,
                    "gpus_needed": nodes * g,
                    "max_gpus": self.constraints.max_gpus,
                },
            )
        data: dict[str, Any] = {
            "gpu": gpu.id,
            "usable_bytes": int(ctx.usable_bytes),
            "exposed_bytes": key.memory_exposed_bytes,
            "gpu_count": g,
        }
        if best:
            data["need_bytes"] = best[0].total_bytes
        return Reason(code="insufficient_memory", data=data)
