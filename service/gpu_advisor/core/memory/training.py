"""Per-GPU memory of a training step: model states, LoRA/QLoRA, activations, offload, overhead.

Composes the term modules for one pipeline stage; :func:`training_breakdown` evaluates every
stage and reports the most loaded GPU (DESIGN: "the requirement per GPU (most loaded GPU)").
It does so in two phases, so that a search over many plans can share the first:

1. :func:`stage_states` -- per stage, the model states, activations and overhead of one GPU
   before ZeRO and data parallelism divide them (:class:`StageStates`). They depend on TP, PP,
   EP, sequence parallelism and the stage, and on DP only through the micro-batches in flight
   (:func:`stage_key`): plans that differ only in DP or sharding share them.
2. :func:`heaviest_stage` -- ZeRO sharding over DP (routed experts over DP / EP) and its
   gathered unit, the offload accounting per node, the totals and the breakdown of the most
   loaded stage.

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
from functools import cached_property

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
    OffloadHost,
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
    workload: TrainingWorkload, shard: ShardParams, state_bytes: int, params: _Split
) -> _Split:
    """Optimizer state of the full model's parameters on this GPU (unsharded); ``params``:
    the shard's elements, routed experts apart."""
    opt = workload.optimizer
    match opt:
        case "adafactor":
            elements = params.dense + params.routed
            routed_share = params.routed / elements if elements else 0.0
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
            return _Split(dense=int(params.dense * per), routed=int(params.routed * per))


def _micro_batches_per_step(workload: TrainingWorkload, plan: ParallelPlan) -> int:
    """The most micro-batches a stage holds in flight: PP under 1F1B (the first stage), fewer
    when a step has fewer micro-batches (global batch / (micro-batch x DP), at least 1); 1
    without pipeline parallelism. The only input of a stage's activations that depends on DP."""
    pp = plan.pipeline_parallel
    if pp == 1 or workload.global_batch_size is None:
        return pp
    step = workload.global_batch_size // (workload.micro_batch_size * plan.data_parallel)
    return min(pp, max(1, step))


def _micro_batches_in_flight(pipeline_parallel: int, stage: int, per_step: int) -> int:
    """1F1B: stage s holds up to PP - s micro-batches (Narayanan et al. 2021, section 2.2.1),
    never more than the ``per_step`` micro-batches of a step (:func:`_micro_batches_per_step`)."""
    return max(1, min(pipeline_parallel - stage, per_step))


