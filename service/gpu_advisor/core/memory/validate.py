"""Plan/model combinations that cannot run, rejected with the field to change.

* Tensor parallel must divide the attention heads (each rank holds whole heads; Megatron-LM
  ``divide(num_attention_heads, world_size)``, vLLM ``ensure_divisibility``).
* KV heads: t must divide them, or they must divide t (replicated heads; vLLM
  ``QKVParallelLinear``: "num_kv_heads % tp_size == 0 or tp_size % num_kv_heads == 0").
* Expert parallel needs an MoE model, must divide the routed experts and must divide data
  parallel (experts are split over ranks carved out of the data-parallel group,
  Megatron-Core ``expert_model_parallel_size``).
* Pipeline parallel cannot exceed the layers (each stage needs at least one layer).
"""

from __future__ import annotations

from gpu_advisor.core.architecture import Architecture
from gpu_advisor.core.errors import InvalidSpecError
from gpu_advisor.core.results import ParallelPlan


def total_stack_layers(arch: Architecture) -> int:
    """Layers pipeline parallel splits (encoder + decoder)."""
    return arch.num_layers + (0 if arch.encoder_only else arch.num_encoder_layers)


def validate_plan(arch: Architecture, plan: ParallelPlan) -> None:
    """Raise :class:`InvalidSpecError` naming the plan field when ``plan`` cannot run ``arch``.

    Raises:
        InvalidSpecError: with ``field`` ``plan.tensor_parallel``, ``plan.expert_parallel``,
            ``plan.pipeline_parallel`` or ``plan.data_parallel``.
    """
    tp, pp, dp, ep = (
        plan.tensor_parallel,
        plan.pipeline_parallel,
        plan.data_parallel,
        plan.expert_parallel,
    )
    for name, value in (
        ("tensor_parallel", tp),
        ("pipeline_parallel", pp),
        ("data_parallel", dp),
        ("expert_parallel", ep),
    ):
        if value < 1:
            raise InvalidSpecError(f"{name} must be at least 1, got {value}", field=f"plan.{name}")
    heads = arch.num_attention_heads
    if heads % tp:
        raise InvalidSpecError(
            f"tensor_parallel {tp} does not divide the {heads} attention heads of {arch.name}; "
            f"use a divisor of {heads}",
            field="plan.tensor_parallel",
        )
    kv = arch.num_kv_heads
    if arch.mla is None and kv % tp and tp % kv:
        raise InvalidSpecError(
            f"tensor_parallel {tp} neither divides the {kv} KV heads of {arch.name} nor is a "
            f"multiple of them (KV heads are split or replicated whole)",
            field="plan.tensor_parallel",
        )
    if ep > 1:
        if not arch.is_moe:
            raise InvalidSpecError(
                f"expert_parallel {ep} needs a mixture-of-experts model; {arch.name} is dense",
                field="plan.expert_parallel",
            )
        if arch.num_experts % ep:
            raise InvalidSpecError(
                f"expert_parallel {ep} does not divide the {arch.num_experts} routed experts of "
                f"{arch.name}",
                field="plan.expert_parallel",
            )
        if dp % ep:
            raise InvalidSpecError(
                f"expert_parallel {ep} must divide data_parallel {dp} (experts are spread over "
                f"data-parallel ranks)",
                field="plan.expert_parallel",
            )
    layers = total_stack_layers(arch)
    if pp > layers:
        raise InvalidSpecError(
            f"pipeline_parallel {pp} exceeds the {layers} layers of {arch.name}",
            field="plan.pipeline_parallel",
        )
