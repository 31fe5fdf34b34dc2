"""One given plan on given hardware: does it fit, how fast is it, and why (``/v1/estimate``
with ``hardware`` and ``plan``).

The same rules and performance model as the planner's search, applied to the caller's plan
instead of a searched one:

* fits: the per-GPU requirement within the GPU's exposed memory; for a vLLM-style engine the
  KV cache of a replica's share of the sequences within the engine's KV pool; a serving
  context within the model's trained context (:func:`.serving.context_limit_reason`); a dtype
  the GPU can run (:func:`.hardware.compute_path`);
* performance (only when it fits): :func:`.performance.estimate_training`, or one replica's
  :func:`.performance.estimate_inference` summed over the replicas
  (:func:`.performance.deployment_tokens_per_second`);
* notes: reason codes with their numbers and sentences, as in a recommendation's rationale
  or a rejection.

Pure: no I/O.
"""

from __future__ import annotations

from msgspec import Struct

from gpu_advisor.core.architecture import Architecture
from gpu_advisor.core.gpus import GpuSpec
from gpu_advisor.core.offers import Interconnect
from gpu_advisor.core.planner.explain import rendered
from gpu_advisor.core.planner.hardware import (
    compute_path,
    inference_weight_dtype,
    links,
    missing_path_requirement,
    nvlink_domain_size,
    training_compute_dtype,
)
from gpu_advisor.core.planner.performance import (
    default_mfu,
    deployment_tokens_per_second,
    estimate_inference,
    estimate_training,
    replica_sequence_limit,
    sequences_per_replica,
)
from gpu_advisor.core.planner.report import (
    communication_bound_warning,
    serving_performance,
    serving_speed,
    slow_decode_warning,
    tight_fit_warning,
)
from gpu_advisor.core.planner.serving import context_limit_reason
from gpu_advisor.core.results import MemoryBreakdown, ParallelPlan, Performance, Reason
from gpu_advisor.core.spec import InferenceWorkload, TrainingWorkload, Workload


class PlanEvaluation(Struct, frozen=True, kw_only=True):
    """What a given plan does on given hardware.

    Attributes:
        fits: the workload runs with this plan (see the module docstring).
        performance: its speed; None when it does not fit.
        notes: why it does not fit, or the plan, memory and speed in words.
    """

    fits: bool
    performance: Performance | None = None
    notes: list[Reason] = []


