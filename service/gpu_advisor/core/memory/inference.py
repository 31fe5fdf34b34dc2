"""Per-GPU memory of serving: weights by format, KV cache, activation peak, engine reservation.

* Weights: the requested dtype, else the checkpoint's shipped format (DeepSeek-V3 fp8 on all
  block linears, gpt-oss mxfp4 on the routed experts), else bf16. Quantised formats apply to the
  block linears; embeddings, head, biases and norms stay 16-bit (GGUF formats cover embeddings
  and head too; :mod:`.formats`).
* KV cache: one replica's share of the deployment's ``concurrency`` sequences,
  ``ceil(concurrency / data_parallel)`` (:func:`sequences_per_replica`; every replica of a
  plan holds its own KV cache), of ``context_length`` tokens (:mod:`.kv_cache`), in the KV dtype
  (default bf16; fp32 with fp32 weights).
* Activation peak: ``engine="vllm"``: the profiling pass of ``max_num_batched_tokens`` tokens
  plus the sampler (:mod:`.engine`); ``engine="generic"`` (transformers ``generate``): the
  prefill of every prompt of the replica's share at once, logits of the last position only.
  An encoder-only model (BERT) generates nothing: its input is the whole ``context_length``
  (or ``prompt_tokens``), ``output_tokens`` does not apply.
* Overhead: CUDA context + allocator reserve; with vLLM also its non-torch memory and CUDA
  graphs.
"""

from __future__ import annotations

from msgspec import Struct

from gpu_advisor.core.architecture import Architecture
from gpu_advisor.core.memory.engine import (
    VLLM_CUDA_GRAPH_BYTES,
    VLLM_NON_TORCH_BYTES,
    EngineReservation,
    block_rounded_tokens,
    forward_bytes_per_token,
    sampler_bytes,
    vllm_default_max_num_batched_tokens,
    vllm_default_max_num_seqs,
    vllm_reservation,
)
from gpu_advisor.core.memory.formats import (
    BF16,
    FP32,
    SHIPPED_FORMATS,
    WeightFormat,
    elements_bytes,
    weight_format,
)
from gpu_advisor.core.memory.kv_cache import (
    cross_attention_kv_bytes,
    kv_cache_bytes,
    kv_cache_bytes_per_token,
)
from gpu_advisor.core.memory.layout import ShardParams, stage_range
from gpu_advisor.core.memory.overhead import OverheadModel, runtime_overhead_bytes
from gpu_advisor.core.memory.parts import FRESH, Parts
from gpu_advisor.core.memory.validate import total_stack_layers
from gpu_advisor.core.results import MemoryBreakdown, ParallelPlan
from gpu_advisor.core.spec import InferenceWorkload


class WeightPlan(Struct, frozen=True, kw_only=True):
    """Formats of a model's weights for serving.

    Attributes:
        dense_linear: format of the non-routed block linears.
        routed_linear: format of the routed-expert linears.
        rest: format of embeddings, head, biases, norms (fp32/bf16/fp16, or the GGUF format).
    """

    dense_linear: WeightFormat
    routed_linear: WeightFormat
    rest: WeightFormat


def weight_plan(arch: Architecture, weight_dtype: str | None) -> WeightPlan:
    """Which format each group of weights is stored in (see module docstring).

    Raises:
        InvalidSpecError: unknown dtype (field ``workload.weight_dtype``).
    """
    if weight_dtype is None:
        shipped = SHIPPED_FORMATS.get(arch.shipped_weight_format or "")
        if shipped is None or not shipped.quantized:
            fmt = shipped or BF16
            return WeightPlan(dense_linear=fmt, routed_linear=fmt, rest=fmt)
        if arch.shipped_quantized_modules == "routed-experts":
            return WeightPlan(dense_linear=BF16, routed_linear=shipped, rest=BF16)
        return WeightPlan(dense_linear=shipped, routed_linear=shipped, rest=BF16)
    fmt = weight_format(weight_dtype)
    if not fmt.quantized:
        return WeightPlan(dense_linear=fmt, routed_linear=fmt, rest=fmt)
    rest = fmt if fmt.covers_embeddings else BF16
    return WeightPlan(dense_linear=fmt, routed_linear=fmt, rest=rest)


