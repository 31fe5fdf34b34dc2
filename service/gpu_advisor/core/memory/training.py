"""Per-GPU memory of a training step: model states, LoRA/QLoRA, activations, offload, overhead.

Composes the term modules for one pipeline stage; :func:`training_breakdown` evaluates every
stage and reports the most loaded GPU (DESIGN: "the requirement per GPU (most loaded GPU)").

Conventions (documented defaults):

* Mixed precision: 16-bit compute weights + fp32 master + gradients in the compute dtype +
  optimizer state in fp32 (:mod:`.model_states`).
* LoRA/QLoRA: the base is frozen (weights only); adapters are trained in fp32 (PEFT
  ``autocast_adapter_dtype=True`` upcasts adapter weights of 16-bit models to fp32,
  ``peft/tuners/tuners_utils.py``) unless training is pure bf16, so an adapter carries its own
  fp32 weights, fp32 gradients and optimizer state and needs no separate master copy. QLoRA
  stores *all* base linears in NF4 with double quantisation (Dettmers et al. 2023, section 3;
  bitsandbytes replaces every ``nn.Linear`` but the head), embeddings, head and norms in 16-bit.
* 8-bit AdamW keeps 32-bit state for embeddings (transformers ``Trainer.create_optimizer``
  registers ``optim_bits=32`` for ``nn.Embedding``) and for vectors (bitsandbytes
  ``min_8bit_size``).
* Optimizer offload follows DeepSpeed's estimator (:func:`.model_states.offload_host_bytes`):
  the GPU keeps the 16-bit weights; gradients, master weights and optimizer state go to the host.
* Activations use the family's Hugging Face kernel profile, or Korthikanti's fused profile when
  the plan uses tensor or pipeline parallelism (Megatron-style frameworks).
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec
from msgspec import Struct

from gpu_advisor.core.architecture import Architecture
from gpu_advisor.core.memory.activation_stages import StageActivations, stage_activations
from gpu_advisor.core.memory.activations import (
    ActivationSetup,
    LayerActivations,
    LayerKind,
    Trainable,
)
from gpu_advisor.core.memory.formats import NF4, elements_bytes
from gpu_advisor.core.memory.kernels import MEGATRON, Kernels, kernels_for
from gpu_advisor.core.memory.layout import ShardParams, stage_range
from gpu_advisor.core.memory.lora import AdapterCounts
from gpu_advisor.core.memory.model_states import (
    ZERO_STAGE,
    GatherUnit,
    adafactor_state_elements,
    default_gradient_dtype,
    gradient_bytes_per_parameter,
    master_weight_bytes_per_parameter,
    offload_host_bytes,
    optimizer_state_bytes_per_parameter,
    optimizer_state_dtype_bytes,
    weight_bytes_per_parameter,
    zero3_gathered_bytes,
)
from gpu_advisor.core.memory.overhead import OverheadModel, runtime_overhead_bytes
from gpu_advisor.core.memory.parts import FRESH, Parts
from gpu_advisor.core.memory.validate import total_stack_layers
from gpu_advisor.core.results import MemoryBreakdown, ParallelPlan
from gpu_advisor.core.spec import Sharding, TrainingWorkload


class _Split(Struct, frozen=True, kw_only=True):
    """Bytes of one state, split into the part sharded over DP and the routed-expert part
    sharded over expert-data-parallel (DP / EP)."""

    dense: int
    routed: int = 0

    def per_gpu(self, *, sharded: bool, dp: int, edp: int) -> int:
        if not sharded:
            return self.dense + self.routed
        return -(-self.dense // dp) + -(-self.routed // edp)


def effective_sharding(workload: TrainingWorkload, plan: ParallelPlan) -> Sharding:
    """The plan's sharding, or the workload's when the plan says ``none``."""
    if plan.sharding != "none":
        return plan.sharding
    return workload.sharding or "none"


def activation_kernels(arch: Architecture, plan: ParallelPlan) -> Kernels:
    """Korthikanti's fused profile for Megatron-style plans (TP/PP), with dropout only for
    families that train with it, else the family's Hugging Face profile."""
    family = kernels_for(arch.family)
    # sequence parallel only exists next to tensor parallel; on its own it changes nothing
    if plan.tensor_parallel > 1 or plan.pipeline_parallel > 1:
        # Megatron-style fused kernels; dropout only where the model trains with it
        return msgspec.structs.replace(MEGATRON, dropout=family.dropout)
    return family


