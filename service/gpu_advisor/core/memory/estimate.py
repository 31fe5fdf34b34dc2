"""Entry points: the per-GPU breakdown of a plan, and the serving capacity questions.

* :func:`estimate_memory` -- the REQUIREMENT of the most loaded GPU (every term separately,
  sub-terms in ``details``); for ``engine="vllm"`` with a capacity also the engine's reservation
  and KV pool.
* :func:`kv_pool_check` -- does the requested context x concurrency fit the KV pool (with the
  numbers)? Infeasible even when the weights fit.
* :func:`max_context_length` / :func:`max_concurrency` -- for a GPU capacity and a plan.

Every function validates the plan first (:func:`.validate.validate_plan`) and runs in time
bounded by the layers and pipeline stages, never by the requested token counts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import msgspec
from msgspec import Struct

from gpu_advisor.core.architecture import Architecture
from gpu_advisor.core.errors import InvalidSpecError
from gpu_advisor.core.memory.engine import (
    VLLM_LARGE_GPU_BYTES,
    KvPoolCheck,
    block_rounded_tokens,
    forward_bytes_per_token,
)
from gpu_advisor.core.memory.inference import (
    ServingKey,
    StageMemory,
    activation_bytes,
    engine_reservation,
    heaviest_serving_stage,
    inference_breakdown,
    kv_element_bytes,
    prompt_tokens,
    sequences_per_replica,
    serving_key,
    stage_breakdown,
    stage_memories,
    weight_plan,
)
from gpu_advisor.core.memory.kernels import Kernels
from gpu_advisor.core.memory.kv_cache import per_layer_token_bytes
from gpu_advisor.core.memory.layout import stage_ranges
from gpu_advisor.core.memory.overhead import DEFAULT_OVERHEAD, OverheadModel
from gpu_advisor.core.memory.parts import RememberedParts
from gpu_advisor.core.memory.training import (
    ShapeInputsMemo,
    StageKey,
    StageStates,
    heaviest_stage,
    sharded_over_dp,
    stage_key,
    stage_states,
    training_breakdown,
)
from gpu_advisor.core.memory.validate import total_stack_layers, validate_plan
from gpu_advisor.core.results import MemoryBreakdown, ParallelPlan
from gpu_advisor.core.spec import InferenceWorkload, TrainingWorkload, Workload

MAX_SEARCH_TOKENS = 2**31
"""Upper bound of the context/concurrency searches (answers are capped here)."""


def estimate_memory(
    arch: Architecture,
    workload: Workload,
    plan: ParallelPlan,
    *,
    capacity_bytes: int | None = None,
    gpus_per_node: int | None = None,
    overhead: OverheadModel = DEFAULT_OVERHEAD,
    kernels: Kernels | None = None,
) -> MemoryBreakdown:
    """Memory the most loaded GPU of ``plan`` needs for ``workload`` on ``arch``, term by term.

    Args:
        arch: resolved architecture.
        workload: training or inference workload.
        plan: parallel plan (TP, PP, DP, EP, sharding, sequence parallel).
        capacity_bytes: the GPU's exposed memory; fills ``capacity_bytes``,
            ``headroom_fraction`` and, for vLLM, ``engine_reserved_bytes``/``kv_pool_bytes``.
        gpus_per_node: GPUs per node for host-memory (offload) accounting; default
            min(8, GPUs of the plan).
        overhead: CUDA-context and fragmentation parameters (lazy CUDA module loading default).
        kernels: activation kernel profile override (default: the family's Hugging Face
            profile, Korthikanti's fused profile for TP/PP plans).

    Returns:
        :class:`MemoryBreakdown`; ``total_bytes`` is the requirement, never a reservation.

    Raises:
        InvalidSpecError: the plan cannot run the model (field ``plan.*``), an unknown LoRA
            target (``workload.lora_targets.N``) or dtype (``workload.weight_dtype``).
    """
    validate_plan(arch, plan)
    # the call's stages share their shape-only parts (one stage's per-layer split by TP and
    # EP serves every stage: without this a 61-stage plan recomputed it 61 times)
    parts = RememberedParts(arch)
    match workload:
        case TrainingWorkload():
            return training_breakdown(
                arch,
                workload,
                plan,
                capacity_bytes=capacity_bytes,
                gpus_per_node=gpus_per_node or None,
                overhead=overhead,
                kernels=kernels,
                parts=parts,
            )
        case InferenceWorkload():
            return inference_breakdown(
                arch, workload, plan, capacity_bytes=capacity_bytes, overhead=overhead, parts=parts
            )


class WorkloadEstimator:
    """:func:`estimate_memory` of one architecture and workload over many plans, computing
    each shape-only part once (:class:`.parts.RememberedParts`) and, for training, each plan
    shape's stage states once (:func:`.training.stage_states` per :func:`.training.stage_key`:
    plans that differ only in data parallelism or sharding share them, and only the ZeRO
    sharding over DP is computed per plan -- or once per shape and capacity where nothing is
    sharded over DP, :func:`.training.sharded_over_dp`); for serving, each plan shape's stage
    memories once (:func:`.inference.stage_memories` per :func:`.inference.serving_key`: plans
    that differ only in data parallelism share them on every GPU, and only the replica's share
    of the sequences, the engine's forward pass and its reservation are computed per plan and
    GPU). The answers are ``estimate_memory``'s, a search over hundreds of plans is several
    times cheaper.

    Callable like ``estimate_memory(arch, workload, plan, *, capacity_bytes=None)`` (the
    planner's ``MemoryEstimator``). Asked about another workload of the same architecture (the
    lighter workloads a suggestion tries, :mod:`gpu_advisor.core.planner.relax`) it answers
    through a sibling estimator for that workload object, made once and sharing the
    architecture's shape-only parts; asked about another architecture, with
    ``estimate_memory`` itself. Request-scoped: make one per search, do not share it between
    threads.
    """

    def __init__(
        self,
        arch: Architecture,
        workload: Workload,
        *,
        overhead: OverheadModel = DEFAULT_OVERHEAD,
        parts: RememberedParts | None = None,
    ) -> None:
        self.arch = arch
        self.workload = workload
        self.overhead = overhead
        self._parts = parts if parts is not None else RememberedParts(arch)
        # other workloads of this architecture: by object (kept, so an id is never reused),
        # and by value (an equal workload made again -- the same lighter workload tried for
        # another set of offers -- reads the same sibling)
        self._siblings: dict[int, tuple[Workload, WorkloadEstimator]] = {}
        self._siblings_by_value: dict[bytes, WorkloadEstimator] = {}
        self._stages: dict[StageKey, tuple[StageStates, ...]] = {}
        self._inputs: ShapeInputsMemo = {}
        self._unsharded: dict[tuple[StageKey, int | None], MemoryBreakdown] = {}
        self._serving: dict[ServingKey, tuple[StageMemory, ...]] = {}

    def __call__(
        self,
        arch: Architecture,
        workload: Workload,
        plan: ParallelPlan,
        /,
        *,
        capacity_bytes: int | None = None,
    ) -> MemoryBreakdown:
        """``estimate_memory(arch, workload, plan, capacity_bytes=...)``.

        Raises:
            InvalidSpecError: as :func:`estimate_memory`.
        """
        if arch is not self.arch:
            return estimate_memory(
                arch, workload, plan, capacity_bytes=capacity_bytes, overhead=self.overhead
            )
        if workload is not self.workload:
            sibling = self._sibling(workload)  # asked with its own (equal) workload object
            return sibling(arch, sibling.workload, plan, capacity_bytes=capacity_bytes)
        match workload:
            case TrainingWorkload():
                # training_breakdown's two phases, the first remembered per plan shape
                key, stages = self._stage_states(workload, plan)
                # (a plan that names a sharding shards over DP: the test is for the others)
                if plan.sharding != "none" or sharded_over_dp(workload, plan):
                    return heaviest_stage(workload, plan, stages, capacity_bytes=capacity_bytes)
                # the second reads nothing else of such a plan: one breakdown per shape
                whole = self._unsharded.get((key, capacity_bytes))
                if whole is None:
                    whole = self._unsharded[(key, capacity_bytes)] = heaviest_stage(
                        workload, plan, stages, capacity_bytes=capacity_bytes
                    )
                return whole
            case InferenceWorkload():
                validate_plan(arch, plan)
                # inference_breakdown's two phases, the first remembered per plan shape
                serving = serving_key(plan)
                memories = self._serving.get(serving)
                if memories is None:
                    memories = self._serving[serving] = stage_memories(
                        arch, workload, plan, overhead=self.overhead, parts=self._parts
                    )
                return heaviest_serving_stage(
                    workload, plan, memories, capacity_bytes=capacity_bytes, overhead=self.overhead
                )

    def _sibling(self, workload: Workload) -> WorkloadEstimator:
        """The estimator of ``workload`` on this architecture, made on first use; it shares
        this one's shape-only parts (:class:`.parts.RememberedParts` keys every part by what
        it depends on, the workload's inputs included)."""
        found = self._siblings.get(id(workload))
        if found is None:
            value = msgspec.json.encode(workload)  # equal encodings: equal fields
            sibling = self._siblings_by_value.get(value)
            if sibling is None:
                sibling = self._siblings_by_value[value] = WorkloadEstimator(
                    self.arch, workload, overhead=self.overhead, parts=self._parts
                )
            found = self._siblings[id(workload)] = (workload, sibling)
        return found[1]

    def _stage_states(
        self, workload: TrainingWorkload, plan: ParallelPlan
    ) -> tuple[StageKey, tuple[StageStates, ...]]:
        """:func:`.training.stage_key` and :func:`.training.stage_states` of ``plan``, the
        states computed once per key, and the plan validated (:func:`.validate.validate_plan`).

        A shape is remembered only once a plan of it passed validation, and the key holds TP,
        PP and EP: a later plan of the key can then fail only the checks that read DP (DP at
        least 1, EP divides DP), and those are made again on every call.

        Raises:
            InvalidSpecError: as :func:`estimate_memory`.
        """
        dp, ep = plan.data_parallel, plan.expert_parallel
        if dp < 1:  # stage_key divides by DP
            validate_plan(self.arch, plan)
        key = stage_key(workload, plan)
        stages = self._stages.get(key)
        if stages is None:
            validate_plan(self.arch, plan)
            stages = self._stages[key] = stage_states(
                self.arch,
                workload,
                plan,
                overhead=self.overhead,
                parts=self._parts,
                inputs_memo=self._inputs,
            )
        elif ep > 1 and dp % ep:
            validate_plan(self.arch, plan)  # raises: EP must divide DP
        return key, stages


