"""Training model states: weights, master weights, gradients, optimizer state, ZeRO and offload.

Mixed precision is spelled out term by term (DESIGN "Training model states"): a 16-bit compute
copy of the weights (2 B), an fp32 master copy (4 B), gradients in a configurable dtype, an optional
fp32 gradient copy, and the optimizer's state. With AdamW this is

* the ZeRO paper's 2 + 2 + 12 = 16 bytes per parameter (16-bit weights and gradients; fp32 master,
  momentum and variance: Rajbhandari et al. 2019, arXiv 1910.02054, section 3.1), our default;
* Hugging Face's 18 bytes (6 weights + 4 fp32 gradients + 8 optimizer, transformers docs "Model
  training anatomy"): ``gradient_dtype="fp32"``;
* DeepSpeed's 20 bytes for ZeRO-1/2 (2 + 18: 16-bit and fp32 gradients,
  ``deepspeed/runtime/zero/stage_1_and_2.py`` ``estimate_zero2_model_states_mem_needs``):
  ``fp32_gradient_copy=True``.

ZeRO (Rajbhandari et al., section 5): stage 1 shards optimizer state and master weights over data
parallel, stage 2 also gradients, stage 3 (= FSDP full shard) also the weights. Routed experts are
sharded over the expert-data-parallel group DP / EP (Megatron-Core ``expert_data_parallel``), which
gives the same per-GPU bytes since the experts were already split EP ways.
"""

from __future__ import annotations

from typing import Literal

from msgspec import Struct

from gpu_advisor.core.spec import GradientDtype, Optimizer, Precision, Sharding

ZERO_STAGE: dict[Sharding, int] = {"none": 0, "zero1": 1, "zero2": 2, "zero3": 3, "fsdp": 3}
"""ZeRO stage of each sharding name; FSDP full shard shards like stage 3."""

EIGHT_BIT_BLOCK_SIZE = 2048
"""Block size of the block-wise 8-bit optimizer states (Dettmers et al. 2021, "8-bit Optimizers
via Block-wise Quantization", arXiv 2110.02861, section 2: blocks of 2048 with an fp32 absmax)."""

EIGHT_BIT_MIN_SIZE = 4096
"""bitsandbytes keeps 32-bit state for tensors with fewer elements than this
(``Optimizer8bit`` ``min_8bit_size=4096``): in practice the vectors (biases, norms)."""

OFFLOAD_BUFFER_FACTOR = 1.5
"""DeepSpeed's ``additional_buffer_factor`` for host memory of offloaded states
(``estimate_zero2/zero3_model_states_mem_needs``)."""


def weight_bytes_per_parameter(precision: Precision) -> int:
    """Bytes of the weights the forward pass reads: 4 in fp32, else a 2-byte 16-bit copy."""
    return 4 if precision == "fp32" else 2


def master_weight_bytes_per_parameter(precision: Precision, master_weights_fp32: bool) -> int:
    """fp32 master copy kept by mixed-precision optimizers (Micikevicius et al. 2018, "Mixed
    Precision Training", section 3.1): 4 bytes with ``*-mixed`` precision and master weights on,
    else 0 (fp32 training's weights are the master; pure bf16 keeps none)."""
    mixed = precision in ("bf16-mixed", "fp16-mixed")
    return 4 if mixed and master_weights_fp32 else 0


def default_gradient_dtype(precision: Precision) -> GradientDtype:
    """Gradients default to the compute dtype: fp32 for fp32 training, else bf16/fp16."""
    if precision == "fp32":
        return "fp32"
    return "fp16" if precision == "fp16-mixed" else "bf16"


def gradient_bytes_per_parameter(
    precision: Precision, gradient_dtype: GradientDtype | None, *, fp32_gradient_copy: bool = False
) -> int:
    """Gradient bytes per trainable parameter.

    Args:
        precision: training precision.
        gradient_dtype: dtype gradients are produced/accumulated in (None: the compute dtype).
        fp32_gradient_copy: also keep an fp32 copy for the optimizer step (DeepSpeed ZeRO-1/2:
            "2_grads_16bit + 4_grads_32bit" in ``estimate_zero2_model_states_mem_needs``).
    """
    dtype = gradient_dtype or default_gradient_dtype(precision)
    base = 4 if dtype == "fp32" else 2
    return base + (4 if fp32_gradient_copy and base != 4 else 0)


def optimizer_state_dtype_bytes(precision: Precision) -> int:
    """Bytes per optimizer-state element: fp32 unless training is pure bf16, where PyTorch
    optimizers allocate state like the parameter (``torch.zeros_like(p)``) in bf16."""
    return 2 if precision == "bf16" else 4


