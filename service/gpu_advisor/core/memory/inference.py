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

:func:`inference_breakdown` works in two phases, so that a search over many plans can share
the first:

1. :func:`stage_memories` -- per stage, the weights, the KV cache of one sequence, the
   activation bytes per batched token and per sampled sequence, the engine's fixed overhead
   (:class:`StageMemory`). They depend on TP, PP, EP and the stage only (:func:`serving_key`):
   plans that differ only in DP share them, on every GPU.
2. :func:`heaviest_serving_stage` -- the replica's share of the sequences, the engine's forward
   pass (vLLM's batch defaults depend on the GPU), the totals, the reservation and KV pool on
   the GPU, and the breakdown of the most loaded stage.
"""

from __future__ import annotations

from msgspec import Struct

from gpu_advisor.core.architecture import Architecture
from gpu_advisor.core.memory.engine import (
    VLLM_CUDA_GRAPH_BYTES,
    VLLM_NON_TORCH_BYTES,
    block_rounded_tokens,
    forward_bytes_per_token,
    sampler_bytes,
    vllm_default_max_num_batched_tokens,
    vllm_default_max_num_seqs,
    vllm_kv_pool,
)
from gpu_advisor.core.memory.formats import (
    BF16,
    FP32,
    WeightFormat,
    channel_constant_bytes,
    elements_bytes,
    shipped_format,
    weight_format,
)
from gpu_advisor.core.memory.kv_cache import (
    cached_tokens,
    cross_attention_layer_bytes,
    decoder_layer_token_bytes,
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
        shipped = shipped_format(arch.shipped_weight_format, arch.shipped_group_size)
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
    dense = elements_bytes(shard.dense_linear, plan.dense_linear) + channel_constant_bytes(
        shard.dense_linear_rows, plan.dense_linear
    )
    routed = elements_bytes(shard.routed_linear, plan.routed_linear) + channel_constant_bytes(
        shard.routed_linear_rows, plan.routed_linear
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


def forward_batch(
    workload: InferenceWorkload, *, prompt_tokens: int, sequences: int, capacity_bytes: int | None
) -> tuple[int, int]:
    """(tokens, sequences) of the forward pass that sets the activation peak.

    vLLM profiles ``max_num_batched_tokens`` tokens and samples ``max_num_seqs`` sequences:
    the workload's, else the server defaults of a GPU exposing ``capacity_bytes``
    (:mod:`.engine`). The generic engine prefills every prompt of the replica's share at once:
    ``sequences`` x ``prompt_tokens`` tokens.
    """
    if workload.engine == "vllm":
        return (
            workload.max_num_batched_tokens or vllm_default_max_num_batched_tokens(capacity_bytes),
            workload.max_num_seqs or vllm_default_max_num_seqs(capacity_bytes),
        )
    return prompt_tokens * sequences, sequences


ServingKey = tuple[int, int, int]
"""(TP, PP, EP): see :func:`serving_key`."""


def serving_key(plan: ParallelPlan) -> ServingKey:
    """Everything of ``plan`` that :func:`stage_memories` reads: plans of one workload with one
    key (they differ at most in data parallelism, sharding and sequence parallelism) have the
    same stage memories, on every GPU, so an estimator over many plans computes them once per
    key.

    Data parallelism enters only through the sequences each replica holds
    (:func:`sequences_per_replica`), the capacity through vLLM's batch defaults
    (:func:`forward_batch`) and its reservation and KV pool: all of them are
    :func:`heaviest_serving_stage`'s.
    """
    return (plan.tensor_parallel, plan.pipeline_parallel, plan.expert_parallel)


class StageMemory(Struct, frozen=True, kw_only=True):
    """What one GPU of one pipeline stage of a serving plan needs, apart from how many
    sequences its replica holds and the GPU it runs on: phase one of
    :func:`inference_breakdown` (:func:`stage_memories`). Bytes of one GPU.

    For ``n`` sequences of the replica and a forward pass of ``t`` tokens sampling ``s``
    sequences (:func:`forward_batch`), the GPU needs ``weights_bytes``, ``n x
    kv_bytes_per_sequence`` of KV cache, an activation peak of ``t x
    activation_bytes_per_token + s x sampler_bytes_per_sequence`` and the overhead: CUDA
    context, fragmentation of the activation peak, ``non_torch_bytes`` and
    ``cuda_graph_bytes`` (:func:`heaviest_serving_stage`).

    Attributes:
        stage: pipeline stage index (0-based).
        weights_bytes: the shard's weights (:func:`shard_weight_bytes`).
        kv_bytes_per_sequence: KV cache of one sequence of ``context_length`` tokens (whole
            vLLM blocks) in the stage's decoder layers, with their cross-attention KV of
            the prompt in an encoder-decoder model.
        activation_bytes_per_token: :func:`.engine.forward_bytes_per_token` at the plan's TP.
        sampler_bytes_per_sequence: logits and probabilities of one sampled sequence on the
            last stage (:func:`.engine.sampler_bytes`); 0 on the others, and for an
            encoder-only model under the generic engine.
        prompt_tokens: :func:`prompt_tokens` of one sequence.
        non_torch_bytes: vLLM's memory outside PyTorch's allocator (0 for generic).
        cuda_graph_bytes: vLLM's CUDA graphs (0 for generic or without CUDA graphs).
        details: the breakdown's first ``details`` (stage, parameters, weight groups, KV
            bytes per token); the per-sequence ones follow them.
    """

    stage: int
    weights_bytes: int
    kv_bytes_per_sequence: int
    activation_bytes_per_token: int
    sampler_bytes_per_sequence: int
    prompt_tokens: int
    non_torch_bytes: int
    cuda_graph_bytes: int
    details: dict[str, int]

    def covers(self, other: StageMemory) -> bool:
        """Whether this stage needs at least ``other``'s total for any number of sequences on
        any GPU: every term is at least as large. The total is non-decreasing in each (for a
        non-negative fragmentation fraction)."""
        return (
            self.weights_bytes >= other.weights_bytes
            and self.kv_bytes_per_sequence >= other.kv_bytes_per_sequence
            and self.activation_bytes_per_token >= other.activation_bytes_per_token
            and self.sampler_bytes_per_sequence >= other.sampler_bytes_per_sequence
            and self.prompt_tokens >= other.prompt_tokens
            and self.non_torch_bytes + self.cuda_graph_bytes
            >= other.non_torch_bytes + other.cuda_graph_bytes
        )


class _ShapeInputs(Struct, frozen=True, kw_only=True):
    """What every stage of one plan shape reads of the workload, the architecture and TP:
    phase one's per-shape part (:func:`_shape_inputs`)."""

    wplan: WeightPlan
    stack_layers: int
    encoder_layers: int
    context_tokens: int
    prompt_tokens: int
    layer_token_bytes: int
    cross_attention_layer_bytes: int
    activation_bytes_per_token: int
    sampler_bytes_per_sequence: int
    non_torch_bytes: int
    cuda_graph_bytes: int