class StageStates(Struct, frozen=True, kw_only=True, dict=True):
    """What one GPU of one pipeline stage holds before ZeRO and data parallelism divide it:
    phase one of :func:`training_breakdown` (:func:`stage_states`). Sizes in bytes, of one GPU
    (one TP rank, one EP rank), unsharded; :func:`heaviest_stage` shards them.

    Attributes:
        stage: pipeline stage index (0-based).
        shard: parameter elements on this GPU (:func:`.layout.shard_params`); ZeRO-3 gathers
            its largest module, FSDP one block of it.
        unit_weight_bytes: bytes per parameter of a gathered unit's weights.
        unit_gradient_bytes: bytes per parameter of a gathered unit's gradients: the compute
            dtype's in a full fine-tune, 0 for a frozen base.
        weights: the weights that train (all of them in a full fine-tune, the adapters under
            LoRA/QLoRA); sharded from ZeRO-3.
        frozen_weights: a LoRA/QLoRA frozen base (0 in a full fine-tune); sharded from ZeRO-3.
        gradients: gradients of the trainable weights; sharded from ZeRO-2.
        master: fp32 master weights; sharded from ZeRO-1.
        optimizer: optimizer state; sharded from ZeRO-1.
        offloaded_gradients: fp32 gradients of the trainable weights (4 B each) that offload
            keeps on the host; sharded from ZeRO-1.
        trainable_parameters: trainable elements on this GPU (DeepSpeed's fp32 loading peak).
        activations_bytes: activation peak (:attr:`.StageActivations.peak`).
        overhead_bytes: CUDA context + fragmentation (it scales with the activations only).
        state_details: the breakdown's first ``details`` (stage, parameters, embedding or
            adapter and frozen-base bytes); the sharded ones follow them.
        activation_details: the last ``details`` (activations, overhead).

    What every plan of the stage's shape derives alike -- the gathered units, the
    ``details`` templates -- is computed on first use and kept with the stage (phase two
    runs once per plan, and phase one drops the covered stages before they are used).
    """

    stage: int
    shard: ShardParams
    unit_weight_bytes: int
    unit_gradient_bytes: int
    weights: _Split
    frozen_weights: _Split
    gradients: _Split
    master: _Split
    optimizer: _Split
    offloaded_gradients: _Split
    trainable_parameters: int
    activations_bytes: int
    overhead_bytes: int
    state_details: dict[str, int]
    activation_details: dict[str, int]

    @cached_property
    def routed_experts(self) -> bool:
        """Whether any state has a routed-expert part (sharded over DP / EP)."""
        return any(
            split.routed
            for split in (
                self.weights,
                self.frozen_weights,
                self.gradients,
                self.master,
                self.optimizer,
            )
        )

    @cached_property
    def module_gathered(self) -> tuple[int, int]:
        """ZeRO-3's gathered unit, the largest module: (weights, gradients) bytes."""
        return _gathered(self, "module")

    @cached_property
    def block_gathered(self) -> tuple[int, int]:
        """FSDP's gathered unit, one block (and the next one's weights, prefetched)."""
        return _gathered(self, "block")

    @cached_property
    def details(self) -> dict[str, int]:
        """The breakdown's ``details`` without ZeRO-3 or offload, the sharded terms at 0
        (:func:`_details_template`): a plan's breakdown copies it and fills them in."""
        return _details_template(
            self.state_details, self.activation_details, gathered=False, offload=False
        )

    @cached_property
    def gathered_details(self) -> dict[str, int]:
        """:attr:`details` with ZeRO-3's gathered unit."""
        return _details_template(
            self.state_details, self.activation_details, gathered=True, offload=False
        )

    def covers(self, other: StageStates) -> bool:
        """Whether this stage's total is at least ``other``'s under every sharding, DP, EP and
        offload: each state is at least as large in both parts, so are the gathered units (a
        block, the largest module) and the activations plus overhead. Every term of
        :func:`_on_gpu`'s total is non-decreasing in these (``ceil(x / dp)`` is)."""
        for mine, theirs in (
            (self.weights, other.weights),
            (self.frozen_weights, other.frozen_weights),
            (self.gradients, other.gradients),
            (self.master, other.master),
            (self.optimizer, other.optimizer),
        ):
            if mine.dense < theirs.dense or mine.routed < theirs.routed:
                return False
        return (
            self.shard.block_params >= other.shard.block_params
            and self.shard.largest_module >= other.shard.largest_module
            and self.activations_bytes + self.overhead_bytes
            >= other.activations_bytes + other.overhead_bytes
        )


DEFAULT_GPUS_PER_NODE = 8
"""GPUs per node of offload's host accounting when the caller does not say: min(8, the plan's
GPUs)."""

StageKey = tuple[int, int, int, bool, int]
"""(TP, PP, EP, sequence parallel, micro-batches per step)."""


def stage_key(workload: TrainingWorkload, plan: ParallelPlan) -> StageKey:
    """Everything of ``plan`` that :func:`stage_states` reads: plans of one workload with one
    key (they differ at most in data parallelism and sharding) have the same stage states, so
    an estimator over many plans computes them once per key.

    DP enters phase one through the micro-batches of a step alone
    (:func:`_micro_batches_per_step`, with ``global_batch_size`` and PP > 1); everything else
    that depends on DP -- ZeRO sharding and its gathered unit, the expert-data-parallel group,
    offload per node -- is :func:`heaviest_stage`'s, and so is the sharding itself.
    """
    return (
        plan.tensor_parallel,
        plan.pipeline_parallel,
        plan.expert_parallel,
        plan.sequence_parallel,
        _micro_batches_per_step(workload, plan),
    )


