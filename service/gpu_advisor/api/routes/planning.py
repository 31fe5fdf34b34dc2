"""The main job's endpoints: ``POST /v1/recommendations``, ``/v1/estimate`` and the CI gate
``/v1/check``. Handlers are thin: decode (msgspec, unknown fields rejected), call the
:class:`~gpu_advisor.advisor.Advisor`, time the work for /metrics, answer in JSON or -- for
``Accept: text/plain`` -- as a text table (:mod:`gpu_advisor.api.negotiation`).

The advisor and the metrics come from the application ``State`` (Litestar's reserved ``state``
argument; :func:`gpu_advisor.api.app.create_app` puts every dependency there), not from two
``Provide`` dependencies: Litestar resolves two dependencies of one handler in an anyio task
group (``KwargsModel.resolve_dependencies``), about 90 us per request measured in process --
a third of a repeated request's whole cost (``bench/bench_http.py``)."""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, post
from litestar.datastructures import State
from litestar.params import JSONBody
from litestar.status_codes import HTTP_200_OK

from gpu_advisor.advisor import Advisor
from gpu_advisor.api.negotiation import TextTableOperation, negotiated
from gpu_advisor.api.problems import problem_responses
from gpu_advisor.core.check import CheckResponse
from gpu_advisor.core.estimate import EstimateResponse
from gpu_advisor.core.results import RecommendationResponse
from gpu_advisor.core.spec import CheckRequest, EstimateRequest, RecommendationRequest
from gpu_advisor.metrics import Metrics


def planning_services(state: State) -> tuple[Advisor, Metrics]:
    """The application's :class:`Advisor` and :class:`Metrics` (``create_app``'s
    ``dependencies`` and ``metrics``)."""
    advisor: Advisor = state.advisor
    metrics: Metrics = state.metrics
    return advisor, metrics


@post(
    "/v1/recommendations",
    status_code=HTTP_200_OK,
    tags=["planning"],
    summary="Rank cloud GPU instances for a workload",
    operation_class=TextTableOperation,
    responses=problem_responses(400, 413, 422, 429),
)
async def recommendations(
    request: Request[Any, Any, Any],
    data: JSONBody[RecommendationRequest],
    state: State,
) -> Response[RecommendationResponse]:
    """The feasible plans on every instance, ranked by the objective, with what each costs
    and how long it takes; every other candidate grouped by the reason it was rejected."""
    advisor, metrics = planning_services(state)
    with metrics.time_compute("recommendations"):
        answer = await advisor.serve_recommendation(data)
    return negotiated(request, answer)


@post(
    "/v1/estimate",
    status_code=HTTP_200_OK,
    tags=["planning"],
    summary="Memory and speed of a workload, per GPU",
    operation_class=TextTableOperation,
    responses=problem_responses(400, 413, 422, 429),
)
async def estimate(
    request: Request[Any, Any, Any],
    data: JSONBody[EstimateRequest],
    state: State,
) -> Response[EstimateResponse]:
    """The per-GPU memory breakdown (weights, gradients, optimizer, activations, KV cache,
    overhead). Without ``hardware``: on one GPU (or the given plan) plus the smallest feasible
    GPU count per GPU type. With ``hardware``: on that GPU x count x nodes, whether it fits,
    the plan, the speed and, for inference, the longest context and the largest concurrency."""
    advisor, metrics = planning_services(state)
    with metrics.time_compute("estimate"):
        answer = await advisor.serve_estimate(data)
    return negotiated(request, answer)


@post(
    "/v1/check",
    status_code=HTTP_200_OK,
    tags=["planning"],
    summary="CI gate: does a workload fit its target, within headroom, budget and deadline",
    operation_class=TextTableOperation,
    responses=problem_responses(400, 404, 413, 422, 429),
)
async def check(
    request: Request[Any, Any, Any],
    data: JSONBody[CheckRequest],
    state: State,
) -> Response[CheckResponse]:
    """``verdict`` pass or fail on a target -- an instance type of a provider, a list of
    allowed instance types, or GPU x count x nodes -- with one entry per check (memory,
    topology, headroom, budget, deadline) and its numbers, the plan on the target, and on
    ``fail`` the cheapest passing alternative in the catalog. Always 200 for a well-formed
    request (a fail is an answer, not an error); 404 when the target's provider or instance
    type is not in the catalog; 400/422 for a malformed request."""
    advisor, metrics = planning_services(state)
    with metrics.time_compute("check"):
        answer = await advisor.serve_check(data)
    return negotiated(request, answer)


PLANNING_ROUTES = [recommendations, estimate, check]