def capacity_class(workload: Workload, capacity_bytes: int | None) -> bool:
    """Which GPU capacities share one requirement for ``workload``.

    Two capacities of the same class give the same :func:`estimate_memory` requirement (every
    term, ``total_bytes`` and ``details``); they differ only in what depends on the capacity
    itself: ``capacity_bytes``, ``headroom_fraction`` and, for a vLLM-style engine, the
    reservation and KV pool -- :func:`at_capacity` derives those. The only capacity-dependent
    inputs of the requirement are vLLM's server defaults of ``max_num_batched_tokens`` and
    ``max_num_seqs``, larger on GPUs of at least 70 GiB (:mod:`.engine`,
    ``EngineArgs.get_batch_defaults``); no capacity counts as a large GPU.

    Returns:
        True for the large-GPU class (always True where the capacity does not matter).
    """
    if isinstance(workload, InferenceWorkload) and workload.engine == "vllm":
        return capacity_bytes is None or capacity_bytes >= VLLM_LARGE_GPU_BYTES
    return True


def at_capacity(
    breakdown: MemoryBreakdown, workload: Workload, capacity_bytes: int
) -> MemoryBreakdown:
    """``breakdown`` of a plan re-based on a GPU exposing ``capacity_bytes``, without
    re-estimating: equal to ``estimate_memory(..., capacity_bytes=capacity_bytes)`` when
    ``breakdown`` was estimated for a capacity of the same :func:`capacity_class` (or none).

    Fills ``capacity_bytes`` and ``headroom_fraction``; for ``engine="vllm"`` also
    ``engine_reserved_bytes`` and ``kv_pool_bytes`` from the breakdown's weights, activation
    peak, non-torch and CUDA-graph bytes (:func:`.engine.vllm_kv_pool`).

    Raises:
        ValueError: ``capacity_bytes`` is not positive, or belongs to another capacity class
            than the one ``breakdown`` was estimated for.
    """
    if capacity_bytes <= 0:
        raise ValueError(f"capacity_bytes must be positive, got {capacity_bytes}")
    reserved = pool = None
    if isinstance(workload, InferenceWorkload) and workload.engine == "vllm":
        known = breakdown.capacity_bytes or None
        if capacity_class(workload, known) != capacity_class(workload, capacity_bytes):
            raise ValueError("breakdown was estimated for another capacity class")
        details = breakdown.details
        reserved, pool = engine_reservation(
            workload,
            capacity_bytes,
            weights_bytes=breakdown.weights_bytes,
            activation_peak_bytes=breakdown.activations_bytes,
            non_torch_bytes=details["overhead.non_torch_bytes"],
            cuda_graph_bytes=details["overhead.cuda_graph_bytes"],
        )
    return msgspec.structs.replace(
        breakdown,
        capacity_bytes=capacity_bytes,
        headroom_fraction=1 - breakdown.total_bytes / capacity_bytes,
        engine_reserved_bytes=reserved,
        kv_pool_bytes=pool,
    )