def shard_weight_bytes(shard: ShardParams, plan: WeightPlan) -> dict[str, int]:
    """Weight bytes of one GPU's shard by group: quantised linears with their constants and
    per-channel scales, the rest in its 16/32-bit (or GGUF) format."""
    dense = elements_bytes(shard.dense_linear, plan.dense_linear) + (
        shard.dense_linear_rows * plan.dense_linear.channel_scale_bytes
    )
    routed = elements_bytes(shard.routed_linear, plan.routed_linear) + (
        shard.routed_linear_rows * plan.routed_linear.channel_scale_bytes
    )
    rest_fmt = plan.rest
    small = BF16 if rest_fmt.covers_embeddings else rest_fmt  # GGUF keeps norms/biases in float
    embedding = elements_bytes(shard.embedding + shard.lm_head, rest_fmt)
    other = elements_bytes(shard.bias + shard.other, small)
    return {
        "weights.linear_bytes": dense,
        "weights.routed_expert_bytes": routed,
        "weights.embedding_bytes": embedding,
        "weights.other_bytes": other,
    }


def kv_element_bytes(workload: InferenceWorkload, plan: WeightPlan) -> int:
    """KV dtype bytes: the requested one, else fp32 for fp32 weights, else 2 (bf16/fp16)."""
    if workload.kv_cache_dtype is not None:
        return {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1}[workload.kv_cache_dtype]
    return 4 if plan.rest is FP32 else 2


def activation_bytes(plan: WeightPlan) -> int:
    """Compute dtype bytes: fp32 for fp32 weights, else 2 (bf16/fp16; quantised kernels
    dequantise to 16-bit)."""
    return 4 if plan.rest is FP32 else 2


class _Engine(Struct, frozen=True, kw_only=True):
    activation_peak: int
    reservation: EngineReservation | None
    non_torch: int
    cuda_graphs: int
    batched_tokens: int


def prompt_tokens(workload: InferenceWorkload, arch: Architecture | None = None) -> int:
    """Prompt length: given (at most the context), else the context minus the output tokens
    (at least 1); for an encoder-only ``arch`` (no generation) the whole context."""
    if workload.prompt_tokens is not None:
        return min(workload.prompt_tokens, workload.context_length)
    if arch is not None and arch.encoder_only:
        return workload.context_length
    return max(1, workload.context_length - workload.output_tokens)


