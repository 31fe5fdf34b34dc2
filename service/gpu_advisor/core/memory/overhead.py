"""The named runtime-overhead term: CUDA context and kernels, allocator fragmentation.

Every process that touches a GPU pays for a CUDA context (driver state, the kernels of CUDA,
cuBLAS, cuDNN and PyTorch loaded into device memory) before it allocates one tensor, and the
PyTorch caching allocator reserves more than the live tensors need (rounding, fragmentation).
Both are real memory a fit check must count, and neither is a model term, so they are one named
term (``overhead_bytes``) with its parts in ``details``.
"""

from __future__ import annotations

import math

from msgspec import Struct

from gpu_advisor.core.units import MIB

CUDA_CONTEXT_LAZY_BYTES = 426 * MIB
"""CUDA context with lazy module loading (CUDA >= 11.7, PyTorch's default since 1.13): 426 MiB
measured with ``nvidia-smi`` after ``torch.cuda.mem_get_info`` (unsloth-zoo PR #1053, PyTorch
2.10 + CUDA 13.0, RTX 6000 Ada); "around 400MB if CUDA >= 11.7 is used and lazy module loading
enabled" (pytorch/pytorch#109888, ptrblck)."""

CUDA_CONTEXT_EAGER_BYTES = 1343 * MIB
"""CUDA context with eager module loading (CUDA < 11.7 or ``CUDA_MODULE_LOADING=EAGER``): 1343
MiB on a V100 after ``torch.ones((1, 1)).to("cuda")`` (Hugging Face transformers docs, "Model
training anatomy", reference case C07); "> 1000MB" before CUDA 11.7 (pytorch/pytorch#109888)."""

FRAGMENTATION_FRACTION = 0.10
"""Caching-allocator reserve over live tensors, as a fraction of the dynamic (per-step)
allocations: measured peak reserved vs peak allocated ranges from 3 % (14,766 vs 14,341 MB,
pytorch/pytorch#44742) to 21 % (93 vs 77 GiB, meta-pytorch/torchrec#4584); 10 % is the documented
middle. Static allocations (weights, optimizer state) are made once and do not fragment."""


class OverheadModel(Struct, frozen=True, kw_only=True):
    """Parameters of the runtime overhead term.

    Attributes:
        cuda_context_bytes: per-process context (lazy loading by default).
        fragmentation_fraction: allocator reserve as a fraction of dynamic allocations.
    """

    cuda_context_bytes: int = CUDA_CONTEXT_LAZY_BYTES
    fragmentation_fraction: float = FRAGMENTATION_FRACTION


DEFAULT_OVERHEAD = OverheadModel()
EAGER_LOADING_OVERHEAD = OverheadModel(cuda_context_bytes=CUDA_CONTEXT_EAGER_BYTES)
"""For measurements taken before CUDA 11.7 (the 2022 transformers-docs cases)."""


def fragmentation_bytes(dynamic_bytes: int, model: OverheadModel = DEFAULT_OVERHEAD) -> int:
    """Allocator reserve over ``dynamic_bytes`` of per-step allocations (activations, gradient
    buckets, temporaries): ``fraction x dynamic``, rounded up."""
    return math.ceil(dynamic_bytes * model.fragmentation_fraction)


def runtime_overhead_bytes(
    dynamic_bytes: int, model: OverheadModel = DEFAULT_OVERHEAD
) -> tuple[int, int]:
    """(CUDA context, fragmentation) bytes for one GPU process."""
    return model.cuda_context_bytes, fragmentation_bytes(dynamic_bytes, model)
