"""KV cache: bytes per token and per sequence, GQA/MQA, MLA, sliding windows, TP replication.

Per token and layer a standard attention layer caches one key and one value vector per KV head:
``2 x kv_heads x head_dim x bytes`` (vLLM paper, Kwon et al. 2023, arXiv 2309.06180, section 3:
"2 (key and value vectors) x 5120 (hidden state size) x 40 (number of layers) x 2 (bytes per
FP16)" for OPT-13B). GQA/MQA models cache their KV heads, not their attention heads (Ainslie et
al. 2023, GQA). MLA (DeepSeek-V2/V3) caches one compressed latent of ``kv_lora_rank +
qk_rope_head_dim`` values per token and layer, shared by all heads, stored once (DeepSeek-V2
paper, arXiv 2405.04434, section 2.1.2, Table 1; vLLM's MLA backends cache the latent).

Sliding-window layers hold at most ``window`` tokens (Mistral 7B, arXiv 2310.06825, section 2
"Rolling Buffer Cache"); full-attention layers hold the whole context; hybrid models (Gemma 2/3,
gpt-oss) have both kinds, each counted.

Under tensor parallel each GPU holds ``max(1, kv_heads / t)`` KV heads: once t exceeds the KV
heads the heads are replicated and the per-GPU cache stops shrinking (vLLM
``QKVParallelLinear``: ``num_kv_head_replicas = t / kv_heads``). MLA's latent has no heads and is
replicated on every TP rank (vLLM's MLA attention uses one KV head).
"""

from __future__ import annotations

from gpu_advisor.core.architecture import Architecture


def kv_bytes_per_token_per_layer(kv_heads: int, head_dim: int, element_bytes: int) -> int:
    """Bytes one token adds to one standard attention layer's cache: 2 x kv_heads x head_dim x B.

    Example: Llama-3.1-8B layer, bf16: 2 x 8 x 128 x 2 = 4,096 B.
    """
    return 2 * kv_heads * head_dim * element_bytes


def mla_bytes_per_token_per_layer(
    kv_lora_rank: int, qk_rope_head_dim: int, element_bytes: int
) -> int:
    """Bytes one token adds to one MLA layer's cache: (kv_lora_rank + qk_rope_head_dim) x B.

    Example: DeepSeek-V3, bf16: (512 + 64) x 2 = 1,152 B (no factor 2: K and V share the latent).
    """
    return (kv_lora_rank + qk_rope_head_dim) * element_bytes