def optimizer_state_bytes_per_parameter(optimizer: Optimizer, state_bytes: int = 4) -> float:
    """Optimizer state per parameter for optimizers whose state is per element.

    * AdamW: momentum + variance = 2 x state dtype (8 B in fp32; Loshchilov & Hutter 2019).
    * 8-bit AdamW: 2 x 1 B + two fp32 absmax per 2048-element block (Dettmers et al. 2021).
    * SGD with momentum: 1 x state dtype. Lion: 1 x state dtype (momentum only; Chen et al.
      2023, "Symbolic Discovery of Optimization Algorithms", Algorithm 2).
    * Adafactor: factored, not per element; see :func:`adafactor_state_elements`.
    """
    match optimizer:
        case "adamw":
            return 2.0 * state_bytes
        case "adamw-8bit":
            return 2.0 + 2 * 4 / EIGHT_BIT_BLOCK_SIZE
        case "sgd" | "lion":
            return float(state_bytes)
        case "adafactor":
            return 0.0


def adafactor_state_elements(factored_elements: int, vector_elements: int) -> int:
    """Adafactor's second-moment elements: one row and one column vector per matrix
    (``factored_elements`` = sum of rows + cols) plus a full accumulator per vector parameter;
    no first moment (beta1 = None, the default of Shazeer & Stern 2018, arXiv 1804.04235,
    sections 3-4, and of ``transformers.optimization.Adafactor``). States are fp32."""
    return factored_elements + vector_elements


def model_state_bytes_per_parameter(
    *,
    precision: Precision,
    master_weights_fp32: bool,
    gradient_dtype: GradientDtype | None,
    optimizer: Optimizer,
    fp32_gradient_copy: bool = False,
) -> float:
    """Bytes per parameter of weights + master + gradients + optimizer, unsharded.

    Example: bf16-mixed, fp32 master, bf16 gradients, AdamW = 2 + 4 + 2 + 8 = 16 (ZeRO paper
    section 3.1); with fp32 gradients 2 + 4 + 4 + 8 = 18 (transformers docs). Adafactor's
    factored state is not per parameter and counts 0 here.
    """
    return (
        weight_bytes_per_parameter(precision)
        + master_weight_bytes_per_parameter(precision, master_weights_fp32)
        + gradient_bytes_per_parameter(
            precision, gradient_dtype, fp32_gradient_copy=fp32_gradient_copy
        )
        + optimizer_state_bytes_per_parameter(optimizer, optimizer_state_dtype_bytes(precision))
    )


def zero_shard(bytes_: int, *, stage: int, applies_from_stage: int, dp: int) -> int:
    """Per-GPU bytes of a state that ZeRO shards from ``applies_from_stage`` on over ``dp`` ranks.

    Optimizer state and master weights shard from stage 1, gradients from stage 2, weights from
    stage 3 (Rajbhandari et al. 2019, section 5.1-5.3): per GPU = bytes / dp, rounded up.
    """
    if stage >= applies_from_stage and dp > 1:
        return -(-bytes_ // dp)
    return bytes_


GatherUnit = Literal["module", "block"]


def zero3_gathered_bytes(
    unit_params: int, *, weight_bytes: int, gradient_bytes: int, unit: GatherUnit
) -> int:
    """Working set of ZeRO-3 / FSDP: parameters gathered for compute, and their unsharded grads.

    * DeepSpeed ZeRO-3 gathers module by module; its estimator charges
      ``largest_layer_memory = 4 * largest_layer_params`` (16-bit params + 16-bit grads of the
      largest module; ``deepspeed/runtime/zero/stage3.py``
      ``estimate_zero3_model_states_mem_needs``): ``unit="module"``.
    * PyTorch FSDP gathers one wrapped unit (a transformer block under the usual auto-wrap
      policy) and prefetches the next (``BackwardPrefetch.BACKWARD_PRE``, the default):
      two blocks of parameters plus one block of unsharded gradients: ``unit="block"``.
    """
    if unit == "module":
        return unit_params * (weight_bytes + gradient_bytes)
    return unit_params * (2 * weight_bytes + gradient_bytes)


class OffloadHost(Struct, frozen=True, kw_only=True):
    """Host (CPU) memory per node for optimizer offload, in bytes, and its parts."""

    steady_bytes: int
    loading_peak_bytes: int
    total_bytes: int


def offload_host_bytes(
    offloaded_bytes_per_gpu: int,
    *,
    shard_params_per_gpu: int,
    gpus_per_node: int,
    zero_init: bool,
    buffer_factor: float = OFFLOAD_BUFFER_FACTOR,
) -> OffloadHost:
    """Host memory per node when optimizer state, master weights and gradients live on the CPU.

    DeepSpeed's estimator conventions (``estimate_zero2_model_states_mem_needs``,
    ``estimate_zero3_model_states_mem_needs``): the node holds the partitions of its GPUs
    (``gpus_per_node x offloaded_bytes_per_gpu``; 16 B/param for AdamW = 4 master + 4 fp32
    gradients + 8 moments); without ``zero.Init`` (ZeRO-1/2) every rank first materialises its
    model shard in fp32 on the host (``4 * num_gpus_per_node`` bytes per parameter) and the larger
    of the two counts; everything times ``additional_buffer_factor`` 1.5.
    """
    steady = gpus_per_node * offloaded_bytes_per_gpu
    loading = 0 if zero_init else gpus_per_node * 4 * shard_params_per_gpu
    return OffloadHost(
        steady_bytes=steady,
        loading_peak_bytes=loading,
        total_bytes=int(max(steady, loading) * buffer_factor),
    )
