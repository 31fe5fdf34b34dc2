"""The memory estimator the planner calls, injected as a value (a Protocol, not an import).

The planner never sizes memory itself: it asks an estimator for the per-GPU requirement of a
candidate plan. Production wires :func:`gpu_advisor.core.memory.estimate_memory`; tests pass a
small estimator whose arithmetic is written out in the test. A per-request memo avoids asking
twice for the same plan: many offer groups share the plan shapes and GPU capacities, and a
:class:`CapacityRule` (:data:`MEMORY_CAPACITY_RULE` for the real estimator) derives the
breakdown on another GPU capacity without asking again.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Protocol

from msgspec import Struct, structs

from gpu_advisor.core.architecture import Architecture
from gpu_advisor.core.errors import InvalidSpecError
from gpu_advisor.core.memory import at_capacity, capacity_class
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
        the KV cache of one replica's share of the deployment's sequences,
        ``ceil(workload.concurrency / plan.data_parallel)`` sequences of
        ``workload.context_length`` tokens, on one GPU of that replica (activations that
        grow with the batch are sized for the share too).
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


class CapacityRule(Struct, frozen=True):
    """How an estimator's breakdown depends on the GPU's capacity, so one estimate serves
    every GPU of a capacity class.

    Attributes:
        capacity_class: ``(workload, capacity_bytes | None) -> key``; capacities with equal
            keys have the same requirement.
        at_capacity: ``(breakdown, workload, capacity_bytes) -> breakdown`` -- a breakdown of
            the same class re-based on ``capacity_bytes`` (capacity, headroom, engine
            reservation, KV pool), equal to asking the estimator again.
    """

    capacity_class: Callable[[Workload, int | None], Hashable]
    at_capacity: Callable[[MemoryBreakdown, Workload, int], MemoryBreakdown]


MEMORY_CAPACITY_RULE = CapacityRule(capacity_class=capacity_class, at_capacity=at_capacity)
"""The capacity rule of :func:`gpu_advisor.core.memory.estimate_memory`: only vLLM's batch
defaults (GPUs of at least 70 GiB) change the requirement."""


class _Missing:
    """A dictionary miss (``None`` is a remembered answer: the plan cannot run the model)."""


_MISSING = _Missing()


class MemoMemory:
    """Memoises one estimator for one request (``arch`` and ``workload`` are fixed).

    The estimator is asked once per plan and capacity class; other capacities of the class
    are derived (:class:`CapacityRule`). Without a rule, capacities are derived only where the
    capacity cannot matter (training, the generic serving engine: it fills
    ``capacity_bytes``/``headroom_fraction`` alone), and a vLLM-style engine is asked per
    capacity. Not shared between requests: it lives as long as one ``recommend`` call.
    """

    def __init__(
        self,
        estimate: MemoryEstimator,
        arch: Architecture,
        workload: Workload,
        rule: CapacityRule | None = None,
    ) -> None:
        self._estimate = estimate
        self._arch = arch
        self._workload = workload
        self._rule = rule
        # per capacity (None: the requirement alone), then per plan: a lookup allocates no key
        # (keys kept for a request add to the garbage collector's work)
        self._cache: dict[int | None, dict[ParallelPlan, MemoryBreakdown | None]] = {}
        self._bases: dict[Hashable, dict[ParallelPlan, MemoryBreakdown | None]] = {}
        self._classes: dict[int | None, Hashable] = {}
        self.calls = 0
        self._capacity_matters = isinstance(workload, InferenceWorkload) and (
            workload.engine == "vllm"
        )

    def _class(self, capacity_bytes: int | None) -> Hashable:
        # one answer per capacity (the workload is fixed): asked once, remembered
        found: Hashable = self._classes.get(capacity_bytes, _MISSING)
        if found is _MISSING:
            if self._rule is not None:
                found = self._rule.capacity_class(self._workload, capacity_bytes)
            else:
                found = capacity_bytes if self._capacity_matters else None
            self._classes[capacity_bytes] = found
        return found

    def _rebase(self, base: MemoryBreakdown, capacity_bytes: int) -> MemoryBreakdown:
        if self._rule is not None:
            return self._rule.at_capacity(base, self._workload, capacity_bytes)
        return structs.replace(
            base,
            capacity_bytes=capacity_bytes,
            headroom_fraction=1 - base.total_bytes / capacity_bytes,
        )

    def __call__(
        self, plan: ParallelPlan, capacity_bytes: int | None = None
    ) -> MemoryBreakdown | None:
        """The breakdown of ``plan`` (on a GPU exposing ``capacity_bytes``), or None when the
        estimator says the plan cannot run the model (an :class:`InvalidSpecError` about a
        ``plan.*`` field: the search then skips it). Errors about the workload itself
        propagate: they are the caller's to fix."""
        capacity = capacity_bytes or None
        answers = self._cache.get(capacity)
        if answers is None:
            answers = self._cache[capacity] = {}
        found = answers.get(plan, _MISSING)
        if not isinstance(found, _Missing):
            return found
        capacity_class = self._class(capacity)
        bases = self._bases.get(capacity_class)
        if bases is None:
            bases = self._bases[capacity_class] = {}
        base = bases.get(plan, _MISSING) if capacity else _MISSING
        if capacity and not isinstance(base, _Missing):
            found = None if base is None else self._rebase(base, capacity)
        else:
            found = self._ask(plan, capacity)
            bases.setdefault(plan, found)
        answers[plan] = found
        return found

    def _ask(self, plan: ParallelPlan, capacity_bytes: int | None) -> MemoryBreakdown | None:
        self.calls += 1
        try:
            return self._estimate(self._arch, self._workload, plan, capacity_bytes=capacity_bytes)
        except InvalidSpecError as error:
            if not (error.field or "").startswith("plan."):
                raise
            return None
