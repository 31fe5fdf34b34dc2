"""Floating-point operation counts of transformer training and inference.

Conventions (PaLM, Chowdhery et al. 2022, Appendix B; Narayanan et al. 2021, section 5.1,
"Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM"):

* a matmul with ``n`` weights costs ``2 n`` FLOPs per token in the forward pass; the backward
  pass costs twice the forward (gradients with respect to activations and to weights), so
  training costs ``6 N`` per token;
* attention scores and the weighted sum cost ``2 s (d_qk + d_v)`` FLOPs per token and layer in
  the forward pass (``4 s h`` for standard heads), ``3x`` that with the backward pass, so the
  per-token attention term is ``12 L s h`` (PaLM: ``12 L H Q T``);
* causal kernels that skip masked blocks (FlashAttention-2, Dao 2023, section 3.1.1) execute
  half of it;
* full activation recomputation repeats the forward pass (``8 N`` instead of ``6 N``,
  Narayanan et al. 2021 eq. 3 uses the factor 4 = 1 + 2 + 1); selective recomputation
  repeats only the attention core (Korthikanti et al. 2022, section 4.2);
* LoRA keeps the base weights frozen: no weight gradients, so the frozen matmuls cost
  ``4 N`` per token (forward + activation gradients; Hu et al. 2021, section 4.2).

Embedding lookups are gathers, not matmuls; an output head tied to the embedding still
multiplies, so it is counted.
"""

from __future__ import annotations

from msgspec import Struct

from gpu_advisor.core.architecture import Architecture
from gpu_advisor.core.spec import TrainingWorkload


def matmul_parameters(arch: Architecture) -> int:
    """Active parameters that take part in matmuls per token (elements).

    ``active`` minus the input embedding; a tied head (``lm_head == 0``) still multiplies
    ``vocab x hidden`` per token, so that much of the embedding is kept.
    """
    counts = arch.parameters
    embedding_gather = counts.embedding
    if counts.lm_head == 0:
        embedding_gather -= arch.vocab_size * arch.hidden_size
    return max(counts.active - max(embedding_gather, 0), 0)


def attention_widths(arch: Architecture) -> tuple[int, int]:
    """(query-key width, value width) summed over heads, elements per token and layer.

    Standard heads: ``heads x head_dim`` each. MLA (DeepSeek-V2/V3) scores use
    ``qk_nope_head_dim + qk_rope_head_dim`` and values ``v_head_dim`` per head.
    """
    if arch.mla is not None:
        mla = arch.mla
        return (
            arch.num_attention_heads * (mla.qk_nope_head_dim + mla.qk_rope_head_dim),
            arch.num_attention_heads * mla.v_head_dim,
        )
    width = arch.num_attention_heads * arch.head_dim
    return width, width


def attended_tokens(arch: Architecture, context_tokens: float, *, causal: bool = False) -> float:
    """Keys attended per query, summed over decoder layers.

    A full layer attends the whole context, or half of it on average over a causal sequence
    (kernels that skip masked blocks); a sliding-window layer attends ``min(window, that)``.
    """
    span = context_tokens / 2 if causal else context_tokens
    if not arch.layer_windows:
        return arch.num_layers * span
    return sum(span if window is None else min(window, span) for window in arch.layer_windows)


class TrainingFlops(Struct, frozen=True, kw_only=True):
    """FLOPs per trained token.

    Attributes:
        model: useful FLOPs (forward + backward, no recomputation): the MFU numerator.
        executed: FLOPs the GPUs run, recomputation included.
    """

    model: float
    executed: float


def training_flops_per_token(arch: Architecture, workload: TrainingWorkload) -> TrainingFlops:
    """FLOPs per token of one training step, from the conventions in the module docstring."""
    seq = float(workload.sequence_length)
    qk_width, v_width = attention_widths(arch)
    # FlashAttention skips masked causal blocks (FlashAttention-2, section 3.1.1); eager
    # attention computes the full s x s score matrix and masks it.
    attended = attended_tokens(arch, seq, causal=workload.flash_attention)
    attention_forward = 2.0 * (qk_width + v_width) * attended
    dense_forward = 2.0 * matmul_parameters(arch)
    # backward: activation + weight gradients (2x forward); LoRA base: activation grads only.
    dense_backward = dense_forward * (1.0 if workload.method in ("lora", "qlora") else 2.0)
    model = dense_forward + dense_backward + 3.0 * attention_forward
    match workload.gradient_checkpointing:
        case "full":
            recompute = dense_forward + attention_forward
        case "selective":
            recompute = attention_forward
        case _:
            recompute = 0.0
    return TrainingFlops(model=model, executed=model + recompute)


def decode_flops_per_token(arch: Architecture, context_tokens: float) -> float:
    """Forward FLOPs to generate one token with ``context_tokens`` already in the KV cache."""
    qk_width, v_width = attention_widths(arch)
    return 2.0 * matmul_parameters(arch) + 2.0 * (qk_width + v_width) * attended_tokens(
        arch, context_tokens
    )


def prefill_flops(arch: Architecture, prompt_tokens: float) -> float:
    """Forward FLOPs of one prompt of ``P`` tokens: ``2 N P`` plus causal attention
    ``2 (d_qk + d_v) P`` per token over ``P / 2`` keys on average (``(d_qk + d_v) L P^2``)."""
    qk_width, v_width = attention_widths(arch)
    attended = attended_tokens(arch, prompt_tokens, causal=True)
    return (2.0 * matmul_parameters(arch) + 2.0 * (qk_width + v_width) * attended) * prompt_tokens