def _problems(
    arch: Architecture,
    workload: Workload,
    plan: ParallelPlan,
    memory: MemoryBreakdown,
    gpu: GpuSpec,
    gpus_per_node: int,
) -> list[Reason]:
    capacity = gpu.memory_exposed_bytes
    found: list[Reason] = []
    if isinstance(workload, InferenceWorkload):
        too_long = context_limit_reason(
            arch.name, arch.max_position_embeddings, workload.context_length
        )
        if too_long is not None:
            found.append(too_long)
    if memory.total_bytes > capacity:
        found.append(
            Reason(
                code="insufficient_memory",
                data={
                    "gpu": gpu.id,
                    "gpu_count": gpus_per_node,
                    "need_bytes": memory.total_bytes,
                    "usable_bytes": capacity,
                    "exposed_bytes": capacity,
                },
            )
        )
    pool = memory.kv_pool_bytes
    if (
        isinstance(workload, InferenceWorkload)
        and pool is not None
        and memory.kv_cache_bytes > pool
    ):
        share = sequences_per_replica(workload, plan)
        found.append(
            Reason(
                code="kv_pool_short",
                data={
                    "gpu": gpu.id,
                    "kv_cache_bytes": memory.kv_cache_bytes,
                    "kv_pool_bytes": pool,
                    "sequences": share,
                    "context_length": workload.context_length,
                    "max_sequences": int(pool // (memory.kv_cache_bytes / share)),
                    "gpu_memory_utilization": workload.gpu_memory_utilization,
                },
            )
        )
    return found


def evaluate_plan(
    arch: Architecture,
    workload: Workload,
    plan: ParallelPlan,
    memory: MemoryBreakdown,
    gpu: GpuSpec,
    *,
    gpus_per_node: int,
    interconnect: Interconnect,
    network_gbit_per_s: float | None,
) -> PlanEvaluation:
    """Fit, speed and notes of ``plan`` on ``gpu`` (module docstring).

    Args:
        memory: ``plan``'s per-GPU breakdown on ``gpu`` (estimated with its exposed bytes).
        gpus_per_node: GPUs per node of the hardware.
        interconnect: the GPUs' link inside a node.
        network_gbit_per_s: the network between nodes (None: one node).
    """
    problems = _problems(arch, workload, plan, memory, gpu, gpus_per_node)
    match workload:
        case TrainingWorkload():
            dtype = training_compute_dtype(workload)
        case InferenceWorkload():
            dtype = inference_weight_dtype(arch, workload)
    compute = compute_path(gpu, dtype)
    if compute is None:
        problems.append(
            Reason(
                code="dtype_unsupported",
                data={"dtype": dtype, "gpu": gpu.id, "needs": missing_path_requirement(dtype)},
            )
        )
    if problems or compute is None:
        return PlanEvaluation(fits=False, notes=[rendered(r) for r in problems])
    domain = nvlink_domain_size(interconnect, gpu, gpus_per_node)
    notes = [
        Reason(
            code="plan",
            data={
                "gpus": plan.gpus,
                "gpu": gpu.id,
                "nodes": max(1, -(-plan.gpus // gpus_per_node)),
                "tensor_parallel": plan.tensor_parallel,
                "pipeline_parallel": plan.pipeline_parallel,
                "data_parallel": plan.data_parallel,
                "expert_parallel": plan.expert_parallel,
                "sharding": plan.sharding,
                "serving": isinstance(workload, InferenceWorkload),
            },
        ),
        Reason(
            code="memory_fit",
            data={
                "total_bytes": memory.total_bytes,
                "usable_bytes": gpu.memory_exposed_bytes,
                "capacity_bytes": gpu.memory_exposed_bytes,
                "headroom_fraction": 1 - memory.total_bytes / gpu.memory_exposed_bytes,
            },
        ),
    ]
    tight = tight_fit_warning(memory)
    if tight is not None:
        notes.append(tight)
    if plan.tensor_parallel > 1 and domain >= plan.tensor_parallel:
        fabric = "Infinity Fabric" if gpu.vendor == "amd" else "NVLink"
        notes.append(
            Reason(
                code="tp_in_nvlink_domain",
                data={"tensor_parallel": plan.tensor_parallel, "domain": domain, "fabric": fabric},
            )
        )
    performance: Performance
    match workload:
        case TrainingWorkload():
            nodes = max(1, -(-plan.gpus // gpus_per_node))
            link = links(gpu, domain, gpus_per_node, nodes, network_gbit_per_s)
            mfu = workload.mfu if workload.mfu is not None else default_mfu(gpu)
            training = estimate_training(arch, workload, plan, memory, compute, link, mfu)
            performance = Performance(
                tokens_per_second=training.tokens_per_second,
                time_to_result_hours=training.time_to_result_hours,
                mfu=training.mfu,
                step_time_seconds=training.step_time_seconds,
            )
            notes.append(
                Reason(
                    code="training_time",
                    data={
                        "hours": training.time_to_result_hours,
                        "mfu": training.mfu,
                        "tokens_per_second": training.tokens_per_second,
                    },
                )
            )
            bound = communication_bound_warning(training)
            if bound is not None:
                notes.append(bound)
        case InferenceWorkload():
            replica_gpus = plan.tensor_parallel * plan.pipeline_parallel
            replica_nodes = max(1, -(-replica_gpus // gpus_per_node))
            link = links(gpu, domain, gpus_per_node, replica_nodes, network_gbit_per_s)
            per_replica = replica_sequence_limit(
                memory, workload, plan, gpu.memory_exposed_bytes, gpu.memory_exposed_bytes
            )
            efficiency = default_mfu(gpu)

            def rate(batch: int) -> float:
                return estimate_inference(
                    arch,
                    workload,
                    plan,
                    memory,
                    gpu,
                    compute,
                    link,
                    per_replica,
                    efficiency,
                    batch=batch,
                ).tokens_per_second

            replica = estimate_inference(
                arch, workload, plan, memory, gpu, compute, link, per_replica, efficiency
            )
            total = deployment_tokens_per_second(rate, workload.concurrency, plan.data_parallel)
            performance = serving_performance(replica, plan.data_parallel, total)
            notes.append(serving_speed(performance, workload, arch.encoder_only))
            slow = slow_decode_warning(replica)
            if slow is not None:
                notes.append(slow)
    return PlanEvaluation(fits=True, performance=performance, notes=[rendered(r) for r in notes])