def _shape_inputs(
    arch: Architecture, workload: InferenceWorkload, plan: ParallelPlan, wplan: WeightPlan
) -> _ShapeInputs:
    tp = plan.tensor_parallel
    kv_b = kv_element_bytes(workload, wplan)
    vllm = workload.engine == "vllm"
    context = block_rounded_tokens(workload.context_length) if vllm else workload.context_length
    prompt = prompt_tokens(workload, arch)
    samples = vllm or not arch.encoder_only  # generic: an encoder-only model generates nothing
    return _ShapeInputs(
        wplan=wplan,
        stack_layers=total_stack_layers(arch),
        encoder_layers=0 if arch.encoder_only else arch.num_encoder_layers,
        context_tokens=context,
        prompt_tokens=prompt,
        layer_token_bytes=decoder_layer_token_bytes(arch, element_bytes=kv_b, tensor_parallel=tp),
        cross_attention_layer_bytes=cross_attention_layer_bytes(
            arch, encoder_tokens=prompt, element_bytes=kv_b, tensor_parallel=tp
        ),
        activation_bytes_per_token=forward_bytes_per_token(
            arch, activation_bytes(wplan), tensor_parallel=tp
        ),
        sampler_bytes_per_sequence=sampler_bytes(1, arch.vocab_size) if samples else 0,
        non_torch_bytes=VLLM_NON_TORCH_BYTES if vllm else 0,
        cuda_graph_bytes=VLLM_CUDA_GRAPH_BYTES if vllm and workload.cuda_graphs else 0,
    )