def kv_heads_per_gpu(kv_heads: int, tensor_parallel: int) -> int:
    """KV heads each tensor-parallel rank holds: max(1, kv_heads / t) (replication when t > kv).

    Example: 8 KV heads: t=8 -> 1, t=16 -> 1 (each head on two GPUs), t=4 -> 2.
    """
    return max(1, kv_heads // tensor_parallel)


def layer_token_capacity(window: int | None, context_tokens: int) -> int:
    """Tokens a layer caches for one sequence of ``context_tokens``: min(window, context)."""
    if window is None:
        return context_tokens
    return min(window, context_tokens)


def _windows(arch: Architecture, layers: int) -> tuple[int | None, ...]:
    if arch.layer_windows and len(arch.layer_windows) == layers:
        return arch.layer_windows
    if arch.layer_windows:
        # A pattern shorter than the stack repeats (defensive; presets give one per layer).
        pattern = arch.layer_windows
        return tuple(pattern[i % len(pattern)] for i in range(layers))
    return (None,) * layers


def per_layer_token_bytes(
    arch: Architecture, *, element_bytes: int, tensor_parallel: int = 1
) -> int:
    """Bytes per token of ONE decoder layer on one GPU (all layers of a model are alike).

    MLA caches its latent in vLLM, SGLang and transformers (5.24 ``DeepseekV3Attention`` caches
    ``compressed_kv`` and ``k_pe``; checked by the measured harness).
    """
    if arch.mla is not None:
        return mla_bytes_per_token_per_layer(
            arch.mla.kv_lora_rank, arch.mla.qk_rope_head_dim, element_bytes
        )
    return kv_bytes_per_token_per_layer(
        kv_heads_per_gpu(arch.num_kv_heads, tensor_parallel), arch.head_dim, element_bytes
    )


def decoder_layer_token_bytes(
    arch: Architecture, *, element_bytes: int, tensor_parallel: int = 1
) -> int:
    """Bytes per token of one decoder layer's cache on one GPU: :func:`per_layer_token_bytes`,
    0 for an encoder-only model (it caches nothing)."""
    if arch.encoder_only:
        return 0
    return per_layer_token_bytes(arch, element_bytes=element_bytes, tensor_parallel=tensor_parallel)


def kv_cache_bytes_per_token(
    arch: Architecture,
    *,
    element_bytes: int,
    tensor_parallel: int = 1,
    layers: int | None = None,
) -> int:
    """KV bytes one token adds across ``layers`` decoder layers (all by default), on one GPU.

    Windows are ignored here (this is the per-token rate of a full-attention cache); see
    :func:`kv_cache_bytes` for a sequence with sliding windows.

    Example: Llama-3.1-70B bf16: 2 x 80 x 8 x 128 x 2 = 327,680 B; at TP=8: 40,960 B.
    """
    n = arch.num_layers if layers is None else layers
    return n * decoder_layer_token_bytes(
        arch, element_bytes=element_bytes, tensor_parallel=tensor_parallel
    )


def kv_cache_bytes(
    arch: Architecture,
    *,
    context_tokens: int,
    sequences: int,
    element_bytes: int,
    tensor_parallel: int = 1,
    layer_range: tuple[int, int] | None = None,
) -> int:
    """KV cache of ``sequences`` sequences of ``context_tokens`` tokens each, on one GPU.

    Args:
        arch: architecture (``layer_windows`` give sliding-window layers).
        context_tokens: tokens per sequence (prompt + generated).
        sequences: concurrent sequences.
        element_bytes: bytes per cached element (bf16 2, fp8 1).
        tensor_parallel: TP degree (KV heads per GPU = max(1, kv / t)).
        layer_range: the [start, end) decoder layers on this GPU (pipeline stage); all if None.

    Returns:
        Bytes. Encoder-only models cache nothing.
    """
    if arch.encoder_only:
        return 0
    start, end = layer_range if layer_range is not None else (0, arch.num_layers)
    per_layer = per_layer_token_bytes(
        arch, element_bytes=element_bytes, tensor_parallel=tensor_parallel
    )
    return cached_tokens(arch, context_tokens, (start, end)) * per_layer * sequences


def cached_tokens(arch: Architecture, context_tokens: int, layer_range: tuple[int, int]) -> int:
    """Tokens the decoder layers ``[start, end)`` cache for one sequence of
    ``context_tokens``, summed over the layers (:func:`layer_token_capacity` of each).

    Example: Gemma-2-style alternation of 4,096-token windows and full layers, 8,192-token
    context, layers [0, 4): 4,096 + 8,192 + 4,096 + 8,192 = 24,576 tokens.
    """
    start, end = layer_range
    if not arch.layer_windows:
        # every layer holds the whole context (range slicing counts the layers in range)
        return len(range(arch.num_layers)[start:end]) * context_tokens
    windows = _windows(arch, arch.num_layers)[start:end]
    return sum(layer_token_capacity(w, context_tokens) for w in windows)


def cross_attention_layer_bytes(
    arch: Architecture, *, encoder_tokens: int, element_bytes: int, tensor_parallel: int = 1
) -> int:
    """Bytes of one decoder layer's cross-attention K/V of one sequence's encoder output, on one
    GPU: ``2 x kv_heads x head_dim x B x encoder_tokens`` (transformers
    ``EncoderDecoderCache``); 0 for a model without an encoder or an encoder-only one."""
    if arch.num_encoder_layers == 0 or arch.encoder_only:
        return 0
    return (
        kv_bytes_per_token_per_layer(
            kv_heads_per_gpu(arch.num_kv_heads, tensor_parallel), arch.head_dim, element_bytes
        )
        * encoder_tokens
    )


def cross_attention_kv_bytes(
    arch: Architecture,
    *,
    encoder_tokens: int,
    sequences: int,
    element_bytes: int,
    tensor_parallel: int = 1,
    layers: int | None = None,
) -> int:
    """Encoder-decoder models also cache each decoder layer's cross-attention K/V of the encoder
    output: ``layers x 2 x kv_heads x head_dim x B x encoder_tokens`` per sequence
    (:func:`cross_attention_layer_bytes`)."""
    return (
        (arch.num_layers if layers is None else layers)
        * cross_attention_layer_bytes(
            arch,
            encoder_tokens=encoder_tokens,
            element_bytes=element_bytes,
            tensor_parallel=tensor_parallel,
        )
        * sequences
    )
