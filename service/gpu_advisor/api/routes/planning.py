"""The main job's endpoints: ``POST /v1/recommendations`` (and, with the estimator and the CI
gate, ``/v1/estimate`` and ``/v1/check``). Handlers are thin: decode (msgspec, unknown fields
rejected), call the :class:`~gpu_advisor.advisor.Advisor`, time the work for /metrics."""

from __future__ import annotations

from litestar import post
from litestar.di import NamedDependency
from litestar.params import JSONBody
from litestar.status_codes import HTTP_200_OK

from gpu_advisor.advisor import Advisor
from gpu_advisor.api.problems import problem_responses
from gpu_advisor.core.estimate import EstimateResponse
from gpu_advisor.core.results import RecommendationResponse
from gpu_advisor.core.spec import EstimateRequest, RecommendationRequest
from gpu_advisor.metrics import Metrics


@post(
    "/v1/recommendations",
    status_code=HTTP_200_OK,
    tags=["planning"],
    summary="Rank cloud GPU instances for a workload",
    responses=problem_responses(400, 413, 422),
)
async def recommendations(
    data: JSONBody[RecommendationRequest],
    advisor: NamedDependency[Advisor],
    metrics: NamedDependency[Metrics],
) -> RecommendationResponse:
    """The feasible plans on every instance, ranked by the objective, with what each costs
    and how long it takes; every other candidate grouped by the reason it was rejected."""
    with metrics.time_compute("recommendations"):
        return await advisor.recommend(data)


@post(
    "/v1/estimate",
    status_code=HTTP_200_OK,
    tags=["planning"],
    summary="Memory and speed of a workload, per GPU",
    responses=problem_responses(400, 413, 422),
)
async def estimate(
    data: JSONBody[EstimateRequest],
    advisor: NamedDependency[Advisor],
    metrics: NamedDependency[Metrics],
) -> EstimateResponse:
    """The per-GPU memory breakdown (weights, gradients, optimizer, activations, KV cache,
    overhead). Without ``hardware``: on one GPU (or the given plan) plus the smallest feasible
    GPU count per GPU type. With ``hardware``: on that GPU x count x nodes, whether it fits,
    the plan, the speed and, for inference, the longest context and the largest concurrency."""
    with metrics.time_compute("estimate"):
        return await advisor.estimate(data)


PLANNING_ROUTES = [recommendations, estimate]