def _optimizer_bytes(
    workload: TrainingWorkload, shard: ShardParams, state_bytes: int, *, routed_share: float
) -> _Split:
    """Optimizer state of the full model's parameters on this GPU (unsharded)."""
    opt = workload.optimizer
    match opt:
        case "adafactor":
            total = 4 * adafactor_state_elements(shard.factored_elements, shard.bias + shard.other)
            routed = int(total * routed_share)
            return _Split(dense=total - routed, routed=routed)
        case "adamw-8bit":
            per = optimizer_state_bytes_per_parameter(opt)
            matrices_dense = shard.dense_linear + shard.lm_head
            full_state = optimizer_state_bytes_per_parameter("adamw", 4)
            dense = int(matrices_dense * per) + int(
                (shard.embedding + shard.bias - shard.routed_bias + shard.other) * full_state
            )
            routed = int(shard.routed_linear * per) + int(shard.routed_bias * full_state)
            return _Split(dense=dense, routed=routed)
        case _:
            per = optimizer_state_bytes_per_parameter(opt, state_bytes)
            return _Split(dense=int(shard.non_routed * per), routed=int(shard.routed * per))


class _StageResult(Struct, frozen=True, kw_only=True):
    breakdown: MemoryBreakdown
    total: int


def _micro_batches_in_flight(workload: TrainingWorkload, plan: ParallelPlan, stage: int) -> int:
    """1F1B: stage s holds up to PP - s micro-batches (Narayanan et al. 2021, section 2.2.1),
    never more than the micro-batches of a step (global batch / (micro-batch x DP))."""
    pp = plan.pipeline_parallel
    if pp == 1:
        return 1
    if workload.global_batch_size is not None:
        micro = max(
            1, workload.global_batch_size // (workload.micro_batch_size * plan.data_parallel)
        )
    else:
        micro = pp
    return max(1, min(pp - stage, micro))


