"""The service's app with one change, for ``bench/bench_http.py``: ``POST /v1/recommendations``
runs the planner in a worker thread (``asyncio.to_thread``) instead of on the event loop.

Served exactly as ``gpu-advisor serve`` serves the real app (``run_server`` with this module's
``create`` as the factory), so the two differ only in where the planner's CPU work runs.
"""

from __future__ import annotations

import asyncio

from litestar import Litestar

from gpu_advisor.advisor import Advisor, CachedAnswer, ServedAnswer
from gpu_advisor.asgi import build, load_settings
from gpu_advisor.core.results import RecommendationResponse
from gpu_advisor.core.spec import RecommendationRequest


class OffloadingAdvisor(Advisor):
    """:class:`Advisor` whose planning (:meth:`Advisor.plan_recommendation`, the same work)
    runs in a worker thread; the event loop only awaits it (the GIL still serialises the
    Python work). No answer cache: every request is planned."""

    async def serve_recommendation(
        self, request: RecommendationRequest
    ) -> ServedAnswer[RecommendationResponse]:
        snapshot, index = await self._planner_index()
        answer = await asyncio.to_thread(self.plan_recommendation, request, snapshot, index)
        return ServedAnswer(CachedAnswer(answer), answer.catalog)


def create() -> Litestar:
    """``gpu_advisor.asgi.build`` with :class:`OffloadingAdvisor`: every other setting
    (allocator, collector pause, logging, metrics) is the service's own."""
    return build(load_settings(), advisor_class=OffloadingAdvisor)