class _ShapeInputs(Struct, frozen=True, kw_only=True):
    """What every stage of a plan shape reads but its micro-batches: the workload's bytes per
    parameter, the activation inputs and the stack. Depends on the plan through TP, sequence
    parallel and the kernel profile alone (:data:`ShapeInputsKey`)."""

    adapters: AdapterCounts | None
    setup: ActivationSetup
    inventories: Mapping[LayerKind, LayerActivations]
    total_layers: int
    weight_bytes: int
    gradient_bytes: int
    master_bytes: int
    state_bytes: int


ShapeInputsKey = tuple[int, bool, bool, Kernels | None]
"""(TP, sequence parallel, fused kernels (TP or PP above 1), kernel override): what of a plan
and of :func:`stage_states`' arguments its shape's activation inputs read."""

ShapeInputsMemo = dict[ShapeInputsKey, _ShapeInputs]
"""A search's activation inputs, remembered per :data:`ShapeInputsKey` (of one architecture
and workload: :func:`stage_states`' ``inputs_memo``)."""


def sharded_over_dp(workload: TrainingWorkload, plan: ParallelPlan) -> bool:
    """Whether :func:`heaviest_stage` reads ``plan``'s data parallelism: its effective sharding
    divides states over DP (and routed experts over DP / EP), or offload counts the plan's GPUs
    per node. Where it does not, plans of one :func:`stage_key` have one breakdown (for one
    capacity): phase two then reads nothing of the plan but the sharding ``none``."""
    return workload.cpu_offload_optimizer or effective_sharding(workload, plan) != "none"


def _shape_inputs(
    arch: Architecture,
    workload: TrainingWorkload,
    plan: ParallelPlan,
    *,
    kernels: Kernels | None,
    parts: Parts,
) -> _ShapeInputs:
    adapters = parts.adapters(arch, workload) if workload.method in ("lora", "qlora") else None
    chosen = kernels or activation_kernels(arch, plan)
    setup = _activation_setup(arch, workload, plan, adapters, chosen)
    prec = workload.precision
    grad_dtype = workload.gradient_dtype or default_gradient_dtype(prec)
    return _ShapeInputs(
        adapters=adapters,
        setup=setup,
        # every stage's layers are of these kinds; their inventories do not depend on the stage
        inventories=parts.inventories(arch, setup),
        total_layers=total_stack_layers(arch),
        weight_bytes=weight_bytes_per_parameter(prec),
        gradient_bytes=gradient_bytes_per_parameter(
            prec, grad_dtype, fp32_gradient_copy=workload.fp32_gradient_copy
        ),
        master_bytes=master_weight_bytes_per_parameter(prec, workload.master_weights_fp32),
        state_bytes=optimizer_state_dtype_bytes(prec),
    )


