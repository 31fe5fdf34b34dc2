"""Serving memory: the forward-pass activation peak and the vLLM engine's reservation.

vLLM (``vllm/v1/worker/gpu_worker.py`` ``determine_available_memory``, log line "the current
vLLM instance can use total_gpu_memory x gpu_memory_utilization ...; model weights take ...;
non_torch_memory takes ...; PyTorch activation peak memory takes ...; the rest of the memory
reserved for KV Cache is ...") reserves ``gpu_memory_utilization x capacity`` and gives the KV
cache what is left after the weights, the activation peak of a profiling forward pass of
``max_num_batched_tokens`` tokens, the memory outside PyTorch's allocator (NCCL, cuBLAS
workspaces) and, since vLLM 0.21, the estimated CUDA-graph memory. The requirement of a serving
workload and the engine's reservation are different numbers: :class:`MemoryBreakdown` reports
the requirement in ``total_bytes`` and the reservation in ``engine_reserved_bytes`` /
``kv_pool_bytes``; a requested context x concurrency that does not fit the pool is infeasible
even when the weights fit (:func:`kv_pool_check`).
"""

from __future__ import annotations

from msgspec import Struct

from gpu_advisor.core.architecture import Architecture
from gpu_advisor.core.units import GIB, MIB

VLLM_LARGE_GPU_BYTES = 70 * GIB
"""vLLM picks larger batch defaults on GPUs with at least 70 GiB (``vllm/engine/arg_utils.py``
``EngineArgs.get_batch_defaults``: ``device_memory >= 70 * GiB_bytes and "a100" not in
device_name``). The A100 exclusion needs the device name, which a capacity does not carry: an
80 GB A100 is treated like an H100 here (a conservative, larger activation peak)."""

VLLM_SERVER_MAX_NUM_BATCHED_TOKENS_LARGE = 8192
VLLM_SERVER_MAX_NUM_BATCHED_TOKENS_SMALL = 2048
VLLM_SERVER_MAX_NUM_SEQS_LARGE = 1024
VLLM_SERVER_MAX_NUM_SEQS_SMALL = 256
"""``EngineArgs.get_batch_defaults`` for ``UsageContext.OPENAI_API_SERVER`` (``vllm serve``):
8192 tokens / 1024 sequences on >= 70 GiB GPUs, else 2048 / 256."""

VLLM_BLOCK_TOKENS = 16
"""KV cache block size in tokens (vLLM ``--block-size`` default 16 on CUDA); a sequence occupies
whole blocks."""

VLLM_NON_TORCH_BYTES = 358 * MIB
"""Memory outside PyTorch's allocator on one GPU: "non_torch_memory takes 0.35GiB" (vLLM log in
vllm-project/vllm#10517, Llama-3.1-8B on an RTX 3090; 0.33 GiB in vllm#14452 on an RTX 5090)."""

VLLM_CUDA_GRAPH_BYTES = 369 * MIB
"""CUDA-graph capture memory: "Estimated CUDA graph memory: 0.36 GiB total" (vLLM 0.27.1 log in
gpustack/runner#251); "Graph capturing finished in 14 secs, took 0.21 GiB" for Llama-3.2-1B
(vllm-project/vllm#11349). Subtracted from the KV budget since vLLM 0.21."""

SAMPLER_BYTES_PER_LOGIT = 8
"""The sampler keeps fp32 logits and fp32 probabilities for each scheduled sequence
(``vllm/v1/sample/sampler.py``): 2 x 4 bytes per sequence x vocabulary entry."""


def vllm_default_max_num_batched_tokens(capacity_bytes: int | None) -> int:
    """vLLM's server default token budget per step for a GPU of ``capacity_bytes``."""
    if capacity_bytes is None or capacity_bytes >= VLLM_LARGE_GPU_BYTES:
        return VLLM_SERVER_MAX_NUM_BATCHED_TOKENS_LARGE
    return VLLM_SERVER_MAX_NUM_BATCHED_TOKENS_SMALL


