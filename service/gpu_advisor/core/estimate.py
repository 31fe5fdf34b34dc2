"""``POST /v1/estimate``: memory (and speed) of one workload, with or without hardware.

Answers the questions people ask of a memory calculator (issue 3, item 3):

* a plan on nothing in particular: the per-GPU breakdown of that plan (one GPU by default);
* "how many GPUs of each kind": the smallest feasible GPU count per GPU type (``min_gpus``);
* a given GPU x count x nodes (and optionally a plan): the breakdown per GPU there, whether it
  fits, and the speed (``performance``);
* for inference: the KV bytes per token, the longest context at the requested concurrency and
  the largest concurrency at the requested context on that hardware.

Hardware questions run the same planner as ``/v1/recommendations`` over *reference offers*:
one synthetic instance per (GPU, GPUs per node) with the GPU's own intra-node link (NVLink
where the GPU has it, else PCIe), a cluster-grade network between nodes (InfiniBand,
3,200 Gbit/s per node, as on H100/H200 HGX clusters: 8 x 400 Gbit/s ConnectX-7) and a price
of $1 per GPU-hour billed per second, so "cheapest" means "fewest GPU-hours". ``min_gpus``
builds clusters of 8-GPU nodes only (1, 2 and 4-GPU reference instances stand alone, as such
cloud instances do); hardware the request names gets the network at any node size. Pure: no
I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from msgspec import Struct

from gpu_advisor.core.architecture import Architecture
from gpu_advisor.core.errors import InvalidSpecError
from gpu_advisor.core.gpus import GpuCatalog, GpuSpec
from gpu_advisor.core.memory import (
    WorkloadEstimator,
    estimate_memory,
    max_concurrency,
    max_context_length,
)
from gpu_advisor.core.memory.inference import kv_element_bytes, weight_plan
from gpu_advisor.core.memory.kv_cache import kv_cache_bytes_per_token
from gpu_advisor.core.offers import Interconnect, Network, Offer, ProviderInfo
from gpu_advisor.core.planner import MEMORY_CAPACITY_RULE, recommend
from gpu_advisor.core.planner.evaluate import evaluate_plan
from gpu_advisor.core.planner.explain import rendered
from gpu_advisor.core.planner.hardware import (
    MAX_GPUS_PER_NODE,
    max_gpus_per_node,
    nvlink_domain_size,
    scale_up_fabric,
)
from gpu_advisor.core.planner.recommend import RecommendationResult
from gpu_advisor.core.planner.serving import context_limit_reason
from gpu_advisor.core.results import (
    MemoryBreakdown,
    ModelSummary,
    ParallelPlan,
    Performance,
    Reason,
    RejectedGroup,
)
from gpu_advisor.core.spec import (
    Constraints,
    EstimateRequest,
    InferenceWorkload,
    Objective,
    PlanSpec,
    RecommendationRequest,
    TrainingWorkload,
)

REFERENCE_PROVIDER = ProviderInfo(
    name="reference",
    billing_increment_seconds=1,
    source="synthetic reference offers of /v1/estimate: $1 per GPU-hour, billed per second",
)
REFERENCE_NETWORK = Network(fabric="infiniband", gbit_per_s=3200.0)
"""8 x 400 Gbit/s ConnectX-7 per node: NVIDIA DGX H100 user guide, "Network ports"."""
REFERENCE_GPUS_PER_NODE = (1, 2, 4, 8)
REFERENCE_PRICE_REASONS = frozenset(
    {"billing", "per_million_tokens", "checkpoint_storage", "spot_risk", "spot_rate_unknown"}
)
"""Rationale codes about money, meaningless on reference offers (dropped from ``notes``)."""
WORKLOAD_SUGGESTIONS = frozenset(
    {"lower_concurrency", "raise_concurrency", "lower_context_length", "shorter_context"}
)
"""Suggestions about the workload itself, shown in ``notes`` when nothing fits the hardware
(the others are about offers and constraints the estimate does not have)."""
MIN_GPUS_MAX_NODES = 64
"""Largest cluster ``min_gpus`` searches: 64 nodes of 8 GPUs (512 GPUs)."""


class HardwareInfo(Struct, frozen=True, kw_only=True):
    """The hardware an estimate was made for: ``gpu_count`` GPUs per node on ``nodes`` nodes."""

    gpu: str
    gpu_count: int
    nodes: int
    memory_exposed_bytes: int
    interconnect: Interconnect
    reference_network: Network | None = None


class MinGpus(Struct, frozen=True, kw_only=True):
    """Smallest feasible deployment on one GPU type (None where nothing up to 512 GPUs fits,
    or the GPU cannot run the workload's dtype; ``reason`` says why)."""

    gpu: str
    memory_exposed_bytes: int
    min_gpus: int | None
    nodes: int | None = None
    plan: ParallelPlan | None = None
    memory_per_gpu_bytes: int | None = None
    reason: str | None = None


class EstimateResponse(Struct, frozen=True, kw_only=True):
    """``POST /v1/estimate`` response (bytes are ``int``; see DESIGN "API").

    Attributes:
        fits: whether the workload runs on the hardware with ``plan`` (None without
            hardware): the requirement within each GPU's exposed memory, for a vLLM-style
            engine the KV cache of a replica's share of the sequences within its KV pool, a
            serving context within the model's trained context and a dtype the GPU runs; the
            same planner as ``/v1/check`` chooses the plan when none is given (false, with
            the reasons in ``notes``, when it finds none).
        performance: the speed on the hardware (when it fits).
        kv_cache_bytes_per_token: inference only; whole model, all layers, no TP split.
        max_context_length / max_concurrency: inference on hardware: the longest context at
            the requested concurrency (at most the model's ``max_position_embeddings``) and
            the most sequences at the requested context the whole plan holds (all its
            replicas; None when no KV cache bounds it).
        min_gpus: without hardware, the smallest feasible GPU count per GPU type.
        notes: why the hardware does not fit, or how the plan was chosen.
    """

    model: ModelSummary
    plan: ParallelPlan
    memory_per_gpu: MemoryBreakdown
    hardware: HardwareInfo | None = None
    fits: bool | None = None
    performance: Performance | None = None
    kv_cache_bytes_per_token: int | None = None
    max_context_length: int | None = None
    max_concurrency: int | None = None
    min_gpus: list[MinGpus] = []
    notes: list[Reason] = []


def parallel_plan(spec: PlanSpec) -> ParallelPlan:
    """The request's plan as the core's value (same field names)."""
    return ParallelPlan(
        tensor_parallel=spec.tensor_parallel,
        pipeline_parallel=spec.pipeline_parallel,
        data_parallel=spec.data_parallel,
        expert_parallel=spec.expert_parallel,
        sharding=spec.sharding,
        sequence_parallel=spec.sequence_parallel and spec.tensor_parallel > 1,
    )


def reference_interconnect(gpu: GpuSpec, gpus_per_node: int) -> Interconnect:
    """The GPU's own scale-up link where it has one (NVLink on SXM boards and NVL pairs,
    Infinity Fabric on AMD Instinct, RoCE on Intel Gaudi), else PCIe."""
    if gpus_per_node > 1 and gpu.nvlink_bytes_per_s > 0:
        match gpu.vendor:
            case "amd":
                return "infinity-fabric"
            case "intel":
                return "roce"
            case _:
                return "nvlink"
    return "pcie"


def reference_offer(gpu: GpuSpec, gpus_per_node: int, *, clustered: bool = True) -> Offer:
    """A synthetic instance of ``gpus_per_node`` GPUs at $1 per GPU-hour (module docstring),
    with :data:`REFERENCE_NETWORK` between nodes unless ``clustered`` is false."""
    return Offer(
        provider=REFERENCE_PROVIDER.name,
        instance_type=f"{gpus_per_node}x{gpu.id}",
        region="reference",
        gpu=gpu.id,
        gpu_count=gpus_per_node,
        gpu_memory_bytes=gpu.memory_bytes,
        gpu_memory_exposed_bytes=gpu.memory_exposed_bytes,
        vcpus=16.0 * gpus_per_node,
        ram_bytes=gpus_per_node * 2 * gpu.memory_bytes,
        price_per_hour_usd=float(gpus_per_node),
        interconnect=reference_interconnect(gpu, gpus_per_node),
        network=REFERENCE_NETWORK if clustered else None,
        billing_increment_seconds=1,
        source="reference",
        fetched_at="",
    )


def _plan_on_reference(
    arch: Architecture,
    request: EstimateRequest,
    offers: list[Offer],
    gpus: Mapping[str, GpuSpec],
    *,
    max_nodes: int,
    objective: Objective,
    estimator: WorkloadEstimator | None = None,
) -> RecommendationResult:
    """The best plan of ``request``'s workload on reference ``offers``. ``estimator``: a
    :class:`WorkloadEstimator` of ``arch`` and ``request.workload`` that earlier calls of the
    same request used (the GPU types of :func:`min_gpus_per_type` share its plan shapes)."""
    constraints = Constraints(max_nodes=max_nodes, spot="forbid")
    ask = RecommendationRequest(
        model=request.model,
        workload=request.workload,
        constraints=constraints,
        objective=objective,
        top_k=1,
    )
    return recommend(
        arch,
        ask,
        offers,
        gpus,
        {REFERENCE_PROVIDER.name: REFERENCE_PROVIDER},
        estimator if estimator is not None else WorkloadEstimator(arch, ask.workload),
        capacity_rule=MEMORY_CAPACITY_RULE,
    )


def _first_reason(rejected: list[RejectedGroup]) -> str | None:
    return rejected[0].text if rejected else None


def min_gpus_per_type(
    arch: Architecture, request: EstimateRequest, gpus: GpuCatalog
) -> list[MinGpus]:
    """The smallest feasible GPU count on each GPU type (fewest GPU-hours at equal price)."""
    rows: list[MinGpus] = []
    # one estimator for every GPU type: the plan shapes and lighter workloads they try repeat
    estimator = WorkloadEstimator(arch, request.workload)
    for spec in gpus.specs:
        # Clusters are built of full nodes (8-GPU HGX/DGX boards behind InfiniBand); the
        # smaller instances stand alone. Otherwise three 2-GPU nodes (6 GPUs) would be
        # "the smallest deployment" where a real cluster takes one 8-GPU node.
        widest = max(REFERENCE_GPUS_PER_NODE)
        offers = [reference_offer(spec, n, clustered=n == widest) for n in REFERENCE_GPUS_PER_NODE]
        result = _plan_on_reference(
            arch,
            request,
            offers,
            gpus.by_id,
            max_nodes=MIN_GPUS_MAX_NODES,
            objective="price_per_hour",
            estimator=estimator,
        )
        if result.recommendations:
            best = result.recommendations[0]
            rows.append(
                MinGpus(
                    gpu=spec.id,
                    memory_exposed_bytes=spec.memory_exposed_bytes,
                    min_gpus=best.gpus,
                    nodes=best.nodes,
                    plan=best.plan,
                    memory_per_gpu_bytes=best.memory_per_gpu.total_bytes,
                )
            )
        else:
            rows.append(
                MinGpus(
                    gpu=spec.id,
                    memory_exposed_bytes=spec.memory_exposed_bytes,
                    min_gpus=None,
                    reason=_first_reason(result.rejected),
                )
            )
    rows.sort(key=lambda r: (r.min_gpus is None, r.min_gpus or 0, r.gpu))
    return rows


def _serving_limits(
    arch: Architecture, workload: InferenceWorkload, plan: ParallelPlan, capacity: int
) -> tuple[int, int | None]:
    """The longest context at the requested concurrency, capped at the model's trained context
    (``max_position_embeddings``, when known), and the most sequences at the requested context
    the plan holds (None: no KV cache bounds it, an encoder-only model)."""
    context = max_context_length(arch, workload, plan, capacity_bytes=capacity)
    if arch.max_position_embeddings is not None:
        context = min(context, arch.max_position_embeddings)
    concurrency: int | None = max_concurrency(arch, workload, plan, capacity_bytes=capacity)
    if arch.encoder_only and workload.engine == "vllm":
        concurrency = None
    return context, concurrency


def _kv_per_token(arch: Architecture, workload: InferenceWorkload) -> int:
    element = kv_element_bytes(workload, weight_plan(arch, workload.weight_dtype))
    return kv_cache_bytes_per_token(arch, element_bytes=element)


def check_gpus_per_node(gpu: GpuSpec, gpu_count: int, field: str) -> None:
    """Reject a node with more GPUs than real nodes of ``gpu`` hold
    (:func:`~gpu_advisor.core.planner.hardware.max_gpus_per_node`: 16, or 72 for a GB200
    NVL72 rack).

    Raises:
        InvalidSpecError: naming ``field`` (``hardware.gpu_count`` / ``target.gpu_count``).
    """
    most = max_gpus_per_node(gpu)
    if gpu_count > most:
        raise InvalidSpecError(
            f"gpu_count is GPUs per node; no {gpu.id} node holds {gpu_count:,} (at most "
            f"{most}: 8 on HGX/DGX boards, 16 on HGX-2/DGX-2-class nodes"
            + (f", {most} in one {gpu.id} rack" if most > MAX_GPUS_PER_NODE else "")
            + "); use nodes for more",
            field=field,
        )


def _check_plan(plan: ParallelPlan, gpu: GpuSpec, hardware: HardwareInfo) -> list[Reason]:
    """An explicit plan against the hardware: more GPUs than it has, or TP across nodes, is
    an error; fewer GPUs (idle ones, still paid for) or TP beyond the NVLink domain are
    notes.

    Raises:
        InvalidSpecError: ``plan`` (too many GPUs) or ``plan.tensor_parallel`` (across
            nodes).
    """
    total = hardware.gpu_count * hardware.nodes
    if plan.gpus > total:
        raise InvalidSpecError(
            f"the plan uses {plan.gpus} GPUs (tensor_parallel x pipeline_parallel x "
            f"data_parallel) but the hardware has {total} (gpu_count x nodes)",
            field="plan",
        )
    if plan.tensor_parallel > hardware.gpu_count:
        raise InvalidSpecError(
            f"tensor_parallel {plan.tensor_parallel} spans nodes of {hardware.gpu_count} GPUs; "
            "tensor parallel stays inside one node (use pipeline_parallel across nodes)",
            field="plan.tensor_parallel",
        )
    notes: list[Reason] = []
    domain = nvlink_domain_size(hardware.interconnect, gpu, hardware.gpu_count)
    if plan.tensor_parallel > max(domain, 1) and domain > 1:
        notes.append(
            Reason(
                code="tp_beyond_domain",
                data={
                    "tensor_parallel": plan.tensor_parallel,
                    "domain": domain,
                    "gpu": gpu.id,
                    "fabric": scale_up_fabric(gpu),
                },
            )
        )
    if plan.gpus < total:
        notes.append(
            Reason(
                code="idle_gpus",
                data={"gpu": gpu.id, "gpus_used": plan.gpus, "gpus_paid": total},
            )
        )
    return [rendered(n) for n in notes]


def check_qlora_plan(workload: TrainingWorkload | InferenceWorkload, plan: ParallelPlan) -> None:
    """QLoRA runs data parallel only: DDP, or ZeRO-3 / FSDP over the NF4 base (see
    :data:`~gpu_advisor.core.planner.training.QLORA_SHARDINGS` for the sources).

    Raises:
        InvalidSpecError: ``plan.tensor_parallel`` or ``plan.pipeline_parallel`` above 1.
    """
    if not isinstance(workload, TrainingWorkload) or workload.method != "qlora":
        return
    for name in ("tensor_parallel", "pipeline_parallel"):
        if getattr(plan, name) > 1:
            raise InvalidSpecError(
                f"QLoRA keeps its bitsandbytes NF4 base whole on every GPU: {name} must be 1; "
                "split the work with data_parallel (sharding none for DDP, zero3 or fsdp for "
                "FSDP-QLoRA)",
                field=f"plan.{name}",
            )


def _on_hardware(reason: Reason) -> Reason:
    """A planner's reason as a note about the given hardware: the node limit it quotes is
    ``hardware.nodes`` here (the planner's own field is ``constraints.max_nodes``)."""
    if reason.code not in ("over_max_nodes", "lower_concurrency") or "max_nodes" not in reason.data:
        return reason
    return rendered(Reason(code=reason.code, data={**reason.data, "limit_field": "hardware.nodes"}))


def nearest_plan(rejected: Sequence[RejectedGroup], gpus: int) -> ParallelPlan | None:
    """The plan a rejection quotes as its nearest miss (``data.plan``), if any. A serving
    replica -- quoted with one sequence (``one_sequence_per_replica``), or the replica shape a
    deployment too large for its limits was sized with (``replica_gpus``) -- is shown as
    deployed on the ``gpus`` GPUs: as many replicas as fit them, sharing the sequences."""
    for group in rejected:
        plan = group.data.get("plan")
        if isinstance(plan, dict):
            replicas = plan["data_parallel"]
            if group.data.get("one_sequence_per_replica") or "replica_gpus" in group.data:
                replicas = max(1, gpus // (plan["tensor_parallel"] * plan["pipeline_parallel"]))
            return ParallelPlan(
                tensor_parallel=plan["tensor_parallel"],
                pipeline_parallel=plan["pipeline_parallel"],
                data_parallel=replicas,
                expert_parallel=plan["expert_parallel"],
                sharding=plan["sharding"],
                sequence_parallel=plan["tensor_parallel"] > 1,
            )
    return None


def estimate(
    arch: Architecture,
    request: EstimateRequest,
    gpus: GpuCatalog,
    gpu: GpuSpec | None,
    summary: ModelSummary,
) -> EstimateResponse:
    """Answer ``POST /v1/estimate`` (see the module docstring).

    Args:
        arch: the resolved model.
        request: the request (hardware ``gpu`` already resolved to ``gpu`` by the caller).
        gpus: the GPU table.
        gpu: the resolved hardware GPU, or None without hardware.
        summary: the model block of the answer.

    Raises:
        InvalidSpecError: more GPUs per node than real nodes hold (``hardware.gpu_count``), a
            plan with more GPUs than the hardware (``plan``), TP across nodes
            (``plan.tensor_parallel``), TP or PP with QLoRA (``plan.*``) or a plan that cannot
            run the model (``plan.*``).
    """
    workload = request.workload
    kv_per_token = (
        _kv_per_token(arch, workload) if isinstance(workload, InferenceWorkload) else None
    )
    hardware = request.hardware
    if hardware is not None and gpu is not None:
        check_gpus_per_node(gpu, hardware.gpu_count, "hardware.gpu_count")
    if request.plan is not None:
        check_qlora_plan(workload, parallel_plan(request.plan))
    too_long = (
        context_limit_reason(arch.name, arch.max_position_embeddings, workload.context_length)
        if isinstance(workload, InferenceWorkload)
        else None
    )
    if hardware is None or gpu is None:
        plan = parallel_plan(request.plan) if request.plan is not None else ParallelPlan()
        memory = estimate_memory(arch, workload, plan)
        return EstimateResponse(
            model=summary,
            plan=plan,
            memory_per_gpu=memory,
            kv_cache_bytes_per_token=kv_per_token,
            min_gpus=min_gpus_per_type(arch, request, gpus),
            notes=[] if too_long is None else [rendered(too_long)],
        )
    info = HardwareInfo(
        gpu=gpu.id,
        gpu_count=hardware.gpu_count,
        nodes=hardware.nodes,
        memory_exposed_bytes=gpu.memory_exposed_bytes,
        interconnect=reference_interconnect(gpu, hardware.gpu_count),
        reference_network=REFERENCE_NETWORK if hardware.nodes > 1 else None,
    )
    capacity = gpu.memory_exposed_bytes
    notes: list[Reason] = []
    performance: Performance | None = None
    if request.plan is not None:
        plan = parallel_plan(request.plan)
        plan_notes = _check_plan(plan, gpu, info)
        memory = estimate_memory(arch, workload, plan, capacity_bytes=capacity)
        evaluation = evaluate_plan(
            arch,
            workload,
            plan,
            memory,
            gpu,
            gpus_per_node=hardware.gpu_count,
            interconnect=info.interconnect,
            network_gbit_per_s=REFERENCE_NETWORK.gbit_per_s if hardware.nodes > 1 else None,
        )
        fits, performance = evaluation.fits, evaluation.performance
        notes = plan_notes + list(evaluation.notes)
    else:
        result = _plan_on_reference(
            arch,
            request,
            [reference_offer(gpu, hardware.gpu_count)],
            gpus.by_id,
            max_nodes=hardware.nodes,
            objective="time_to_result",
        )
        if result.recommendations:
            best = result.recommendations[0]
            plan, memory, performance = best.plan, best.memory_per_gpu, best.performance
            # The reference offers' $1 per GPU-hour is no real price: keep only the reasons
            # about the plan, the memory and the speed.
            notes = [
                r
                for r in [*best.rationale, *best.warnings]
                if r.code not in REFERENCE_PRICE_REASONS
            ]
            fits = True
        else:
            # Nothing fits: report the plan the planner's reason quotes (its nearest miss, so
            # the sentence and the plan agree; a serving replica as deployed on the hardware),
            # else the most sharded single plan.
            plan = nearest_plan(
                result.rejected, hardware.gpu_count * hardware.nodes
            ) or ParallelPlan(
                data_parallel=hardware.gpu_count * hardware.nodes,
                sharding="zero3" if not isinstance(workload, InferenceWorkload) else "none",
            )
            memory = estimate_memory(arch, workload, plan, capacity_bytes=capacity)
            notes = [
                _on_hardware(Reason(code=g.code, data=g.data, text=g.text))
                for g in result.rejected[:3]
            ]
            # what the workload itself could change (the hardware is given)
            notes += [
                _on_hardware(Reason(code=s.code, data=s.data, text=s.text))
                for s in result.suggestions
                if s.code in WORKLOAD_SUGGESTIONS
            ]
            fits = False  # nothing the planner tried runs the workload on this hardware
    context: int | None = None
    concurrency: int | None = None
    if isinstance(workload, InferenceWorkload):
        context, concurrency = _serving_limits(arch, workload, plan, capacity)
    return EstimateResponse(
        model=summary,
        plan=plan,
        memory_per_gpu=memory,
        hardware=info,
        fits=fits,
        performance=performance,
        kv_cache_bytes_per_token=kv_per_token,
        max_context_length=context,
        max_concurrency=concurrency,
        notes=notes,
    )
