"""The response types of ``POST /v1/check`` (they are the schema, like
:mod:`gpu_advisor.core.results`), and :func:`make_check`, which renders a check's sentence."""

from __future__ import annotations

from typing import Any, Final, Literal

from msgspec import Struct

from gpu_advisor.core.check_explain import render_check
from gpu_advisor.core.check_target import TargetInfo
from gpu_advisor.core.offers import Offer
from gpu_advisor.core.results import (
    CatalogInfo,
    Cost,
    MemoryBreakdown,
    ModelSummary,
    ParallelPlan,
    Performance,
    Reason,
    Recommendation,
    Suggestion,
    Verdict,
)

CheckName = Literal["memory", "topology", "headroom", "budget", "deadline"]
CHECK_NAMES: Final[tuple[CheckName, ...]] = ("memory", "topology", "headroom", "budget", "deadline")


class Check(Struct, frozen=True, kw_only=True):
    """One check of the gate.

    Attributes:
        name: ``memory`` | ``topology`` | ``headroom`` | ``budget`` | ``deadline``.
        passed: True / False; null when it could not be evaluated (``code`` ``not_evaluated``,
            or ``price_unknown``).
        code: what was found (``fits``, ``insufficient_memory``, ``over_budget``...).
        detail: the sentence with the numbers (rendered from ``data``).
        data: the numbers: bytes, USD, hours, fractions (units in the keys).
    """

    name: CheckName
    passed: bool | None
    code: str
    detail: str
    data: dict[str, Any] = {}


class CheckEstimate(Struct, frozen=True, kw_only=True):
    """The plan on the target and its per-GPU memory (the one the checks quote).

    When nothing fits, ``fits`` is false and the breakdown is that of the most sharded simple
    plan over all the target's GPUs (training: ZeRO-3 data parallel; serving: the widest TP
    of one node), without performance or cost.
    """

    fits: bool
    offer: Offer
    nodes: int
    gpus: int
    plan: ParallelPlan
    memory_per_gpu: MemoryBreakdown
    performance: Performance | None = None
    cost: Cost | None = None
    rationale: list[Reason] = []
    warnings: list[Reason] = []


class CheckOutcome(Struct, frozen=True, kw_only=True):
    """What the core decides; the application adds ``model`` and ``catalog``."""

    verdict: Verdict
    target: TargetInfo
    checks: list[Check]
    estimate: CheckEstimate
    alternative: Recommendation | None = None
    suggestions: list[Suggestion] = []


class CheckResponse(Struct, frozen=True, kw_only=True):
    """``POST /v1/check`` response.

    Attributes:
        verdict: ``pass`` when every check passed, else ``fail``.
        checks: memory, topology, headroom, budget, deadline -- in that order.
        estimate: the plan on the target with its per-GPU breakdown, speed and cost.
        alternative: on ``fail``, the cheapest option in the whole catalog that meets the
            same headroom, deadline and budget (null when there is none, or on ``pass``).
        suggestions: on ``fail`` without an alternative, which limit to relax.
    """

    verdict: Verdict
    model: ModelSummary
    target: TargetInfo
    checks: list[Check]
    estimate: CheckEstimate
    catalog: CatalogInfo
    alternative: Recommendation | None = None
    suggestions: list[Suggestion] = []


def make_check(name: CheckName, passed: bool | None, code: str, data: dict[str, Any]) -> Check:
    """A check with its ``detail`` rendered from ``code`` and ``data``."""
    return Check(
        name=name, passed=passed, code=code, detail=render_check(name, code, data), data=data
    )
