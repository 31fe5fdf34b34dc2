"""The service's app with one change, for ``bench/bench_http.py``: ``POST /v1/recommendations``
runs the planner in a worker thread (``asyncio.to_thread``) instead of on the event loop.

Served exactly as ``gpu-advisor serve`` serves the real app (``run_server`` with this module's
``create`` as the factory), so the two differ only in where the planner's CPU work runs.
"""

from __future__ import annotations

import asyncio
import os

import msgspec
from litestar import Litestar

from gpu_advisor.advisor import Advisor, catalog_info, model_summary
from gpu_advisor.api.app import create_app
from gpu_advisor.api.routes.catalog import CATALOG_ROUTES
from gpu_advisor.api.routes.models import MODEL_ROUTES
from gpu_advisor.api.routes.planning import PLANNING_ROUTES
from gpu_advisor.asgi import MULTIPROC_VARIABLE, load_settings
from gpu_advisor.catalog.service import CatalogService
from gpu_advisor.core.memory import WorkloadEstimator
from gpu_advisor.core.models import resolve_model
from gpu_advisor.core.planner import MEMORY_CAPACITY_RULE, recommend
from gpu_advisor.core.results import RecommendationResponse
from gpu_advisor.core.spec import RecommendationRequest
from gpu_advisor.logs import configure_logging
from gpu_advisor.metrics import Metrics


class OffloadingAdvisor(Advisor):
    """:class:`Advisor` whose recommendation work (model, planner) runs in a worker thread;
    the event loop only awaits it (the GIL still serialises the Python work)."""

    async def recommend(self, request: RecommendationRequest) -> RecommendationResponse:
        constraints = self._canonical_constraints(request.constraints)
        if constraints is not request.constraints:
            request = msgspec.structs.replace(request, constraints=constraints)
        snapshot, index = await self._planner_index()

        def work() -> RecommendationResponse:
            arch = resolve_model(request.model)
            result = recommend(
                arch,
                request,
                index,
                self.gpus.by_id,
                self.providers,
                WorkloadEstimator(arch, request.workload),
                capacity_rule=MEMORY_CAPACITY_RULE,
            )
            return RecommendationResponse(
                model=model_summary(arch),
                objective=result.objective,
                recommendations=result.recommendations,
                rejected=result.rejected,
                pareto=result.pareto,
                catalog=catalog_info(snapshot),
                suggestions=result.suggestions,
                candidates_considered=result.candidates_considered,
            )

        return await asyncio.to_thread(work)


def create() -> Litestar:
    """``gpu_advisor.asgi.build`` with :class:`OffloadingAdvisor`."""
    settings = load_settings()
    configure_logging(settings.log_level, settings.log_format)
    metrics = Metrics(multiprocess_mode=bool(os.environ.get(MULTIPROC_VARIABLE)))
    catalog = CatalogService(settings.catalog_config(), observer=metrics)
    return create_app(
        settings,
        metrics=metrics,
        services=[catalog],
        route_handlers=[*CATALOG_ROUTES, *MODEL_ROUTES, *PLANNING_ROUTES],
        dependencies={
            "catalog": catalog,
            "gpus": catalog.gpus,
            "advisor": OffloadingAdvisor(catalog),
        },
    )
