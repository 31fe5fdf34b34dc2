"""The memory estimator the planner calls, injected as a value (a Protocol, not an import).

The planner never sizes memory itself: it asks an estimator for the per-GPU requirement of a
candidate plan. Production wires :func:`gpu_advisor.core.memory.estimate_memory`; tests pass a
small estimator whose arithmetic is written out in the test. A per-request memo avoids asking
twice for the same plan: many offer groups share the plan shapes and GPU capacities.
"""

from __future__ import annotations

from typing import Protocol

from msgspec import structs

from gpu_advisor.core.architecture import Architecture
from gpu_advisor.core.errors import InvalidSpecError
from gpu_advisor.core.results import MemoryBreakdown, ParallelPlan
from gpu_advisor.core.spec import InferenceWorkload, Workload


class MemoryEstimator(Protocol):
    """Per-GPU memory of ``workload`` on ``arch`` under ``plan``.

    Matches ``gpu_advisor.core.memory.estimate_memory(arch, workload, plan, *,
    capacity_bytes=None)``.

    Returns:
        The per-GPU REQUIREMENT in ``total_bytes`` (weights + gradients + optimizer +
        activations + KV cache + overhead), independent of ``capacity_bytes``. When
        ``capacity_bytes`` is given (the GPU's exposed bytes) it also fills
        ``capacity_bytes``/``headroom_fraction`` and, for a vLLM-style engine,
        ``engine_reserved_bytes`` and ``kv_pool_bytes``. For inference, ``kv_cache_bytes`` is
        the KV cache of ``workload.concurrency`` sequences of ``workload.context_length``
        tokens on one GPU of one replica.
    """

    def __call__(
        self,
        arch: Architecture,
        workload: Workload,
        plan: ParallelPlan,
        /,
        *,
        capacity_bytes: int | None = None,
    ) -> MemoryBreakdown: ...


class MemoMemory:
    """Memoises one estimator for one request (``arch`` and ``workload`` are fixed).

    Not shared between requests: it lives as long as one ``recommend`` call.
    """

    def __init__(self, estimate: MemoryEstimator, arch: Architecture, workload: Workload) -> None:
        self._estimate = estimate
        self._arch = arch
        self._workload = workload
        self._cache: dict[tuple[ParallelPlan, int | None], MemoryBreakdown | None] = {}
        self.calls = 0
        self._capacity_matters = isinstance(workload, InferenceWorkload) and (
            workload.engine == "vllm"
        )

    def __call__(
        self, plan: ParallelPlan, capacity_bytes: int | None = None
    ) -> MemoryBreakdown | None:
        """The breakdown of ``plan``, or None when the estimator says the plan cannot run the
        model (an :class:`InvalidSpecError` about a ``plan.*`` field: the search then skips it).
        Errors about the workload itself propagate: they are the caller's to fix."""
        key = (plan, capacity_bytes)
        if key in self._cache:
            return self._cache[key]
        if capacity_bytes and not self._capacity_matters:
            # The capacity only fills capacity_bytes / headroom_fraction here (no engine
            # reservation outside vLLM serving): derive them instead of asking again.
            need = self(plan)
            derived = None
            if need is not None:
                derived = structs.replace(
                    need,
                    capacity_bytes=capacity_bytes,
                    headroom_fraction=1 - need.total_bytes / capacity_bytes,
                )
            self._cache[key] = derived
            return derived
        self.calls += 1
        try:
            found: MemoryBreakdown | None = self._estimate(
                self._arch, self._workload, plan, capacity_bytes=capacity_bytes
            )
        except InvalidSpecError as error:
            if not (error.field or "").startswith("plan."):
                raise
            found = None
        self._cache[key] = found
        return found