def _stage_states(
    arch: Architecture,
    workload: TrainingWorkload,
    plan: ParallelPlan,
    stage: int,
    inputs: _ShapeInputs,
    per_step: int,
    overhead: OverheadModel,
    parts: Parts,
) -> StageStates:
    """One stage's :class:`StageStates` (reads of ``plan`` only what :func:`stage_key` keys)."""
    shard = parts.shard(arch, plan, stage)
    wb = inputs.weight_bytes
    adapters = inputs.adapters
    elements = shard.total
    routed_elements = shard.routed
    details: dict[str, int] = {"pipeline_stage": stage, "parameters_on_gpu": elements}

    if workload.method == "full" or adapters is None:
        params = _Split(dense=elements - routed_elements, routed=routed_elements)
        weights = _Split(dense=params.dense * wb, routed=params.routed * wb)
        gb = inputs.gradient_bytes
        grads = _Split(dense=params.dense * gb, routed=params.routed * gb)
        mb = inputs.master_bytes
        master = _Split(dense=params.dense * mb, routed=params.routed * mb)
        opt = _optimizer_bytes(workload, shard, inputs.state_bytes, params)
        trainable_params = params
        frozen_weights = _Split(dense=0)
        details["weights.embedding_bytes"] = (shard.embedding + shard.lm_head) * wb
    else:
        total_layers = inputs.total_layers
        frozen_weights = _base_weights(arch, workload, shard)
        layer_share = shard.layers / total_layers if total_layers else 1.0
        tp = plan.tensor_parallel
        a_dense = -(-int(adapters.dense * layer_share) // tp)
        a_routed = -(-int(adapters.routed * layer_share) // (tp * plan.expert_parallel))
        if stage == plan.pipeline_parallel - 1:
            a_dense += -(-adapters.head // tp)
        ab = 2 if workload.precision == "bf16" else 4
        trainable_params = _Split(dense=a_dense, routed=a_routed)
        weights = _Split(dense=a_dense * ab, routed=a_routed * ab)
        grads = _Split(dense=a_dense * ab, routed=a_routed * ab)
        master = _Split(dense=0)
        if workload.optimizer == "adafactor":
            # adapters are matrices: A (r x d_in) and B (d_out x r) factor into r + d rows/cols;
            # their factored state is below 1 % of the adapter count and is bounded by it here.
            per = 4.0 * 2 * workload.lora_rank / max(1, workload.lora_rank + arch.hidden_size)
        else:
            per = optimizer_state_bytes_per_parameter(workload.optimizer, inputs.state_bytes)
        opt = _Split(dense=int(a_dense * per), routed=int(a_routed * per))
        details["lora.adapter_parameters"] = a_dense + a_routed
        details["lora.adapter_weights_bytes"] = (a_dense + a_routed) * ab
        details["weights.frozen_base_bytes"] = frozen_weights.dense + frozen_weights.routed

    acts = _activations(arch, workload, plan, stage, inputs, per_step, parts)
    peak = acts.peak
    context, fragmentation = runtime_overhead_bytes(peak, overhead)
    activation_details = {
        "activations.saved_bytes": acts.saved,
        "activations.logits_buffer_bytes": acts.loss_saved + acts.logits_transient,
        "activations.recompute_working_set_bytes": acts.recompute_working_set,
        "activations.micro_batches_in_flight": acts.micro_batches_in_flight,
        "overhead.cuda_context_bytes": context,
        "overhead.fragmentation_bytes": fragmentation,
    }
    # the gathered unit's gradients are produced in the compute dtype before they are
    # reduce-scattered into the (possibly fp32) partition; a frozen base has none
    unit_gb = wb if workload.method == "full" else 0
    return StageStates(
        stage=stage,
        shard=shard,
        unit_weight_bytes=wb,
        unit_gradient_bytes=unit_gb,
        weights=weights,
        frozen_weights=frozen_weights,
        gradients=grads,
        master=master,
        optimizer=opt,
        offloaded_gradients=_Split(
            dense=trainable_params.dense * 4, routed=trainable_params.routed * 4
        ),
        trainable_parameters=trainable_params.dense + trainable_params.routed,
        activations_bytes=peak,
        overhead_bytes=context + fragmentation,
        state_details=details,
        activation_details=activation_details,
    )


def _gathered(states: StageStates, unit: GatherUnit) -> tuple[int, int]:
    """(weights, gradients) bytes of a stage's gathered unit
    (:func:`.model_states.zero3_gathered_bytes`): its parameters' gradients, the rest weights."""
    shard = states.shard
    params = shard.block_params if unit == "block" else shard.largest_module
    both = zero3_gathered_bytes(
        params,
        weight_bytes=states.unit_weight_bytes,
        gradient_bytes=states.unit_gradient_bytes,
        unit=unit,
    )
    gradients = params * states.unit_gradient_bytes
    return both - gradients, gradients


_GATHERED_DETAILS = dict.fromkeys(
    ("weights.zero3_gathered_bytes", "gradients.zero3_gathered_bytes"), 0
)
_HOST_DETAILS = dict.fromkeys(
    ("host.offloaded_states_bytes", "host.loading_peak_bytes", "gradients.offloaded_bytes"), 0
)
_OPTIMIZER_DETAILS = dict.fromkeys(("optimizer.master_weights_bytes", "optimizer.state_bytes"), 0)


def _details_template(
    state_details: dict[str, int],
    activation_details: dict[str, int],
    *,
    gathered: bool,
    offload: bool,
) -> dict[str, int]:
    """A breakdown's ``details`` in the order of the terms, the sharded ones at 0: the stage's
    parameters, ZeRO-3's gathered unit, offload's host bytes, master weights and optimizer
    state, then activations and overhead."""
    return {
        **state_details,
        **(_GATHERED_DETAILS if gathered else {}),
        **(_HOST_DETAILS if offload else {}),
        **_OPTIMIZER_DETAILS,
        **activation_details,
    }


class _OnGpu(Struct, frozen=True, kw_only=True):
    """A stage's states sharded over DP: bytes on its GPU (and per node on the host)."""

    weights: int
    gradients: int
    master: int
    optimizer: int
    gathered: tuple[int, int] | None
    host: OffloadHost | None
    gradients_offloaded: int
    total: int


def _on_gpu(
    states: StageStates, sharding: Sharding, offload: bool, dp: int, edp: int, gpus_per_node: int
) -> _OnGpu:
    """ZeRO stage z shards optimizer state and master weights over ``dp`` (routed experts over
    ``edp`` = DP / EP) from z = 1, gradients from 2, weights from 3, which then gathers a unit
    at a time (:func:`.model_states.zero3_gathered_bytes`); ``offload`` moves master, optimizer
    and fp32 gradients to the host (:func:`.model_states.offload_host_bytes`).

    A state's bytes per GPU are :meth:`_Split.per_gpu`'s, written out here: this runs once per
    plan of a search, and the calls cost more than the arithmetic."""
    z = ZERO_STAGE[sharding]
    m, o, g = states.master, states.optimizer, states.gradients
    w, f = states.weights, states.frozen_weights
    gathered: tuple[int, int] | None = None
    gathered_grads = 0
    if not states.routed_experts:  # every routed part is 0 and shards to 0
        master = -(-m.dense // dp) if z >= 1 else m.dense
        opt = -(-o.dense // dp) if z >= 1 else o.dense
        grads = -(-g.dense // dp) if z >= 2 else g.dense
        weights = -(-w.dense // dp) - (-f.dense // dp) if z >= 3 else w.dense + f.dense
    elif z >= 1:
        master = -(-m.dense // dp) - (-m.routed // edp)
        opt = -(-o.dense // dp) - (-o.routed // edp)
        grads = -(-g.dense // dp) - (-g.routed // edp) if z >= 2 else g.dense + g.routed
        weights = (
            -(-w.dense // dp) - (-w.routed // edp) - (-f.dense // dp) - (-f.routed // edp)
            if z >= 3
            else w.dense + w.routed + f.dense + f.routed
        )
    else:
        master = m.dense + m.routed
        opt = o.dense + o.routed
        grads = g.dense + g.routed
        weights = w.dense + w.routed + f.dense + f.routed
    if z >= 3:
        # FSDP gathers a block, ZeRO-3 a module
        gathered = states.block_gathered if sharding == "fsdp" else states.module_gathered
        weights += gathered[0]
        gathered_grads = gathered[1]
        grads += gathered_grads
    host = None
    offloaded = 0
    if offload:
        fp32_grads = states.offloaded_gradients.per_gpu(sharded=z >= 1, dp=dp, edp=edp)
        host = offload_host_bytes(
            master + opt + fp32_grads,
            shard_params_per_gpu=states.trainable_parameters,
            gpus_per_node=gpus_per_node,
            zero_init=z >= 3,
        )
        offloaded = grads - gathered_grads
        grads = gathered_grads
        master = opt = 0
    return _OnGpu(
        weights=weights,
        gradients=grads,
        master=master,
        optimizer=opt,
        gathered=gathered,
        host=host,
        gradients_offloaded=offloaded,
        total=weights + grads + master + opt + states.activations_bytes + states.overhead_bytes,
    )


def _breakdown(states: StageStates, on_gpu: _OnGpu, capacity_bytes: int | None) -> MemoryBreakdown:
    """The breakdown of one stage (``details`` in the order of the terms)."""
    gathered, host = on_gpu.gathered, on_gpu.host
    if host is not None:
        details = _details_template(
            states.state_details,
            states.activation_details,
            gathered=gathered is not None,
            offload=True,
        )
        details["host.offloaded_states_bytes"] = host.steady_bytes
        details["host.loading_peak_bytes"] = host.loading_peak_bytes
        details["gradients.offloaded_bytes"] = on_gpu.gradients_offloaded
    else:  # the stage's template, copied: each plan fills in its own numbers
        details = (states.details if gathered is None else states.gathered_details).copy()
    if gathered is not None:
        details["weights.zero3_gathered_bytes"] = gathered[0]
        details["gradients.zero3_gathered_bytes"] = gathered[1]
    details["optimizer.master_weights_bytes"] = on_gpu.master
    details["optimizer.state_bytes"] = on_gpu.optimizer
    total = on_gpu.total
    return MemoryBreakdown(
        weights_bytes=on_gpu.weights,
        gradients_bytes=on_gpu.gradients,
        optimizer_bytes=on_gpu.master + on_gpu.optimizer,
        activations_bytes=states.activations_bytes,
        kv_cache_bytes=0,
        overhead_bytes=states.overhead_bytes,
        total_bytes=total,
        capacity_bytes=capacity_bytes or 0,
        headroom_fraction=(1 - total / capacity_bytes) if capacity_bytes else None,
        host_bytes=host.total_bytes if host is not None else 0,
        details=details,
    )


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
    inputs: _ShapeInputs,
    per_step: int,
    parts: Parts,
) -> StageActivations:
    pp = plan.pipeline_parallel
    here = stage_range(inputs.total_layers, pp, stage)
    return stage_activations(
        arch,
        inputs.setup,
        layers=parts.kinds(arch, here, workload.sequence_length),
        first_stage=stage == 0,
        last_stage=stage == pp - 1,
        micro_batches_in_flight=_micro_batches_in_flight(pp, stage, per_step),
        inventories=inputs.inventories,
    )


def stage_states(
    arch: Architecture,
    workload: TrainingWorkload,
    plan: ParallelPlan,
    *,
    overhead: OverheadModel,
    kernels: Kernels | None = None,
    parts: Parts = FRESH,
    inputs_memo: ShapeInputsMemo | None = None,
) -> tuple[StageStates, ...]:
    """Phase one of :func:`training_breakdown`: the states of every stage that can be the most
    loaded one, before ZeRO and data parallelism divide them: of the candidate stages
    (:meth:`.parts.Parts.stages`), those that no earlier stage covers (:meth:`StageStates.covers`).

    Reads of ``plan`` only what :func:`stage_key` keys, so it can be remembered per key.
    ``parts`` computes (or remembers, :class:`.parts.RememberedParts`) the shape-only parts;
    ``inputs_memo``, where given, remembers the activation inputs of a search's shapes (one
    architecture and workload) per TP, sequence parallel and kernel profile.

    Raises:
        InvalidSpecError: an unknown LoRA target (``workload.lora_targets.N``).
    """
    tp, pp = plan.tensor_parallel, plan.pipeline_parallel
    if inputs_memo is None:
        inputs = _shape_inputs(arch, workload, plan, kernels=kernels, parts=parts)
    else:
        key = (tp, plan.sequence_parallel, tp > 1 or pp > 1, kernels)  # ShapeInputsKey
        found = inputs_memo.get(key)
        if found is None:
            found = inputs_memo[key] = _shape_inputs(
                arch, workload, plan, kernels=kernels, parts=parts
            )
        inputs = found
    per_step = _micro_batches_per_step(workload, plan)
    stages = (
        parts.stages(arch, plan.pipeline_parallel)
        if overhead.fragmentation_fraction >= 0  # more activations never mean less overhead
        else range(plan.pipeline_parallel)
    )
    kept: list[StageStates] = []
    for stage in stages:
        states = _stage_states(arch, workload, plan, stage, inputs, per_step, overhead, parts)
        # a stage that an earlier one covers is never the heaviest (the first of equal totals
        # is); on a uniform dense stack stage 0 usually covers the others but the last
        for earlier in kept:
            if earlier.covers(states):
                break
        else:
            kept.append(states)
    return tuple(kept)


def heaviest_stage(
    workload: TrainingWorkload,
    plan: ParallelPlan,
    stages: tuple[StageStates, ...],
    *,
    capacity_bytes: int | None,
    gpus_per_node: int | None = None,
) -> MemoryBreakdown:
    """Phase two of :func:`training_breakdown`: shard each stage's states with the plan's
    effective sharding over its data parallelism (:func:`_on_gpu`) and report the stage with
    the largest total (the first of equal totals).

    Args:
        workload: the training workload (its sharding when the plan has none, offload).
        plan: the plan; its sharding, DP and EP give the ZeRO and expert-data-parallel groups.
        stages: :func:`stage_states` of ``workload`` and ``plan`` (or of a plan with the same
            :func:`stage_key`).
        capacity_bytes: fills ``capacity_bytes`` and ``headroom_fraction``.
        gpus_per_node: GPUs whose offloaded states one node's host holds; default
            min(:data:`DEFAULT_GPUS_PER_NODE`, GPUs of the plan). Read only with offload.
    """
    sharding = effective_sharding(workload, plan)
    offload = workload.cpu_offload_optimizer
    # GPUs per node matter only where offload puts states on the host
    per_node = (gpus_per_node or min(DEFAULT_GPUS_PER_NODE, plan.gpus)) if offload else 0
    dp = plan.data_parallel
    edp = dp // plan.expert_parallel or 1  # EP divides DP (validated); at least 1 rank
    if not stages:  # pipeline_parallel >= 1 is validated before
        raise ValueError("pipeline_parallel must be at least 1")
    best = stages[0]
    best_on_gpu = _on_gpu(best, sharding, offload, dp, edp, per_node)
    for states in stages[1:]:
        on_gpu = _on_gpu(states, sharding, offload, dp, edp, per_node)
        if on_gpu.total > best_on_gpu.total:
            best, best_on_gpu = states, on_gpu
    return _breakdown(best, best_on_gpu, capacity_bytes)


def training_breakdown(
    arch: Architecture,
    workload: TrainingWorkload,
    plan: ParallelPlan,
    *,
    capacity_bytes: int | None,
    gpus_per_node: int | None = None,
    overhead: OverheadModel,
    kernels: Kernels | None = None,
    parts: Parts = FRESH,
) -> MemoryBreakdown:
    """The requirement of the most loaded GPU of a training plan (see module docstring), in
    two phases: the stages' states (:func:`stage_states`, independent of DP but for the
    micro-batches in flight), then their sharding over DP (:func:`heaviest_stage`).

    ``parts`` computes (or remembers, :class:`.parts.RememberedParts`) the shape-only parts.
    """
    stages = stage_states(arch, workload, plan, overhead=overhead, kernels=kernels, parts=parts)
    return heaviest_stage(
        workload, plan, stages, capacity_bytes=capacity_bytes, gpus_per_node=gpus_per_node
    )
