"""Suggestions that change the workload rather than the constraints, when nothing fits for
lack of memory (QA finding 12): recompute activations before buying nodes, then smaller
micro-batches, then shorter sequences.

Each suggestion is found by planning the same request again with the workload lightened (the
same offers, constraints and objective) and quoting the best answer's numbers. The steps are
cumulative, each tried only when the ones before it do not make anything fit:

1. ``enable_checkpointing``: ``gradient_checkpointing`` ``selective``, then ``full`` (full
   recomputation keeps about ``2 s b h`` bytes per layer instead of ``34 s b h``: Korthikanti
   et al. 2022, "Reducing Activation Recomputation in Large Transformer Models", section 4);
   listed before any suggestion to add nodes, since it costs compute, not instances;
2. ``lower_micro_batch_size``: the largest power-of-two ``micro_batch_size`` below the
   requested one that fits (activations and the logits buffer scale with it; gradient
   accumulation keeps the global batch);
3. ``lower_sequence_length``: the longest power-of-two ``sequence_length`` (at least
   :data:`MIN_SEQUENCE_LENGTH`) below the requested one that fits.

Steps 2 and 3 use binary search over the exponents (memory grows with both), so at most
``2 + 2 x (log2(log2 n) + 1)`` plannings in all. Only tried when the binding constraint is
memory: no offer that passes the filters fits (numeric limits such as a budget are relaxed
elsewhere, :mod:`.rejections`); steps 2 and 3 not where the headroom is what binds (an
offer fits without it: lowering ``min_headroom_fraction`` is the suggestion then). Pure.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from gpu_advisor.core.planner.explain import render
from gpu_advisor.core.planner.report import describe
from gpu_advisor.core.planner.topology import plan_data
from gpu_advisor.core.results import Reason, Recommendation, Suggestion
from gpu_advisor.core.spec import Checkpointing, RecommendationRequest, TrainingWorkload

MIN_SEQUENCE_LENGTH = 128
"""Shortest sequence length suggested (shorter training sequences are rarely useful)."""

MEMORY_CODES = frozenset(
    {"insufficient_memory", "no_cluster_network", "over_max_nodes", "over_max_gpus", "tp_over_pcie"}
)
"""Group rejections that more memory per GPU (a lighter workload) could turn into a fit."""

WORKLOAD_SUGGESTIONS = frozenset(
    {"enable_checkpointing", "lower_micro_batch_size", "lower_sequence_length"}
)
"""The suggestion codes of this module."""

Planner = Callable[[RecommendationRequest], list[Recommendation]]
"""Plans a request on the same offers and returns its recommendations (best first)."""


def workload_suggestions(
    request: RecommendationRequest, codes: set[str], plan: Planner, *, headroom_binds: bool
) -> list[Suggestion]:
    """Workload changes that make something fit (see the module docstring).

    Args:
        request: the request that fits nothing.
        codes: the rejection codes of the groups that pass the filters (memory must be one).
        plan: plans a relaxed request on the same offers.
        headroom_binds: some offer would fit without ``min_headroom_fraction``.
    """
    if not isinstance(request.workload, TrainingWorkload) or not codes & MEMORY_CODES:
        return []
    workload: TrainingWorkload = request.workload
    changes: dict[str, Any] = {}

    def attempt(lighter: TrainingWorkload) -> Recommendation | None:
        found = plan(msgspec.structs.replace(request, workload=lighter))
        return found[0] if found else None

    for mode in _lighter_checkpointing(workload.gradient_checkpointing):
        workload = msgspec.structs.replace(workload, gradient_checkpointing=mode)
        changes["gradient_checkpointing"] = mode
        best = attempt(workload)
        if best is not None:
            return [_suggest("enable_checkpointing", changes, best)]
    if headroom_binds:
        return []
    current = workload
    fitted = _largest_fitting(
        _powers_below(1, current.micro_batch_size),
        lambda m: attempt(msgspec.structs.replace(current, micro_batch_size=m)),
    )
    if fitted is not None:
        changes["micro_batch_size"] = fitted[0]
        return [_suggest("lower_micro_batch_size", changes, fitted[1])]
    if workload.micro_batch_size > 1:
        workload = msgspec.structs.replace(workload, micro_batch_size=1)
        changes["micro_batch_size"] = 1
    single = workload
    fitted = _largest_fitting(
        _powers_below(MIN_SEQUENCE_LENGTH, single.sequence_length),
        lambda n: attempt(_with_sequence_length(single, n)),
    )
    if fitted is not None:
        changes["sequence_length"] = fitted[0]
        return [_suggest("lower_sequence_length", changes, fitted[1])]
    return []


def _lighter_checkpointing(current: Checkpointing) -> list[Checkpointing]:
    order: list[Checkpointing] = ["none", "selective", "full"]
    return order[order.index(current) + 1 :]


def _powers_below(start: int, limit: int) -> list[int]:
    """``start``, ``2 start``, ... below ``limit``."""
    found: list[int] = []
    value = start
    while value < limit:
        found.append(value)
        value *= 2
    return found


def _largest_fitting(
    values: list[int], attempt: Callable[[int], Recommendation | None]
) -> tuple[int, Recommendation] | None:
    """The largest of ascending ``values`` whose attempt fits (binary search: whatever fits
    at one value fits at every smaller one)."""
    found: tuple[int, Recommendation] | None = None
    low, high = 0, len(values) - 1
    while low <= high:
        middle = (low + high) // 2
        best = attempt(values[middle])
        if best is not None:
            found = (values[middle], best)
            low = middle + 1
        else:
            high = middle - 1
    return found


def _with_sequence_length(workload: TrainingWorkload, length: int) -> TrainingWorkload:
    target = workload.target_sequence_length
    return msgspec.structs.replace(
        workload,
        sequence_length=length,
        target_sequence_length=None if target is None else min(target, length),
    )


def _suggest(code: str, change: dict[str, Any], best: Recommendation) -> Suggestion:
    memory = best.memory_per_gpu
    data: dict[str, Any] = {
        **change,
        "offer": describe(best.offer),
        "gpu": best.offer.gpu,
        "gpus": best.gpus,
        "nodes": best.nodes,
        "need_bytes": memory.total_bytes,
        "exposed_bytes": best.offer.gpu_memory_exposed_bytes,
        "plan": plan_data(best.plan),
        "hours": best.performance.time_to_result_hours,
        "total_usd": best.cost.total_usd,
    }
    return Suggestion(code=code, text=render(Reason(code=code, data=data)), data=data)