def sequences_per_replica(workload: InferenceWorkload, plan: ParallelPlan) -> int:
    """Sequences one replica holds: ``ceil(concurrency / data_parallel)``.

    ``concurrency`` counts the concurrent sequences of the whole deployment; its
    ``data_parallel`` replicas share them, and a GPU's KV cache and activations are sized for
    its replica's share (at least one sequence).
    """
    return max(1, -(-workload.concurrency // max(1, plan.data_parallel)))


def _engine(
    arch: Architecture,
    workload: InferenceWorkload,
    plan: ParallelPlan,
    *,
    weights: int,
    act_b: int,
    capacity_bytes: int | None,
    last_stage: bool,
) -> _Engine:
    tp = plan.tensor_parallel
    per_token = forward_bytes_per_token(arch, act_b, tensor_parallel=tp)
    if workload.engine == "vllm":
        tokens = workload.max_num_batched_tokens or vllm_default_max_num_batched_tokens(
            capacity_bytes
        )
        seqs = workload.max_num_seqs or vllm_default_max_num_seqs(capacity_bytes)
        peak = tokens * per_token + (sampler_bytes(seqs, arch.vocab_size) if last_stage else 0)
        graphs = VLLM_CUDA_GRAPH_BYTES if workload.cuda_graphs else 0
        reservation = None
        if capacity_bytes:
            reservation = vllm_reservation(
                capacity_bytes=capacity_bytes,
                gpu_memory_utilization=workload.gpu_memory_utilization,
                weights_bytes=weights,
                activation_peak_bytes=peak,
                non_torch_bytes=VLLM_NON_TORCH_BYTES,
                cuda_graph_bytes=graphs,
            )
        return _Engine(
            activation_peak=peak,
            reservation=reservation,
            non_torch=VLLM_NON_TORCH_BYTES,
            cuda_graphs=graphs,
            batched_tokens=tokens,
        )
    sequences = sequences_per_replica(workload, plan)
    tokens = prompt_tokens(workload, arch) * sequences
    peak = tokens * per_token
    if last_stage and not arch.encoder_only:
        peak += sampler_bytes(sequences, arch.vocab_size)
    return _Engine(
        activation_peak=peak, reservation=None, non_torch=0, cuda_graphs=0, batched_tokens=tokens
    )


def stage_breakdown(
    arch: Architecture,
    workload: InferenceWorkload,
    plan: ParallelPlan,
    stage: int,
    *,
    wplan: WeightPlan,
    capacity_bytes: int | None,
    overhead: OverheadModel,
    parts: Parts = FRESH,
) -> MemoryBreakdown:
    """The serving requirement of one GPU of pipeline stage ``stage``, for one replica's share
    of the sequences (:func:`sequences_per_replica`; ``details["kv_cache.sequences"]``)."""
    shard = parts.shard(arch, plan, stage)
    weight_parts = shard_weight_bytes(shard, wplan)
    weights = sum(weight_parts.values())
    kv_b = kv_element_bytes(workload, wplan)
    act_b = activation_bytes(wplan)
    start, end = stage_range(total_stack_layers(arch), plan.pipeline_parallel, stage)
    enc = 0 if arch.encoder_only else arch.num_encoder_layers
    dec_range = (max(0, start - enc), max(0, end - enc))
    context = workload.context_length
    if workload.engine == "vllm":
        context = block_rounded_tokens(context)
    sequences = sequences_per_replica(workload, plan)
    kv = kv_cache_bytes(
        arch,
        context_tokens=context,
        sequences=sequences,
        element_bytes=kv_b,
        tensor_parallel=plan.tensor_parallel,
        layer_range=dec_range,
    )
    kv += cross_attention_kv_bytes(
        arch,
        encoder_tokens=prompt_tokens(workload, arch),
        sequences=sequences,
        element_bytes=kv_b,
        tensor_parallel=plan.tensor_parallel,
        layers=dec_range[1] - dec_range[0],
    )
    last = stage == plan.pipeline_parallel - 1
    eng = _engine(
        arch,
        workload,
        plan,
        weights=weights,
        act_b=act_b,
        capacity_bytes=capacity_bytes,
        last_stage=last,
    )
    cuda_context, fragmentation = runtime_overhead_bytes(eng.activation_peak, overhead)
    overhead_bytes = cuda_context + fragmentation + eng.non_torch + eng.cuda_graphs
    total = weights + kv + eng.activation_peak + overhead_bytes
    details = {
        "pipeline_stage": stage,
        "parameters_on_gpu": shard.total,
        **weight_parts,
        "kv_cache.bytes_per_token": kv_cache_bytes_per_token(
            arch,
            element_bytes=kv_b,
            tensor_parallel=plan.tensor_parallel,
            layers=dec_range[1] - dec_range[0],
        ),
        "kv_cache.sequences": sequences,
        "activations.batched_tokens": eng.batched_tokens,
        "overhead.cuda_context_bytes": cuda_context,
        "overhead.fragmentation_bytes": fragmentation,
        "overhead.non_torch_bytes": eng.non_torch,
        "overhead.cuda_graph_bytes": eng.cuda_graphs,
    }
    reserved = pool = None
    if eng.reservation is not None:
        reserved = eng.reservation.reserved_bytes
        pool = max(0, eng.reservation.kv_pool_bytes)
    return MemoryBreakdown(
        weights_bytes=weights,
        activations_bytes=eng.activation_peak,
        kv_cache_bytes=kv,
        overhead_bytes=overhead_bytes,
        total_bytes=total,
        capacity_bytes=capacity_bytes or 0,
        headroom_fraction=(1 - total / capacity_bytes) if capacity_bytes else None,
        engine_reserved_bytes=reserved,
        kv_pool_bytes=pool,
        details=details,
    )


def inference_breakdown(
    arch: Architecture,
    workload: InferenceWorkload,
    plan: ParallelPlan,
    *,
    capacity_bytes: int | None,
    overhead: OverheadModel,
    parts: Parts = FRESH,
) -> MemoryBreakdown:
    """The requirement of the most loaded GPU of a serving plan (see module docstring).

    ``parts`` computes (or remembers, :class:`.parts.RememberedParts`) the shape-only parts.
    """
    wplan = weight_plan(arch, workload.weight_dtype)
    best: MemoryBreakdown | None = None
    for stage in parts.stages(arch, plan.pipeline_parallel):
        result = stage_breakdown(
            arch,
            workload,
            plan,
            stage,
            wplan=wplan,
            capacity_bytes=capacity_bytes,
            overhead=overhead,
            parts=parts,
        )
        if best is None or result.total_bytes > best.total_bytes:
            best = result
    if best is None:  # pipeline_parallel >= 1 is validated before
        raise ValueError("pipeline_parallel must be at least 1")
    return best