def vllm_default_max_num_seqs(capacity_bytes: int | None) -> int:
    """vLLM's server default of concurrently scheduled sequences."""
    if capacity_bytes is None or capacity_bytes >= VLLM_LARGE_GPU_BYTES:
        return VLLM_SERVER_MAX_NUM_SEQS_LARGE
    return VLLM_SERVER_MAX_NUM_SEQS_SMALL


def forward_bytes_per_token(arch: Architecture, act_bytes: int, *, tensor_parallel: int = 1) -> int:
    """Peak transient bytes per token of an inference forward pass (no autograd).

    At the FFN of a layer the hidden state and the residual (2 x h) are alive with the
    gate/up output (2 x f, fused in vLLM's ``MergedColumnParallelLinear``) and the activation
    output (f): ``B x (2h + 3f / t)``; a plain FFN holds ``B x (2h + 2f / t)``. An MoE layer
    routes each token to ``experts_per_token`` experts of width f_e (fused-MoE intermediate
    caches ``k x 3 f_e``, plus the ``k x h`` expert outputs). Checked against the vLLM logs of
    vllm#10517: Llama-3.1-8B, 29,000 batched tokens -> 2 x (2 x 4096 + 3 x 14336) = 102,400
    B/token = 2.77 GiB + sampler 0.24 GiB = 3.01 GiB (logged 2.99 GiB).
    """
    h = arch.hidden_size
    t = tensor_parallel
    if arch.is_moe:
        fe = arch.moe_intermediate_size or arch.intermediate_size
        k = arch.num_experts_per_token
        ffn = k * h + -(-3 * k * fe // t)
        if arch.num_shared_experts:
            ffn += -(-3 * fe * arch.num_shared_experts // t)
    else:
        ffn = -(-(3 if arch.gated_mlp else 2) * arch.intermediate_size // t)
    return act_bytes * (2 * h + ffn)


def sampler_bytes(sequences: int, vocab: int) -> int:
    """Logits and probabilities of ``sequences`` scheduled sequences: seqs x vocab x 8 bytes."""
    return sequences * vocab * SAMPLER_BYTES_PER_LOGIT


def vllm_kv_pool(
    *,
    capacity_bytes: int,
    gpu_memory_utilization: float,
    weights_bytes: int,
    activation_peak_bytes: int,
    non_torch_bytes: int = VLLM_NON_TORCH_BYTES,
    cuda_graph_bytes: int = VLLM_CUDA_GRAPH_BYTES,
) -> tuple[int, int]:
    """vLLM's budget on one GPU, as (reserved, KV pool) bytes: reserved = utilization x
    capacity (rounded down), KV pool = reserved - weights - activation peak - non-torch - CUDA
    graphs (``determine_available_memory``); the pool is negative when the rest exceeds the
    reservation.

    Example (vllm#10517, RTX 3090, 23.58 GiB visible, utilization 0.90): 21.22 GiB reserved -
    14.99 weights - 2.99 activations - 0.35 non-torch = 2.89 GiB for KV (graphs not counted in
    that version).
    """
    reserved = int(capacity_bytes * gpu_memory_utilization)
    pool = reserved - weights_bytes - activation_peak_bytes - non_torch_bytes - cuda_graph_bytes
    return reserved, pool


def block_rounded_tokens(tokens: int, block_tokens: int = VLLM_BLOCK_TOKENS) -> int:
    """Tokens a sequence occupies in a paged cache: whole blocks of ``block_tokens``."""
    return -(-tokens // block_tokens) * block_tokens


class KvPoolCheck(Struct, frozen=True, kw_only=True):
    """Does the requested KV cache fit the engine's pool?

    Attributes:
        required_bytes: KV bytes the workload needs per GPU (context x the replica's share of
            the concurrency, ``ceil(concurrency / data_parallel)`` sequences).
        pool_bytes: what the engine leaves for KV per GPU.
        fits: required <= pool.
        max_tokens: tokens of full-attention cache the pool holds per GPU.
        context_length: requested tokens per sequence.
        concurrency: requested sequences of the whole deployment.
    """

    required_bytes: int
    pool_bytes: int
    fits: bool
    max_tokens: int
    context_length: int
    concurrency: int