class _ServingStage(Struct, frozen=True, kw_only=True):
    """The parts of one stage's serving memory that do not depend on context or concurrency."""

    fixed_bytes: int
    pool_bytes: int | None
    layer_token_bytes: int
    windows: tuple[tuple[int | None, int], ...]
    act_per_prompt_token: int
    sampler_per_sequence: int
    fragmentation_fraction: float
    encoder_only: bool


def _serving_stages(
    arch: Architecture,
    workload: InferenceWorkload,
    plan: ParallelPlan,
    capacity_bytes: int,
    overhead: OverheadModel,
) -> list[_ServingStage]:
    validate_plan(arch, plan)
    wplan = weight_plan(arch, workload.weight_dtype)
    kv_b = kv_element_bytes(workload, wplan)
    act_b = activation_bytes(wplan)
    enc = 0 if arch.encoder_only else arch.num_encoder_layers
    ranges = stage_ranges(total_stack_layers(arch), plan.pipeline_parallel)
    stages = []
    for stage, (start, end) in enumerate(ranges):
        breakdown = stage_breakdown(
            arch,
            workload,
            plan,
            stage,
            wplan=wplan,
            capacity_bytes=capacity_bytes,
            overhead=overhead,
        )
        details = breakdown.details
        fixed = breakdown.weights_bytes + (
            details["overhead.cuda_context_bytes"]
            + details["overhead.non_torch_bytes"]
            + details["overhead.cuda_graph_bytes"]
        )
        d0, d1 = max(0, start - enc), max(0, end - enc)
        if arch.encoder_only:
            windows: tuple[tuple[int | None, int], ...] = ()
        elif arch.layer_windows:
            per_layer = [arch.layer_windows[i % len(arch.layer_windows)] for i in range(d0, d1)]
            windows = tuple(Counter(per_layer).items())
        else:
            windows = ((None, d1 - d0),)
        last = stage == plan.pipeline_parallel - 1
        pool = None
        if workload.engine == "vllm":
            pool = breakdown.kv_pool_bytes if breakdown.kv_pool_bytes is not None else 0
            fixed += breakdown.activations_bytes
        stages.append(
            _ServingStage(
                fixed_bytes=fixed,
                pool_bytes=pool,
                layer_token_bytes=per_layer_token_bytes(
                    arch, element_bytes=kv_b, tensor_parallel=plan.tensor_parallel
                ),
                windows=windows,
                act_per_prompt_token=forward_bytes_per_token(
                    arch, act_b, tensor_parallel=plan.tensor_parallel
                ),
                sampler_per_sequence=(arch.vocab_size * 8) if last and not arch.encoder_only else 0,
                fragmentation_fraction=overhead.fragmentation_fraction,
                encoder_only=arch.encoder_only,
            )
        )
    return stages


