"""``POST /v1/check`` when nothing fits the target: which of memory and topology failed (from
the planner's nearest rejection), and the breakdown of the nearest plan. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from gpu_advisor.core.architecture import Architecture
from gpu_advisor.core.check_explain import NOT_EVALUATED
from gpu_advisor.core.check_results import CHECK_NAMES, Check, CheckEstimate, make_check
from gpu_advisor.core.check_target import ResolvedTarget
from gpu_advisor.core.errors import InvalidSpecError
from gpu_advisor.core.estimate import nearest_plan
from gpu_advisor.core.planner import MemoryEstimator
from gpu_advisor.core.planner.report import describe
from gpu_advisor.core.results import ParallelPlan, RejectedGroup
from gpu_advisor.core.spec import CheckRequest, InferenceWorkload, TrainingWorkload

# Which rejection explains a target that nothing fits, nearest to passing first: memory that
# would fit with another link, then memory short, then hardware the workload cannot use.
_NO_FIT_ORDER: Final = (
    "context_exceeds_model",
    "tp_over_pcie",
    "no_cluster_network",
    "kv_pool_too_small",
    "insufficient_memory",
    "target_over_concurrency",
    "over_max_nodes",
    "over_max_gpus",
    "dtype_unsupported",
    "gpu_rate_unknown",
    "unknown_gpu",
)


def checks_without_plan(rejected: Sequence[RejectedGroup], max_nodes: int) -> list[Check]:
    """Nothing fits the target: memory and topology from the planner's nearest rejection;
    headroom, budget and deadline cannot be evaluated."""
    rank = {code: i for i, code in enumerate(_NO_FIT_ORDER)}
    group = min(rejected, key=lambda g: rank.get(g.code, len(rank)))
    data = {**group.data, "max_nodes": max_nodes, "offers": group.examples}
    skipped = {"reason": "nothing fits the target"}
    memory: Check
    topology = make_check("topology", None, NOT_EVALUATED, {"reason": "nothing fits in memory"})
    match group.code:
        case "tp_over_pcie":
            memory = make_check("memory", True, "fits_with_wider_tp", data)
            topology = make_check("topology", False, group.code, data)
        case "no_cluster_network" if data["nodes_needed"] <= max_nodes:
            memory = make_check("memory", True, "fits_with_more_nodes", data)
            topology = make_check("topology", False, group.code, data)
        case "no_cluster_network" | "over_max_nodes":
            memory = make_check("memory", False, "over_max_nodes", data)
        case "insufficient_memory" | "kv_pool_too_small" | "context_exceeds_model":
            memory = make_check("memory", False, group.code, data)
        case "target_over_concurrency":
            # a replica holds a sequence; the deployment cannot reach the throughput target
            memory = make_check("memory", True, "fits_below_target", data)
            topology = make_check("topology", False, group.code, data)
        case _:
            reason = f"{group.gpu} cannot run the workload"
            memory = make_check("memory", None, NOT_EVALUATED, {"reason": reason})
            topology = make_check("topology", False, group.code, data)
    return [
        memory,
        topology,
        *(make_check(name, None, NOT_EVALUATED, skipped) for name in CHECK_NAMES[2:]),
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


def fallback_estimate(
    arch: Architecture,
    request: CheckRequest,
    target: ResolvedTarget,
    estimate: MemoryEstimator,
    rejected: Sequence[RejectedGroup] = (),
) -> CheckEstimate:
    """The plan the nearest rejection quotes (so the memory check and the estimate describe
    one plan), else the most sharded simple plan over all the target's GPUs (it does not
    fit)."""
    offer = min(target.offers, key=lambda o: (o.price_per_hour_usd, describe(o)))
    nodes = target.info.max_nodes
    plans = _fallback_plans(request.workload, arch, offer.gpu_count, offer.gpu_count * nodes)
    quoted = nearest_plan(rejected, offer.gpu_count * nodes)
    if quoted is not None:
        plans = [quoted, *plans]
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
            nodes=min(nodes, -(-plan.gpus // offer.gpu_count)),
            gpus=plan.gpus,
            plan=plan,
            memory_per_gpu=memory,
        )
    raise error if error is not None else InvalidSpecError("no plan", field="target")
