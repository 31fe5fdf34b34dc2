"""Memory estimator: per-GPU requirement of a workload under a parallel plan (DESIGN step 2).

Pure core: every term is its own function on primitives (``formats``, ``model_states``,
``activations``, ``kv_cache``, ``lora``, ``overhead``, ``engine``), composed per pipeline stage
in ``training`` and ``inference``; the entry points are in ``estimate``.
"""

from gpu_advisor.core.memory.engine import KvPoolCheck
from gpu_advisor.core.memory.estimate import (
    WorkloadEstimator,
    at_capacity,
    capacity_class,
    estimate_memory,
    kv_pool_check,
    max_concurrency,
    max_context_length,
)
from gpu_advisor.core.memory.overhead import (
    DEFAULT_OVERHEAD,
    EAGER_LOADING_OVERHEAD,
    OverheadModel,
)
from gpu_advisor.core.memory.validate import validate_plan

__all__ = [
    "DEFAULT_OVERHEAD",
    "EAGER_LOADING_OVERHEAD",
    "KvPoolCheck",
    "OverheadModel",
    "WorkloadEstimator",
    "at_capacity",
    "capacity_class",
    "estimate_memory",
    "kv_pool_check",
    "max_concurrency",
    "max_context_length",
    "validate_plan",
]
