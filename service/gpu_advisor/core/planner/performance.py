"""Performance model: training step time and time to result, serving throughput and latency.

Training (DESIGN "Topology and performance"): executed FLOPs per token
(:func:`~gpu_advisor.core.planner.flops.training_flops_per_token`) over
``GPUs x dense peak of the compute dtype x MFU``, stretched by the pipeline bubble, plus the
tensor-parallel all-reduces that cross PCIe and the data-parallel gradient collective where
it does not hide behind the backward pass.

Serving: prefill is compute-bound; decode is memory-bandwidth-bound (each step reads the
replica's weights and the KV cache of every sequence in the batch), batched over the
replica's share of the deployment's concurrent sequences; the deployment's rate is the sum
over its replicas (:func:`deployment_tokens_per_second`), so replicas without a sequence to
serve add nothing.

The MFU defaults are measured model-FLOPs utilisation on well-connected clusters; the
interconnect is modelled explicitly (PCIe tensor parallel, exposed gradient traffic) instead
of being folded into the default a second time.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

from msgspec import Struct

from gpu_advisor.core.architecture import Architecture
from gpu_advisor.core.gpus import GpuSpec
from gpu_advisor.core.memory.engine import vllm_default_max_num_seqs
from gpu_advisor.core.planner.flops import (
    TrainingFlops,
    decode_flops_per_token,
    prefill_flops,
    training_flops_per_token,
)
from gpu_advisor.core.planner.hardware import ComputePath, GpuClass, Links, gpu_class
from gpu_advisor.core.results import MemoryBreakdown, ParallelPlan
from gpu_advisor.core.spec import InferenceWorkload, TrainingWorkload

DEFAULT_MFU: dict[GpuClass, float] = {
    # Llama 3 (Dubey et al. 2024, "The Llama 3 Herd of Models", Table 4): 38-43 % BF16 MFU
    # on 8,192-16,384 H100s. PaLM reached 46.2 % (Chowdhery et al. 2022, Table 3) and MegaScale
    # 55.2 % on 12,288 GPUs (Jiang et al. 2024, NSDI); 0.40 is the conservative end.
    "datacenter": 0.40,
    # Intel Gaudi 2/3 reach 96.9 % / 74.1 % of peak on matmuls (ml-engineering MAMF table,
    # snapshot 744d01e), at least H100's 80.3 %: the datacenter default applies.
    "gaudi": 0.40,
    # MI300X reaches 51.4 % of its peak on matmuls vs H100's 80.3 % (ml-engineering MAMF
    # table): 0.40 x 51.4 / 80.3 = 0.256.
    "amd": 0.25,
    # Workstation / GeForce cards: no published large-scale LLM-training MFU. Assumption:
    # 0.30, below the datacenter figure for power-capped sustained clocks; override with
    # ``workload.mfu``. (GeForce bf16 rates in the GPU table are already the fp32-accumulate
    # rates.)
    "workstation": 0.30,
}

DECODE_BANDWIDTH_EFFICIENCY = 0.6
"""Fraction of peak memory bandwidth a decode step achieves (model bandwidth utilisation).
Databricks / MosaicML, "LLM Inference Performance Engineering: Best Practices" (2023), which
defines MBU and reports values around 50-70 % for A100/H100 serving engines."""

BACKWARD_OVERLAP_FRACTION = 2.0 / 3.0
"""Share of a step's compute that gradient communication can hide behind: the backward pass,
twice the forward (Kaplan et al. 2020, section 2.1). PyTorch DDP and DeepSpeed ZeRO bucket
gradients and reduce them while backward continues (Li et al. 2020, "PyTorch Distributed",
VLDB, section 3.2.3)."""

PIPELINE_MICROBATCHES_PER_STAGE = 4
"""Without a ``global_batch_size``, a pipelined run is assumed to accumulate
``4 x PP`` micro-batches per step: the bubble ``(PP - 1) / m`` (Narayanan et al. 2021,
section 2.2.1) is then under 25 %. Without PP there is no accumulation."""

ACTIVATION_BYTES = 2
"""Activations exchanged by tensor-parallel collectives are 16-bit."""

TP_ALLREDUCE_LATENCY_SECONDS = 9e-6
"""Fixed cost of one tensor-parallel all-reduce of a decode step, whatever its size: vLLM's
custom all-reduce on H100 NVLink measured 8.5-10.1 us for 512 B to 32 KB messages at TP 2, 4
and 8 (sglang pull request #2904, "unit test performance in H100 (without cuda graph)").
A decode step's messages are that small (batch x hidden x 2 bytes: 8 KB for one Llama-3.1-8B
sequence), so this latency, not the link's bandwidth, is what two all-reduces per layer cost;
with the bandwidth term it gives 9 + 8/450 us for one sequence on NVLink. Applied on PCIe as
well (NCCL over PCIe is slower still: a lower bound there)."""

_TINY_SECONDS = 1e-12
"""Floor on step times so a degenerate input (zero FLOPs, zero bandwidth) cannot divide by
zero; real inputs are many orders of magnitude above it."""


def default_mfu(gpu: GpuSpec) -> float:
    """The MFU default for ``gpu`` (see :data:`DEFAULT_MFU` for sources)."""
    return DEFAULT_MFU[gpu_class(gpu)]


def ring_allreduce_seconds(message_bytes: float, ranks: int, bytes_per_s: float) -> float:
    """Ring all-reduce time: each rank moves ``2 (n - 1) / n`` of the message
    (nccl-tests PERFORMANCE.md, bus bandwidth of all-reduce)."""
    if ranks <= 1 or message_bytes <= 0:
        return 0.0
    return 2.0 * (ranks - 1) / ranks * message_bytes / bytes_per_s


class TrainingEstimate(Struct, frozen=True, kw_only=True):
    """One training plan's speed.

    Attributes:
        tokens_per_step: tokens per optimizer step (micro-batch x sequence x DP x accumulation).
        accumulation_steps: micro-batches per step per data-parallel rank.
        step_time_seconds: compute (with bubble) + PCIe TP traffic + exposed gradient traffic.
        compute_seconds: executed FLOPs / (GPUs x peak x MFU) x (1 + bubble).
        bubble_fraction: pipeline bubble ``(PP - 1) / m``.
        tp_comm_seconds: tensor-parallel all-reduces over PCIe per step (0 over NVLink, where
            they are part of the measured MFU the default comes from).
        dp_comm_seconds: gradient all-reduce / reduce-scatter (+ ZeRO-3 all-gathers) per step.
        exposed_comm_seconds: the part of ``dp_comm_seconds`` not hidden behind backward.
        tokens_per_second: trained tokens per second, whole job.
        time_to_result_hours: ``tokens / tokens_per_second`` (None without ``tokens``).
        mfu_applied: utilisation applied to executed FLOPs (the default or the override).
        mfu: model FLOPs / (time x GPUs x peak): what the run achieves end to end.
        compute: the hardware path and its peak.
    """

    tokens_per_step: float
    accumulation_steps: int
    step_time_seconds: float
    compute_seconds: float
    bubble_fraction: float
    tp_comm_seconds: float
    dp_comm_seconds: float
    exposed_comm_seconds: float
    tokens_per_second: float
    time_to_result_hours: float | None
    mfu_applied: float
    mfu: float
    compute: ComputePath


def gradient_sync_bytes(plan: ParallelPlan, memory: MemoryBreakdown) -> float:
    """Bytes each GPU moves per step to synchronise gradients across data parallel.

    Plain DP, ZeRO-1 and ZeRO-2 move ``2 (d - 1) / d`` of the unsharded gradients
    (all-reduce, or reduce-scatter + all-gather: the same volume, Rajbhandari et al. 2020,
    "ZeRO", section 7.2.1); ZeRO-3 / FSDP also all-gathers the weights in forward and backward,
    ``(d - 1) / d x (2 W + G)`` (1.5x plain DP, ZeRO section 7.2.2). Unsharded sizes are
    recovered from the per-GPU breakdown.
    """
    d = plan.data_parallel
    if d <= 1:
        return 0.0
    sharded_grads = plan.sharding in ("zero2", "zero3", "fsdp")
    sharded_weights = plan.sharding in ("zero3", "fsdp")
    grads = memory.gradients_bytes * (d if sharded_grads else 1)
    if sharded_weights:
        weights = memory.weights_bytes * d
        return (d - 1) / d * (2.0 * weights + grads)
    return 2.0 * (d - 1) / d * grads


def estimate_training(
    arch: Architecture,
    workload: TrainingWorkload,
    plan: ParallelPlan,
    memory: MemoryBreakdown,
    compute: ComputePath,
    link: Links,
    mfu: float,
    flops: TrainingFlops | None = None,
) -> TrainingEstimate:
    """Step time, throughput, time to result and achieved MFU of one training plan.

    Args:
        arch: the model.
        workload: the training workload (``tokens``, batch sizes, recomputation...).
        plan: TP x PP x DP with the ZeRO stage.
        memory: per-GPU breakdown of this plan (gradient and weight bytes drive the traffic).
        compute: hardware path of the compute dtype (peak TFLOPS).
        link: bandwidths of the plan's collectives.
        mfu: utilisation applied to executed FLOPs (``workload.mfu`` or the default).
        flops: :func:`training_flops_per_token` of ``arch`` and ``workload`` when the caller
            has it already (it depends on neither the plan nor the GPU).

    Returns:
        The estimate; times in seconds per step and hours to result.
    """
    if flops is None:
        flops = training_flops_per_token(arch, workload)
    t, p, d = plan.tensor_parallel, plan.pipeline_parallel, plan.data_parallel
    micro_tokens = workload.micro_batch_size * workload.sequence_length
    if workload.global_batch_size is not None:
        accumulation = max(
            1, math.ceil(workload.global_batch_size / (workload.micro_batch_size * d))
        )
    else:
        accumulation = 1 if p == 1 else PIPELINE_MICROBATCHES_PER_STAGE * p
    tokens_per_step = float(micro_tokens * d * accumulation)
    peak = compute.tflops * 1e12
    ideal = tokens_per_step * flops.executed / (plan.gpus * peak * mfu)
    bubble = (p - 1) / accumulation
    compute_s = ideal * (1.0 + bubble)
    tp_s = 0.0
    if t > 1 and link.tp_medium == "pcie":
        # 2 all-reduces forward + 2 backward per layer (Narayanan et al. 2021, section 3.2)
        message = micro_tokens * arch.hidden_size * ACTIVATION_BYTES
        layers = math.ceil(arch.num_layers / p)
        tp_s = accumulation * layers * 4 * ring_allreduce_seconds(message, t, link.tp_bytes_per_s)
    dp_s = gradient_sync_bytes(plan, memory) / link.dp_bytes_per_s
    exposed = max(0.0, dp_s - BACKWARD_OVERLAP_FRACTION * compute_s)
    step = max(compute_s + tp_s + exposed, _TINY_SECONDS)
    tokens_per_second = tokens_per_step / step
    hours = workload.tokens / tokens_per_second / 3600.0 if workload.tokens else None
    return TrainingEstimate(
        tokens_per_step=tokens_per_step,
        accumulation_steps=accumulation,
        step_time_seconds=step,
        compute_seconds=compute_s,
        bubble_fraction=bubble,
        tp_comm_seconds=tp_s,
        dp_comm_seconds=dp_s,
        exposed_comm_seconds=exposed,
        tokens_per_second=tokens_per_second,
        time_to_result_hours=hours,
        mfu_applied=mfu,
        mfu=tokens_per_second * flops.model / (plan.gpus * peak),
        compute=compute,
    )


class InferenceEstimate(Struct, frozen=True, kw_only=True):
    """One serving replica's speed.

    Attributes:
        batch: sequences the replica serves together (its share of the deployment's
            concurrency, ``ceil(concurrency / replicas)``, at most ``max_concurrency``).
        max_concurrency: sequences of ``context_length`` one replica runs at once: what its
            KV pool holds, at most the engine's ``max_num_seqs`` (None: neither bounds it).
        decode_step_seconds: one decode step of the whole batch (0 for an encoder-only model:
            it does not decode).
        decode_bound: ``memory`` or ``compute``, whichever term is larger.
        time_to_first_token_seconds: prefill of one prompt plus one decode step (an
            encoder-only model: the forward pass of its batch).
        request_latency_seconds: first token plus the remaining output tokens.
        tokens_per_second: output tokens per second of the replica, prefill included; for an
            encoder-only model, input tokens encoded per second (it generates nothing).
        compute: hardware path of the weight dtype.
    """

    batch: int
    max_concurrency: int | None
    decode_step_seconds: float
    decode_bound: Literal["memory", "compute"]
    time_to_first_token_seconds: float
    request_latency_seconds: float
    tokens_per_second: float
    compute: ComputePath


def sequences_per_replica(workload: InferenceWorkload, plan: ParallelPlan) -> int:
    """A replica's share of the deployment's concurrent sequences,
    ``ceil(concurrency / data_parallel)`` (the memory estimator sizes one GPU's KV cache for
    it: :class:`~gpu_advisor.core.planner.estimator.MemoryEstimator`)."""
    return max(1, -(-workload.concurrency // max(1, plan.data_parallel)))


def kv_bytes_per_sequence(
    memory: MemoryBreakdown, workload: InferenceWorkload, plan: ParallelPlan
) -> float:
    """KV bytes of one full-context sequence on one GPU: the estimator sizes the cache for
    one replica's share of the sequences (:func:`sequences_per_replica` of ``plan``, the plan
    ``memory`` was estimated for)."""
    return memory.kv_cache_bytes / sequences_per_replica(workload, plan)


def max_concurrency(
    memory: MemoryBreakdown,
    workload: InferenceWorkload,
    plan: ParallelPlan,
    usable_bytes: float,
) -> int | None:
    """Full-context sequences one replica holds at once.

    The KV cache of ``n`` sequences must fit both the engine's KV pool (vLLM:
    ``gpu_memory_utilization x capacity`` minus weights, activation peak and overhead) when the
    estimator reports one, and ``usable_bytes`` beside the terms that do not grow with ``n``.
    Without an engine reservation (the generic engine) the activation peak (prefill of every
    prompt of the batch) grows with ``n`` too. None when nothing grows with the batch (an
    encoder-only model, which has no KV cache, under an engine that reserves its memory).

    Args:
        memory: the breakdown of ``plan`` (sized for its share of the sequences).
        plan: the plan ``memory`` was estimated for.
        usable_bytes: the GPU's memory after headroom.
    """
    share = sequences_per_replica(workload, plan)
    growing = float(memory.kv_cache_bytes)
    if memory.kv_pool_bytes is None:
        growing += memory.activations_bytes
    if growing <= 0:
        return None
    room = usable_bytes - (memory.total_bytes - growing)
    most = room / (growing / share)
    if memory.kv_pool_bytes is not None and memory.kv_cache_bytes > 0:
        most = min(most, memory.kv_pool_bytes / (memory.kv_cache_bytes / share))
    return max(0, math.floor(most))


def engine_sequence_limit(workload: InferenceWorkload, capacity_bytes: int) -> int | None:
    """Sequences one replica's engine runs at once: vLLM's ``max_num_seqs`` (the request's,
    else the ``vllm serve`` default for a GPU exposing ``capacity_bytes``: 1024 on GPUs of at
    least 70 GiB, else 256 -- ``EngineArgs.get_batch_defaults``,
    :func:`~gpu_advisor.core.memory.engine.vllm_default_max_num_seqs`); more wait in its
    queue. None for the generic engine (no scheduler limit)."""
    if workload.engine != "vllm":
        return None
    return workload.max_num_seqs or vllm_default_max_num_seqs(capacity_bytes)


def replica_sequence_limit(
    memory: MemoryBreakdown,
    workload: InferenceWorkload,
    plan: ParallelPlan,
    usable_bytes: float,
    capacity_bytes: int,
) -> int | None:
    """Full-context sequences one replica runs at once: what its memory holds
    (:func:`max_concurrency`), at most what its engine schedules
    (:func:`engine_sequence_limit`). None when neither bounds it."""
    held = max_concurrency(memory, workload, plan, usable_bytes)
    limit = engine_sequence_limit(workload, capacity_bytes)
    if limit is None or (held is not None and held <= limit):
        return held
    return limit


def prompt_tokens(workload: InferenceWorkload, arch: Architecture | None = None) -> int:
    """Prompt length: ``prompt_tokens`` (at most the context), else the context minus the
    output tokens, at least 1 -- the same default as the memory estimator, whose KV cache is
    sized for the full context. An encoder-only ``arch`` reads the whole context."""
    if workload.prompt_tokens is not None:
        return min(workload.prompt_tokens, workload.context_length)
    if arch is not None and arch.encoder_only:
        return workload.context_length
    return max(1, workload.context_length - workload.output_tokens)


class ServingFlops(Struct, frozen=True, kw_only=True):
    """The parts of :func:`estimate_inference` that depend on the model and the workload only
    (one request's plans all share them).

    Attributes:
        prompt_tokens: :func:`prompt_tokens` of the workload (float).
        mean_context_tokens: context while decoding, on average: the prompt plus half the
            output tokens, at most ``context_length``.
        prefill_flops: forward FLOPs of one prompt (:func:`~.flops.prefill_flops`).
        decode_flops_per_token: forward FLOPs of one generated token at the mean context
            (:func:`~.flops.decode_flops_per_token`).
    """

    prompt_tokens: float
    mean_context_tokens: float
    prefill_flops: float
    decode_flops_per_token: float


def serving_flops(arch: Architecture, workload: InferenceWorkload) -> ServingFlops:
    """:class:`ServingFlops` of ``arch`` serving ``workload``."""
    prompt = float(prompt_tokens(workload, arch))
    output = float(workload.output_tokens)
    mean_context = min(prompt + output / 2.0, float(workload.context_length))
    return ServingFlops(
        prompt_tokens=prompt,
        mean_context_tokens=mean_context,
        prefill_flops=prefill_flops(arch, prompt),
        decode_flops_per_token=decode_flops_per_token(arch, mean_context),
    )


def _expert_read_fraction(arch: Architecture, batch: int) -> float:
    """Share of the weights a decode step reads: all dense weights, and of the routed experts
    the expected share touched by ``batch`` tokens routed uniformly to ``k`` of ``E`` experts,
    ``1 - (1 - k / E)^batch``."""
    counts = arch.parameters
    if not arch.is_moe or counts.total <= 0:
        return 1.0
    routed = counts.routed_expert / counts.total
    k = max(arch.num_experts_per_token, 1)
    touched = 1.0 - (1.0 - min(k / arch.num_experts, 1.0)) ** batch
    return (1.0 - routed) + routed * touched


class ReplicaTiming(Struct, frozen=True, kw_only=True):
    """The parts of :func:`estimate_inference` that do not depend on the batch: one replica
    of a plan with its per-GPU breakdown on one GPU, compute path and links
    (:func:`replica_timing`). A replica's estimates at several batches
    (:func:`timed_estimate`) share it.

    Attributes:
        arch, workload, flops, compute, link, concurrency_limit: as
            :func:`estimate_inference` takes them.
        tensor_parallel, pipeline_parallel: the replica's degrees.
        weights_bytes: per-GPU weights (all read by a decode step but for untouched
            experts).
        kv_bytes_per_sequence: per-GPU KV bytes of one full-context sequence
            (:func:`kv_bytes_per_sequence`).
        context_fraction: share of a sequence's KV cache a decode step reads on average,
            ``min(1, mean context / context_length)``.
        bandwidth_bytes_per_s: memory bandwidth x :data:`DECODE_BANDWIDTH_EFFICIENCY`.
        tp_flops_per_s: TP x peak FLOP/s x efficiency.
        weights_seconds: one read of the stages' weights, ``PP x weights / bandwidth``.
        prefill_seconds: prefill of one prompt (compute-bound, at least one weights read).
    """

    arch: Architecture
    workload: InferenceWorkload
    flops: ServingFlops
    compute: ComputePath
    link: Links
    concurrency_limit: int | None
    tensor_parallel: int
    pipeline_parallel: int
    weights_bytes: int
    kv_bytes_per_sequence: float
    context_fraction: float
    bandwidth_bytes_per_s: float
    tp_flops_per_s: float
    weights_seconds: float
    prefill_seconds: float


def replica_timing(
    arch: Architecture,
    workload: InferenceWorkload,
    plan: ParallelPlan,
    memory: MemoryBreakdown,
    gpu: GpuSpec,
    compute: ComputePath,
    link: Links,
    concurrency_limit: int | None,
    efficiency: float,
    flops: ServingFlops | None = None,
) -> ReplicaTiming:
    """:class:`ReplicaTiming` of one replica of ``plan`` (arguments as
    :func:`estimate_inference`)."""
    t, p = plan.tensor_parallel, plan.pipeline_parallel
    if flops is None:
        flops = serving_flops(arch, workload)
    bandwidth = max(gpu.memory_bandwidth_bytes_per_s, 1) * DECODE_BANDWIDTH_EFFICIENCY
    tp_peak = t * (compute.tflops * 1e12 * efficiency)
    weights_seconds = p * memory.weights_bytes / bandwidth
    return ReplicaTiming(
        arch=arch,
        workload=workload,
        flops=flops,
        compute=compute,
        link=link,
        concurrency_limit=concurrency_limit,
        tensor_parallel=t,
        pipeline_parallel=p,
        weights_bytes=memory.weights_bytes,
        kv_bytes_per_sequence=kv_bytes_per_sequence(memory, workload, plan),
        context_fraction=min(1.0, flops.mean_context_tokens / workload.context_length),
        bandwidth_bytes_per_s=bandwidth,
        tp_flops_per_s=tp_peak,
        weights_seconds=weights_seconds,
        prefill_seconds=max(flops.prefill_flops / tp_peak, weights_seconds, _TINY_SECONDS),
    )


def timed_estimate(timing: ReplicaTiming, batch: int) -> InferenceEstimate:
    """:func:`estimate_inference` of the replica ``timing`` describes serving ``batch``
    sequences (capped at its ``concurrency_limit``)."""
    arch = timing.arch
    t, p = timing.tensor_parallel, timing.pipeline_parallel
    concurrency_limit = timing.concurrency_limit
    if concurrency_limit is not None:
        batch = min(batch, concurrency_limit)
    batch = max(1, batch)
    flops = timing.flops
    output = float(timing.workload.output_tokens)
    bandwidth = timing.bandwidth_bytes_per_s
    if arch.encoder_only:
        # one forward pass over the batch: its FLOPs, or one read of the weights
        forward_s = max(
            batch * flops.prefill_flops / timing.tp_flops_per_s,
            timing.weights_seconds,
            _TINY_SECONDS,
        )
        return InferenceEstimate(
            batch=batch,
            max_concurrency=concurrency_limit,
            decode_step_seconds=0.0,
            decode_bound="compute",
            time_to_first_token_seconds=forward_s,
            request_latency_seconds=forward_s,
            tokens_per_second=batch * flops.prompt_tokens / forward_s,
            compute=timing.compute,
        )
    weights_read = timing.weights_bytes * _expert_read_fraction(arch, batch)
    kv_read = batch * timing.kv_bytes_per_sequence * timing.context_fraction
    memory_s = p * (weights_read + kv_read) / bandwidth
    compute_s = batch * flops.decode_flops_per_token / timing.tp_flops_per_s
    tp_s = 0.0
    link = timing.link
    if t > 1:
        # two all-reduces per layer (after attention and after the MLP; Shoeybi et al. 2019,
        # Megatron-LM section 3), each a fixed latency plus its ring traffic; over NVLink as
        # over PCIe: at decode sizes the latency dominates either link
        message = batch * arch.hidden_size * ACTIVATION_BYTES
        allreduce = TP_ALLREDUCE_LATENCY_SECONDS + ring_allreduce_seconds(
            message, t, link.tp_bytes_per_s
        )
        tp_s = arch.num_layers * 2 * allreduce
    step = max(memory_s, compute_s, _TINY_SECONDS) + tp_s
    prefill_s = timing.prefill_seconds
    return InferenceEstimate(
        batch=batch,
        max_concurrency=concurrency_limit,
        decode_step_seconds=step,
        decode_bound="memory" if memory_s >= compute_s else "compute",
        time_to_first_token_seconds=prefill_s + step,
        request_latency_seconds=prefill_s + output * step,
        tokens_per_second=batch * output / (batch * prefill_s + output * step),
        compute=timing.compute,
    )


def estimate_inference(
    arch: Architecture,
    workload: InferenceWorkload,
    plan: ParallelPlan,
    memory: MemoryBreakdown,
    gpu: GpuSpec,
    compute: ComputePath,
    link: Links,
    concurrency_limit: int | None,
    efficiency: float,
    *,
    batch: int | None = None,
    flops: ServingFlops | None = None,
) -> InferenceEstimate:
    """Throughput and latency of one replica of ``plan``.

    Decode step = ``max(PP x (weights read + KV read) / (bandwidth x MBU),
    batch x FLOPs per token / (TP x peak x efficiency))`` plus, with TP, two all-reduces per
    layer (:data:`TP_ALLREDUCE_LATENCY_SECONDS` each plus ring traffic). PP stages run
    one after another for a token, so PP adds memory, not speed (vLLM docs, "Distributed
    inference and serving"). Prefill is compute-bound and is not batched away: a batch of
    prompts costs the sum of their FLOPs. An encoder-only model runs one forward pass per
    request and generates nothing: its rate is input tokens encoded per second.

    Computed in two phases, :func:`replica_timing` (what does not depend on the batch) and
    :func:`timed_estimate`.

    Args:
        plan: the plan ``memory`` was estimated for (its ``data_parallel`` sets the share of
            the sequences ``memory`` holds; the replica is its TP x PP).
        concurrency_limit: :func:`max_concurrency` of one replica.
        efficiency: utilisation of peak compute for prefill (the MFU default or override).
        batch: sequences the replica serves together; default its share of the
            concurrency, :func:`sequences_per_replica` of ``plan``. Capped at
            ``concurrency_limit``.
        flops: :func:`serving_flops` of ``arch`` and ``workload`` when the caller has it
            already (it depends on neither the plan nor the GPU).
    """
    timing = replica_timing(
        arch, workload, plan, memory, gpu, compute, link, concurrency_limit, efficiency, flops
    )
    if batch is None:
        batch = sequences_per_replica(workload, plan)
    return timed_estimate(timing, batch)


def deployment_tokens_per_second(
    rate: Callable[[int], float], concurrency: int, replicas: int
) -> float:
    """Tokens per second of ``replicas`` replicas sharing ``concurrency`` sequences.

    The sequences spread as evenly as they can: ``concurrency mod replicas`` replicas serve
    ``q + 1`` of them and the others ``q = concurrency // replicas``; an idle replica adds
    nothing (one sequence runs on one replica). So at concurrency 1 the deployment is as fast
    as one replica serving one sequence, however many replicas it has.

    Args:
        rate: tokens per second of one replica serving a batch of ``n`` sequences (``n >= 1``).
    """
    share, bigger = divmod(concurrency, replicas)
    total = 0.0
    if bigger:
        total += bigger * rate(share + 1)
    if share:
        total += (replicas - bigger) * rate(share)
    return total