def _stage(
    arch: Architecture,
    workload: TrainingWorkload,
    plan: ParallelPlan,
    stage: int,
    *,
    adapters: AdapterCounts | None,
    capacity_bytes: int | None,
    gpus_per_node: int,
    overhead: OverheadModel,
    setup: ActivationSetup,
    inventories: Mapping[LayerKind, LayerActivations],
    parts: Parts,
) -> _StageResult:
    prec = workload.precision
    sharding = effective_sharding(workload, plan)
    zstage = ZERO_STAGE[sharding]
    dp = plan.data_parallel
    edp = max(1, dp // plan.expert_parallel)
    shard = parts.shard(arch, plan, stage)
    total_layers = total_stack_layers(arch)
    wb = weight_bytes_per_parameter(prec)
    grad_dtype = workload.gradient_dtype or default_gradient_dtype(prec)
    gb = gradient_bytes_per_parameter(
        prec, grad_dtype, fp32_gradient_copy=workload.fp32_gradient_copy
    )
    state_bytes = optimizer_state_dtype_bytes(prec)
    details: dict[str, int] = {"pipeline_stage": stage, "parameters_on_gpu": shard.total}
    offload = workload.cpu_offload_optimizer
    routed_share = shard.routed / shard.total if shard.total else 0.0

    if workload.method == "full" or adapters is None:
        params = _Split(dense=shard.non_routed, routed=shard.routed)
        weights = _Split(dense=params.dense * wb, routed=params.routed * wb)
        grads = _Split(dense=params.dense * gb, routed=params.routed * gb)
        mb = master_weight_bytes_per_parameter(prec, workload.master_weights_fp32)
        master = _Split(dense=params.dense * mb, routed=params.routed * mb)
        opt = _optimizer_bytes(workload, shard, state_bytes, routed_share=routed_share)
        trainable_params = params
        frozen_weights = _Split(dense=0)
        details["weights.embedding_bytes"] = (shard.embedding + shard.lm_head) * wb
    else:
        frozen_weights = _base_weights(arch, workload, shard)
        layer_share = shard.layers / total_layers if total_layers else 1.0
        tp = plan.tensor_parallel
        a_dense = -(-int(adapters.dense * layer_share) // tp)
        a_routed = -(-int(adapters.routed * layer_share) // (tp * plan.expert_parallel))
        if stage == plan.pipeline_parallel - 1:
            a_dense += -(-adapters.head // tp)
        ab = 2 if prec == "bf16" else 4
        trainable_params = _Split(dense=a_dense, routed=a_routed)
        weights = _Split(dense=a_dense * ab, routed=a_routed * ab)
        grads = _Split(dense=a_dense * ab, routed=a_routed * ab)
        master = _Split(dense=0)
        if workload.optimizer == "adafactor":
            # adapters are matrices: A (r x d_in) and B (d_out x r) factor into r + d rows/cols;
            # their factored state is below 1 % of the adapter count and is bounded by it here.
            per = 4.0 * 2 * workload.lora_rank / max(1, workload.lora_rank + arch.hidden_size)
        else:
            per = optimizer_state_bytes_per_parameter(workload.optimizer, state_bytes)
        opt = _Split(dense=int(a_dense * per), routed=int(a_routed * per))
        details["lora.adapter_parameters"] = a_dense + a_routed
        details["lora.adapter_weights_bytes"] = (a_dense + a_routed) * ab
        details["weights.frozen_base_bytes"] = frozen_weights.dense + frozen_weights.routed

    weights_gpu = weights.per_gpu(sharded=zstage >= 3, dp=dp, edp=edp) + (
        frozen_weights.per_gpu(sharded=zstage >= 3, dp=dp, edp=edp)
    )
    grads_gpu = grads.per_gpu(sharded=zstage >= 2, dp=dp, edp=edp)
    master_gpu = master.per_gpu(sharded=zstage >= 1, dp=dp, edp=edp)
    opt_gpu = opt.per_gpu(sharded=zstage >= 1, dp=dp, edp=edp)
    host = 0
    if zstage >= 3:
        # the gathered unit's gradients are produced in the compute dtype before they are
        # reduce-scattered into the (possibly fp32) partition; a frozen base has none
        unit_kind: GatherUnit = "block" if sharding == "fsdp" else "module"
        unit = shard.block_params if unit_kind == "block" else shard.largest_module
        unit_grad_bytes = wb if workload.method == "full" else 0
        gathered = zero3_gathered_bytes(
            unit, weight_bytes=wb, gradient_bytes=unit_grad_bytes, unit=unit_kind
        )
        gathered_grads = unit * unit_grad_bytes
        weights_gpu += gathered - gathered_grads
        grads_gpu += gathered_grads
        details["weights.zero3_gathered_bytes"] = gathered - gathered_grads
        details["gradients.zero3_gathered_bytes"] = gathered_grads
    if offload:
        fp32_grads = _Split(
            dense=trainable_params.dense * 4, routed=trainable_params.routed * 4
        ).per_gpu(sharded=zstage >= 1, dp=dp, edp=edp)
        offloaded = master_gpu + opt_gpu + fp32_grads
        host_parts = offload_host_bytes(
            offloaded,
            shard_params_per_gpu=trainable_params.dense + trainable_params.routed,
            gpus_per_node=gpus_per_node,
            zero_init=zstage >= 3,
        )
        host = host_parts.total_bytes
        details["host.offloaded_states_bytes"] = host_parts.steady_bytes
        details["host.loading_peak_bytes"] = host_parts.loading_peak_bytes
        details["gradients.offloaded_bytes"] = grads_gpu - details.get(
            "gradients.zero3_gathered_bytes", 0
        )
        grads_gpu = details.get("gradients.zero3_gathered_bytes", 0)
        master_gpu = opt_gpu = 0
    details["optimizer.master_weights_bytes"] = master_gpu
    details["optimizer.state_bytes"] = opt_gpu

    acts = _activations(arch, workload, plan, stage, setup, inventories, parts)
    details["activations.saved_bytes"] = acts.saved
    details["activations.logits_buffer_bytes"] = acts.loss_saved + acts.logits_transient
    details["activations.recompute_working_set_bytes"] = acts.recompute_working_set
    details["activations.micro_batches_in_flight"] = acts.micro_batches_in_flight
    activations = acts.peak
    context, fragmentation = runtime_overhead_bytes(activations, overhead)
    details["overhead.cuda_context_bytes"] = context
    details["overhead.fragmentation_bytes"] = fragmentation
    overhead_bytes = context + fragmentation

    optimizer_gpu = master_gpu + opt_gpu
    total = weights_gpu + grads_gpu + optimizer_gpu + activations + overhead_bytes
    breakdown = MemoryBreakdown(
        weights_bytes=weights_gpu,
        gradients_bytes=grads_gpu,
        optimizer_bytes=optimizer_gpu,
        activations_bytes=activations,
        kv_cache_bytes=0,
        overhead_bytes=overhead_bytes,
        total_bytes=total,
        capacity_bytes=capacity_bytes or 0,
        headroom_fraction=(1 - total / capacity_bytes) if capacity_bytes else None,
        host_bytes=host,
        details=details,
    )
    return _StageResult(breakdown=breakdown, total=total)


def _base_weights(arch: Architecture, workload: TrainingWorkload, shard: ShardParams) -> _Split:
    """Frozen base of LoRA (16-bit) or QLoRA (every block linear in NF4, rest 16-bit)."""
    wb = weight_bytes_per_parameter(workload.precision)
    rest = shard.embedding + shard.lm_head + shard.bias + shard.other
    if workload.method == "qlora":
        dense = elements_bytes(shard.dense_linear, NF4) + (rest - shard.routed_bias) * wb
        routed = elements_bytes(shard.routed_linear, NF4) + shard.routed_bias * wb
        return _Split(dense=dense, routed=routed)
    return _Split(dense=shard.non_routed * wb, routed=shard.routed * wb)


def _activation_setup(
    arch: Architecture,
    workload: TrainingWorkload,
    plan: ParallelPlan,
    adapters: AdapterCounts | None,
    kernels: Kernels,
) -> ActivationSetup:
    """The activation inputs of a plan (the same on every pipeline stage)."""
    if workload.method == "full" or adapters is None:
        trainable = Trainable(all_linear=True)
    else:
        trainable = Trainable(
            all_linear=False,
            names=adapters.names,
            lora_rank=workload.lora_rank,
            head=adapters.head > 0,
            router=False,
            lora_dropout=workload.lora_dropout > 0,
            # fp32 adapters (PEFT's default) on a 16-bit model: each adapter casts its input
            adapter_input_copies=workload.precision in ("bf16-mixed", "fp16-mixed"),
        )
    return ActivationSetup(
        sequence=workload.sequence_length,
        batch=workload.micro_batch_size,
        act_bytes=4 if workload.precision == "fp32" else 2,
        flash_attention=workload.flash_attention,
        kernels=kernels,
        trainable=trainable,
        tensor_parallel=plan.tensor_parallel,
        sequence_parallel=plan.sequence_parallel,
        recompute=workload.gradient_checkpointing,
        decoder_sequence=workload.target_sequence_length,
    )


def _activations(
    arch: Architecture,
    workload: TrainingWorkload,
    plan: ParallelPlan,
    stage: int,
    setup: ActivationSetup,
    inventories: Mapping[LayerKind, LayerActivations],
    parts: Parts,
) -> StageActivations:
    here = stage_range(total_stack_layers(arch), plan.pipeline_parallel, stage)
    return stage_activations(
        arch,
        setup,
        layers=parts.kinds(arch, here, workload.sequence_length),
        first_stage=stage == 0,
        last_stage=stage == plan.pipeline_parallel - 1,
        micro_batches_in_flight=_micro_batches_in_flight(workload, plan, stage),
        inventories=inventories,
    )


def training_breakdown(
    arch: Architecture,
    workload: TrainingWorkload,
    plan: ParallelPlan,
    *,
    capacity_bytes: int | None,
    gpus_per_node: int,
    overhead: OverheadModel,
    kernels: Kernels | None = None,
    parts: Parts = FRESH,
) -> MemoryBreakdown:
    """The requirement of the most loaded GPU of a training plan (see module docstring).

    ``parts`` computes (or remembers, :class:`.parts.RememberedParts`) the shape-only parts.
    """
    adapters = parts.adapters(arch, workload) if workload.method in ("lora", "qlora") else None
    chosen = kernels or activation_kernels(arch, plan)
    setup = _activation_setup(arch, workload, plan, adapters, chosen)
    # every stage's layers are of these kinds; their inventories do not depend on the stage
    inventories = parts.inventories(arch, setup)
    best: _StageResult | None = None
    stages = (
        parts.stages(arch, plan.pipeline_parallel)
        if overhead.fragmentation_fraction >= 0  # more activations never mean less overhead
        else range(plan.pipeline_parallel)
    )
    for stage in stages:
        result = _stage(
            arch,
            workload,
            plan,
            stage,
            adapters=adapters,
            capacity_bytes=capacity_bytes,
            gpus_per_node=gpus_per_node,
            overhead=overhead,
            setup=setup,
            inventories=inventories,
            parts=parts,
        )
        if best is None or result.total > best.total:
            best = result
    if best is None:  # pipeline_parallel >= 1 is validated before
        raise ValueError("pipeline_parallel must be at least 1")
    return best.breakdown