def _stage_memory(
    arch: Architecture, plan: ParallelPlan, stage: int, shape: _ShapeInputs, parts: Parts
) -> StageMemory:
    shard = parts.shard(arch, plan, stage)
    weight_parts = shard_weight_bytes(shard, shape.wplan)
    start, end = stage_range(shape.stack_layers, plan.pipeline_parallel, stage)
    enc = shape.encoder_layers
    dec_range = (max(0, start - enc), max(0, end - enc))
    layers = dec_range[1] - dec_range[0]
    # kv_cache_bytes + cross_attention_kv_bytes of one sequence
    kv = cached_tokens(arch, shape.context_tokens, dec_range) * shape.layer_token_bytes
    kv += layers * shape.cross_attention_layer_bytes
    last = stage == plan.pipeline_parallel - 1  # the last stage samples
    return StageMemory(
        stage=stage,
        weights_bytes=sum(weight_parts.values()),
        kv_bytes_per_sequence=kv,
        activation_bytes_per_token=shape.activation_bytes_per_token,
        sampler_bytes_per_sequence=shape.sampler_bytes_per_sequence if last else 0,
        prompt_tokens=shape.prompt_tokens,
        non_torch_bytes=shape.non_torch_bytes,
        cuda_graph_bytes=shape.cuda_graph_bytes,
        details={
            "pipeline_stage": stage,
            "parameters_on_gpu": shard.total,
            **weight_parts,
            "kv_cache.bytes_per_token": layers * shape.layer_token_bytes,  # windows ignored
        },
    )


def stage_memory(
    arch: Architecture,
    workload: InferenceWorkload,
    plan: ParallelPlan,
    stage: int,
    *,
    wplan: WeightPlan,
    parts: Parts = FRESH,
) -> StageMemory:
    """Phase one of one stage: its :class:`StageMemory`. Reads of ``plan`` only what
    :func:`serving_key` keys."""
    return _stage_memory(arch, plan, stage, _shape_inputs(arch, workload, plan, wplan), parts)


def stage_memories(
    arch: Architecture,
    workload: InferenceWorkload,
    plan: ParallelPlan,
    *,
    overhead: OverheadModel,
    parts: Parts = FRESH,
) -> tuple[StageMemory, ...]:
    """Phase one of :func:`inference_breakdown`: the :class:`StageMemory` of every stage that
    can be the most loaded one: of the candidate stages (:meth:`.parts.Parts.stages`), those
    that no earlier stage covers (:meth:`StageMemory.covers`; all of them under a negative
    fragmentation fraction).

    Reads of ``plan`` only what :func:`serving_key` keys, so it can be remembered per key.
    ``parts`` computes (or remembers, :class:`.parts.RememberedParts`) the shape-only parts.

    Raises:
        InvalidSpecError: unknown dtype (field ``workload.weight_dtype``).
    """
    shape = _shape_inputs(arch, workload, plan, weight_plan(arch, workload.weight_dtype))
    prune = overhead.fragmentation_fraction >= 0  # more activations never mean less overhead
    kept: list[StageMemory] = []
    for stage in parts.stages(arch, plan.pipeline_parallel):
        memory = _stage_memory(arch, plan, stage, shape, parts)
        # a stage that an earlier one covers is never the heaviest (the first of equal totals is)
        if not (prune and any(earlier.covers(memory) for earlier in kept)):
            kept.append(memory)
    return tuple(kept)


_Terms = tuple[int, int, int, int, int, int, int]
"""(batched tokens, KV cache, activation peak, CUDA context, fragmentation, overhead, total):
one GPU's, in bytes but for the tokens."""


def _terms(
    memory: StageMemory, sequences: int, batch: tuple[int, int], overhead: OverheadModel
) -> _Terms:
    """``memory``'s terms for ``sequences`` sequences and a forward pass of ``batch``
    (:func:`forward_batch`)."""
    tokens, sampled = batch
    kv = sequences * memory.kv_bytes_per_sequence
    peak = tokens * memory.activation_bytes_per_token + sampled * memory.sampler_bytes_per_sequence
    cuda_context, fragmentation = runtime_overhead_bytes(peak, overhead)
    overhead_bytes = cuda_context + fragmentation + memory.non_torch_bytes + memory.cuda_graph_bytes
    total = memory.weights_bytes + kv + peak + overhead_bytes
    return tokens, kv, peak, cuda_context, fragmentation, overhead_bytes, total


def engine_reservation(
    workload: InferenceWorkload,
    capacity_bytes: int | None,
    *,
    weights_bytes: int,
    activation_peak_bytes: int,
    non_torch_bytes: int,
    cuda_graph_bytes: int,
) -> tuple[int | None, int | None]:
    """(reserved, KV pool) bytes of a vLLM engine on a GPU exposing ``capacity_bytes``
    (:func:`.engine.vllm_kv_pool`; a negative pool counts as 0); (None, None) for the
    generic engine or without a capacity."""
    if workload.engine != "vllm" or not capacity_bytes:
        return None, None
    reserved, pool = vllm_kv_pool(
        capacity_bytes=capacity_bytes,
        gpu_memory_utilization=workload.gpu_memory_utilization,
        weights_bytes=weights_bytes,
        activation_peak_bytes=activation_peak_bytes,
        non_torch_bytes=non_torch_bytes,
        cuda_graph_bytes=cuda_graph_bytes,
    )
    return reserved, max(0, pool)