def _sequence_kv(stage: _ServingStage, context: int, vllm: bool) -> int:
    tokens = block_rounded_tokens(context) if vllm else context
    held = sum(count * (tokens if w is None else min(w, tokens)) for w, count in stage.windows)
    return held * stage.layer_token_bytes


def _fits(
    stage: _ServingStage, workload: InferenceWorkload, capacity: int, context: int, sequences: int
) -> bool:
    vllm = workload.engine == "vllm"
    kv = sequences * _sequence_kv(stage, context, vllm)
    if vllm:
        return kv <= (stage.pool_bytes or 0)
    if workload.prompt_tokens is not None:
        prompt = min(workload.prompt_tokens, context)
    elif stage.encoder_only:  # no generation: the whole context is input
        prompt = context
    else:
        prompt = max(1, context - workload.output_tokens)
    act = sequences * (prompt * stage.act_per_prompt_token + stage.sampler_per_sequence)
    total = stage.fixed_bytes + kv + act + int(act * stage.fragmentation_fraction)
    return total <= capacity


def _largest(ok: Callable[[int], bool], high: int = MAX_SEARCH_TOKENS) -> int:
    """Largest n in [1, high] with ok(n), for a monotone predicate (0 if ok(1) is false)."""
    if not ok(1):
        return 0
    lo, hi = 1, high
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def max_context_length(
    arch: Architecture,
    workload: InferenceWorkload,
    plan: ParallelPlan,
    *,
    capacity_bytes: int,
    concurrency: int | None = None,
    overhead: OverheadModel = DEFAULT_OVERHEAD,
) -> int:
    """Longest context (tokens per sequence) that ``concurrency`` sequences can each hold.

    ``concurrency`` (default: the workload's) counts the sequences of the whole plan; each of
    its ``data_parallel`` replicas holds ``ceil(concurrency / data_parallel)`` of them.
    vLLM: the largest L with sequences x KV(L) <= KV pool on every GPU (the pool does not
    depend on L). Generic engine: the largest L whose whole requirement (weights, KV, prefill
    activations, overhead) fits ``capacity_bytes``. Sliding-window layers stop growing at their
    window. 0 when not even one token fits; capped at 2**31 (not at the model's trained
    context: callers that answer users cap it there).

    Raises:
        InvalidSpecError: invalid plan; concurrency < 1 (field ``concurrency``).
    """
    total = workload.concurrency if concurrency is None else concurrency
    if total < 1:
        raise InvalidSpecError("concurrency must be at least 1", field="concurrency")
    sequences = -(-total // plan.data_parallel)
    if sequences < 1:
        raise InvalidSpecError("concurrency must be at least 1", field="concurrency")
    stages = _serving_stages(arch, workload, plan, capacity_bytes, overhead)
    return _largest(lambda n: all(_fits(s, workload, capacity_bytes, n, sequences) for s in stages))


def max_concurrency(
    arch: Architecture,
    workload: InferenceWorkload,
    plan: ParallelPlan,
    *,
    capacity_bytes: int,
    context_length: int | None = None,
    overhead: OverheadModel = DEFAULT_OVERHEAD,
) -> int:
    """Most sequences of ``context_length`` tokens the plan serves at once (0 if not one fits):
    ``data_parallel`` replicas x the most one replica holds.

    One replica, vLLM: floor(KV pool / KV of one sequence) on the tightest GPU (the engine's
    "Maximum concurrency for N tokens per request" log line). Generic engine: the largest
    batch whose requirement fits ``capacity_bytes``.

    Raises:
        InvalidSpecError: invalid plan; context_length < 1 (field ``context_length``).
    """
    context = workload.context_length if context_length is None else context_length
    if context < 1:
        raise InvalidSpecError("context_length must be at least 1", field="context_length")
    stages = _serving_stages(arch, workload, plan, capacity_bytes, overhead)
    if all(_sequence_kv(s, context, workload.engine == "vllm") == 0 for s in stages) and (
        workload.engine == "vllm"
    ):
        return MAX_SEARCH_TOKENS
    one = _largest(lambda n: all(_fits(s, workload, capacity_bytes, context, n) for s in stages))
    return min(MAX_SEARCH_TOKENS, one * plan.data_parallel)


def kv_pool_check(
    arch: Architecture,
    workload: InferenceWorkload,
    plan: ParallelPlan,
    *,
    capacity_bytes: int,
    overhead: OverheadModel = DEFAULT_OVERHEAD,
) -> KvPoolCheck:
    """Whether the requested context x concurrency fits the engine's KV pool, with the numbers.

    For ``engine="vllm"`` the pool is what the reservation leaves; for the generic engine the
    pool is the capacity minus everything else. ``max_tokens`` is the full-attention tokens the
    pool holds per GPU.

    Example (vllm#10517): Llama-3.1-8B bf16 on an RTX 3090 (23.58 GiB), utilization 0.90,
    max_model_len 29,000 with chunked prefill off: pool ~2.9 GiB / 128 KiB = ~23.6k tokens
    < 29,000 -> does not fit.
    """
    breakdown = estimate_memory(
        arch, workload, plan, capacity_bytes=capacity_bytes, overhead=overhead
    )
    required = breakdown.kv_cache_bytes
    if workload.engine == "vllm" and breakdown.kv_pool_bytes is not None:
        pool = breakdown.kv_pool_bytes
    else:
        pool = max(0, capacity_bytes - (breakdown.total_bytes - required))
    per_token = breakdown.details.get("kv_cache.bytes_per_token", 0)
    return KvPoolCheck(
        required_bytes=required,
        pool_bytes=pool,
        fits=required <= pool,
        max_tokens=pool // per_token if per_token else MAX_SEARCH_TOKENS,
        context_length=workload.context_length,
        concurrency=workload.concurrency,
    )


__all__ = [
    "WorkloadEstimator",
    "at_capacity",
    "capacity_class",
    "estimate_memory",
    "kv_pool_check",
    "max_concurrency",
    "max_context_length",
    "prompt_tokens",
    "sequences_per_replica",
]
