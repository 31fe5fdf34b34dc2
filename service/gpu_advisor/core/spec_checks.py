"""Contradictions between the fields of a workload, rejected before planning (422 naming the
field): each field is valid alone (its ``Meta`` bounds hold) but together they describe
nothing that can run.

Serving (``InferenceWorkload``): ``context_length`` is the engine's ``max_model_len``, the
prompt AND the generated tokens of one sequence. vLLM's OpenAI server rejects a request whose
prompt plus ``max_tokens`` exceeds it ("This model's maximum context length is N tokens.
However, you requested M tokens (P in the messages, O in the completion)",
``vllm/entrypoints/openai/serving_engine.py`` ``_validate_input``), so:

* ``prompt_tokens`` must be at most ``context_length``;
* ``prompt_tokens + output_tokens`` must be at most ``context_length``;
* without ``prompt_tokens`` the prompt is ``context_length - output_tokens``, which needs at
  least one token: ``output_tokens < context_length``.

An encoder-only model (BERT) generates nothing: only the first rule applies to it.

Training (``TrainingWorkload``):

* ``global_batch_size`` = ``micro_batch_size`` x gradient-accumulation steps x data-parallel
  ranks (DeepSpeed's ``train_batch_size`` identity, checked at start-up in
  ``deepspeed/runtime/config.py`` ``_batch_assertion``; Megatron-LM asserts
  ``global_batch_size % (micro_batch_size * data_parallel_size) == 0`` in
  ``megatron/core/num_microbatches_calculator.py``), so it is a positive multiple of
  ``micro_batch_size`` (the data-parallel factor depends on the plan: the planner's concern);
* ``tokens`` is at least one optimizer step: ``sequence_length x global_batch_size`` when the
  global batch is given, else ``sequence_length x micro_batch_size`` (the smallest step any
  plan takes: one micro-batch on one data-parallel rank). Trainers count whole steps
  (Megatron-LM's ``train_iters``, HF Trainer's ``max_steps``); a run shorter than one step
  trains nothing and its time and per-token cost would be fractions of a step;
* LoRA/QLoRA (``method`` ``lora``/``qlora``): ``lora_targets`` names at least one module, and
  ``lora_rank`` is at most the narrowest targeted linear's ``min(d_in, d_out)`` -- the update
  ``B A`` of a d_out x d_in weight has rank at most ``min(d_in, d_out)`` (Hu et al. 2021,
  arXiv 2106.09685, section 4.1: r << min(d, k)), so a larger rank only adds parameters.
"""

from __future__ import annotations

from gpu_advisor.core.architecture import Architecture
from gpu_advisor.core.errors import InvalidSpecError
from gpu_advisor.core.memory.lora import resolve_targets
from gpu_advisor.core.spec import InferenceWorkload, TrainingWorkload, Workload


def check_workload(arch: Architecture, workload: Workload, field: str = "workload") -> None:
    """Reject contradictory workload fields (see the module docstring for each rule).

    Args:
        arch: the resolved model (the LoRA rank is checked against its linear widths).
        workload: the request's workload.
        field: the workload's path in the request (error fields are ``<field>.<name>``).

    Raises:
        InvalidSpecError: naming the field to change, with the numbers.
    """
    match workload:
        case InferenceWorkload():
            _check_inference(workload, field, generates=not arch.encoder_only)
        case TrainingWorkload():
            _check_training(arch, workload, field)


def _check_inference(w: InferenceWorkload, field: str, *, generates: bool) -> None:
    context = w.context_length
    if w.prompt_tokens is not None and w.prompt_tokens > context:
        raise InvalidSpecError(
            f"prompt_tokens {w.prompt_tokens:,} exceeds context_length {context:,} "
            "(the most tokens a sequence holds); lower prompt_tokens or raise "
            "context_length",
            field=f"{field}.prompt_tokens",
        )
    if not generates:
        # an encoder-only model (BERT) reads its input and generates nothing: output_tokens
        # does not apply (the planner reports input tokens encoded per second)
        return
    if w.prompt_tokens is not None and w.prompt_tokens + w.output_tokens > context:
        raise InvalidSpecError(
            f"prompt_tokens {w.prompt_tokens:,} + output_tokens {w.output_tokens:,} = "
            f"{w.prompt_tokens + w.output_tokens:,} exceeds context_length {context:,}: "
            "a sequence holds its prompt and its output; lower output_tokens or raise "
            "context_length",
            field=f"{field}.output_tokens",
        )
    if w.prompt_tokens is None and w.output_tokens >= context:
        raise InvalidSpecError(
            f"output_tokens {w.output_tokens:,} leaves no room for a prompt in context_length "
            f"{context:,} (a sequence holds its prompt and its output); lower output_tokens "
            "below context_length",
            field=f"{field}.output_tokens",
        )


def _check_training(arch: Architecture, w: TrainingWorkload, field: str) -> None:
    micro, global_batch = w.micro_batch_size, w.global_batch_size
    if global_batch is not None and (global_batch < micro or global_batch % micro):
        below = global_batch - global_batch % micro
        options = f"{below:,} or {below + micro:,}" if below >= micro else f"{micro:,}"
        raise InvalidSpecError(
            f"global_batch_size {global_batch:,} is not a multiple of micro_batch_size "
            f"{micro:,} (global = micro x gradient-accumulation steps x data-parallel ranks); "
            f"use {options}, or change micro_batch_size",
            field=f"{field}.global_batch_size",
        )
    step_sequences = global_batch if global_batch is not None else micro
    step_tokens = step_sequences * w.sequence_length
    if w.tokens is not None and w.tokens < step_tokens:
        batch = "global_batch_size" if global_batch is not None else "micro_batch_size"
        raise InvalidSpecError(
            f"tokens {w.tokens:,.0f} is less than one optimizer step: sequence_length "
            f"{w.sequence_length:,} x {batch} {step_sequences:,} = {step_tokens:,} tokens; "
            f"raise tokens to at least {step_tokens:,}, or lower sequence_length or {batch}",
            field=f"{field}.tokens",
        )
    if w.method == "full":
        return
    if not w.lora_targets:
        raise InvalidSpecError(
            'lora_targets is empty: name the modules LoRA adapts, or ["all-linear"]',
            field=f"{field}.lora_targets",
        )
    names, head = resolve_targets(arch, w.lora_targets, field=f"{field}.lora_targets")
    widths = [(min(m.in_features, m.out_features), m.name) for m in arch.linears if m.name in names]
    if not arch.linears and names:  # approximate model: h x h and h x ffn linears
        widths.append((min(arch.hidden_size, arch.intermediate_size), "a block linear"))
    if head:
        widths.append((min(arch.hidden_size, arch.vocab_size), "lm_head"))
    if widths:
        width, name = min(widths)
        if w.lora_rank > width:
            raise InvalidSpecError(
                f"lora_rank {w.lora_rank:,} exceeds {width:,}, the narrower side of the "
                f"targeted module {name}: a LoRA update of a d_out x d_in weight has rank at "
                f"most min(d_in, d_out); use lora_rank <= {width:,}",
                field=f"{field}.lora_rank",
            )