def _breakdown(
    workload: InferenceWorkload,
    memory: StageMemory,
    sequences: int,
    terms: _Terms,
    capacity_bytes: int | None,
) -> MemoryBreakdown:
    """The breakdown of one stage for ``sequences`` sequences (``terms`` are its
    :func:`_terms`), ``details`` in the order of the terms."""
    tokens, kv, peak, cuda_context, fragmentation, overhead_bytes, total = terms
    reserved, pool = engine_reservation(
        workload,
        capacity_bytes,
        weights_bytes=memory.weights_bytes,
        activation_peak_bytes=peak,
        non_torch_bytes=memory.non_torch_bytes,
        cuda_graph_bytes=memory.cuda_graph_bytes,
    )
    return MemoryBreakdown(
        weights_bytes=memory.weights_bytes,
        activations_bytes=peak,
        kv_cache_bytes=kv,
        overhead_bytes=overhead_bytes,
        total_bytes=total,
        capacity_bytes=capacity_bytes or 0,
        headroom_fraction=(1 - total / capacity_bytes) if capacity_bytes else None,
        engine_reserved_bytes=reserved,
        kv_pool_bytes=pool,
        details={
            **memory.details,
            "kv_cache.sequences": sequences,
            "activations.batched_tokens": tokens,
            "overhead.cuda_context_bytes": cuda_context,
            "overhead.fragmentation_bytes": fragmentation,
            "overhead.non_torch_bytes": memory.non_torch_bytes,
            "overhead.cuda_graph_bytes": memory.cuda_graph_bytes,
        },
    )


def heaviest_serving_stage(
    workload: InferenceWorkload,
    plan: ParallelPlan,
    stages: tuple[StageMemory, ...],
    *,
    capacity_bytes: int | None,
    overhead: OverheadModel,
) -> MemoryBreakdown:
    """Phase two of :func:`inference_breakdown`: each stage's requirement for its replica's
    share of the sequences (:func:`sequences_per_replica`) and the engine's forward pass on
    a GPU exposing ``capacity_bytes`` (:func:`forward_batch`), and the breakdown of the stage
    with the largest total (the first of equal totals), with the engine's reservation.

    Args:
        workload: the serving workload.
        plan: the plan; its data parallelism gives the sequences per replica.
        stages: :func:`stage_memories` of ``workload`` and ``plan`` (or of a plan with the
            same :func:`serving_key`).
        capacity_bytes: vLLM's batch defaults; fills ``capacity_bytes``,
            ``headroom_fraction`` and, for vLLM, the reservation and KV pool.
        overhead: CUDA-context and fragmentation parameters.
    """
    if not stages:  # pipeline_parallel >= 1 is validated before
        raise ValueError("pipeline_parallel must be at least 1")
    sequences = sequences_per_replica(workload, plan)
    batch = forward_batch(
        workload,
        prompt_tokens=stages[0].prompt_tokens,  # every stage's
        sequences=sequences,
        capacity_bytes=capacity_bytes,
    )
    best = stages[0]
    best_terms = _terms(best, sequences, batch, overhead)
    for memory in stages[1:]:
        terms = _terms(memory, sequences, batch, overhead)
        if terms[6] > best_terms[6]:
            best, best_terms = memory, terms
    return _breakdown(workload, best, sequences, best_terms, capacity_bytes)


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
    of the sequences (:func:`sequences_per_replica`; ``details["kv_cache.sequences"]``): both
    phases for that stage alone."""
    memory = stage_memory(arch, workload, plan, stage, wplan=wplan, parts=parts)
    return heaviest_serving_stage(
        workload, plan, (memory,), capacity_bytes=capacity_bytes, overhead=overhead
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
    """The requirement of the most loaded GPU of a serving plan (see module docstring), in two
    phases: the stages' memory apart from the sequences and the GPU (:func:`stage_memories`,
    independent of DP and capacity), then the replica's share of the sequences, the engine's
    forward pass and its reservation on the GPU (:func:`heaviest_serving_stage`).

    ``parts`` computes (or remembers, :class:`.parts.RememberedParts`) the shape-only parts.
    """
    stages = stage_memories(arch, workload, plan, overhead=overhead, parts=parts)
    return heaviest_serving_stage(
        workload, plan, stages, capacity_bytes=capacity_bytes, overhead=overhead
    )
