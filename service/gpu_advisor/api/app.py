"""The HTTP shell: routes, error mapping and the application's lifespan.

``create_app`` receives everything it needs (settings, metrics, the services it must open and
close, the route handlers of each area) from the composition root (:mod:`gpu_advisor.asgi`);
nothing here reads the environment.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Protocol

import msgspec
from litestar import Litestar, Response, get, head
from litestar.config.cors import CORSConfig
from litestar.datastructures import State
from litestar.di import NamedDependency, Provide
from litestar.enums import MediaType
from litestar.exceptions import HTTPException
from litestar.middleware.rate_limit import RateLimitConfig
from litestar.openapi import OpenAPIConfig, ResponseSpec
from litestar.openapi.plugins import SwaggerRenderPlugin
from litestar.status_codes import HTTP_200_OK, HTTP_503_SERVICE_UNAVAILABLE
from litestar.types import ControllerRouterHandler, Scope

from gpu_advisor import __version__
from gpu_advisor.api.edge import guard_request
from gpu_advisor.api.middleware import wrap_app
from gpu_advisor.api.problems import EXCEPTION_HANDLERS
from gpu_advisor.catalog.service import CacheHealth
from gpu_advisor.core.errors import DomainError
from gpu_advisor.logs import get_logger
from gpu_advisor.metrics import Metrics, http_metrics_config
from gpu_advisor.settings import Settings

_log = get_logger("gpu_advisor.app")

# Probes and the scrape are never rate limited (a kubelet or Prometheus hitting 429 would
# restart or lose a healthy pod).
RATE_LIMIT_EXEMPT = ("^/healthz$", "^/readyz$", "^/metrics$")


class ManagedService(Protocol):
    """Something the application opens at start-up and closes at shutdown (the pricing
    catalog with its Redis connection, ...)."""

    async def start(self) -> None:
        """Open connections, load what is needed to answer; must not wait on slow sources."""

    async def close(self) -> None:
        """Release connections; called after in-flight requests have finished."""


class Lifecycle:
    """The process's phase, as ``/readyz`` reports it: starting -> ready -> stopping."""

    def __init__(self) -> None:
        self.phase = "starting"


class Readiness(msgspec.Struct, frozen=True, kw_only=True):
    """``GET /readyz`` body.

    ``status``: ``ready`` (200), ``starting`` or ``stopping`` (503). ``cache``: the catalog's
    cache backend and whether it is degraded (Redis unreachable: answers come from memory and
    the pod stays ready, DESIGN "Pricing catalog and cache").
    """

    status: str
    version: str
    cache: CacheHealth | None = None


@get("/healthz", sync_to_thread=False, tags=["operations"], summary="Liveness")
def healthz() -> dict[str, str]:
    """Liveness: the process answers. Does not touch Redis or sources."""
    return {"status": "ok"}


@get(
    "/readyz",
    tags=["operations"],
    summary="Readiness",
    responses={
        HTTP_503_SERVICE_UNAVAILABLE: ResponseSpec(
            data_container=Readiness,
            description="Starting up or shutting down: send no traffic yet (the same body).",
            generate_examples=False,
        )
    },
)
async def readyz(lifecycle: NamedDependency[Lifecycle], state: State) -> Response[Readiness]:
    """Readiness: 200 once start-up has finished, 503 while starting or shutting down."""
    catalog = state.get("catalog")
    cache = await catalog.health() if lifecycle.phase == "ready" and catalog is not None else None
    body = Readiness(status=lifecycle.phase, version=__version__, cache=cache)
    return Response(body, status_code=_readiness_status(lifecycle))


def _readiness_status(lifecycle: Lifecycle) -> int:
    return HTTP_200_OK if lifecycle.phase == "ready" else HTTP_503_SERVICE_UNAVAILABLE


# HEAD answers with GET's status and no body (RFC 9110 section 9.3.2): load balancers and
# some probes send HEAD. Litestar routes HEAD only to handlers declared for it, and renders a
# None body as "null" for JSON; as text it is empty (Content-Length: 0).
@head("/healthz", sync_to_thread=False, include_in_schema=False, media_type=MediaType.TEXT)
def healthz_head() -> None:
    """Liveness, status only."""


@head("/readyz", sync_to_thread=False, include_in_schema=False, media_type=MediaType.TEXT)
def readyz_head(lifecycle: NamedDependency[Lifecycle]) -> Response[None]:
    """Readiness, status only: the status code of ``GET /readyz``."""
    return Response(None, status_code=_readiness_status(lifecycle), media_type=MediaType.TEXT)


@get("/metrics", sync_to_thread=False, include_in_schema=False)
def metrics_endpoint(metrics: NamedDependency[Metrics]) -> Response[bytes]:
    """Prometheus text exposition (see :mod:`gpu_advisor.metrics`)."""
    body, content_type = metrics.exposition()
    # Litestar appends "; charset=utf-8" to a text/* media type itself: pass it without one
    # (prometheus_client's CONTENT_TYPE_LATEST carries it already)
    media_type = "; ".join(
        part
        for part in (p.strip() for p in content_type.split(";"))
        if not part.startswith("charset=")
    )
    return Response(body, media_type=media_type)


async def log_unexpected(exc: Exception, scope: Scope) -> None:
    """``after_exception`` hook: a bug (not an HTTP or domain error) gets an error line with
    its traceback and the request id; the client sees a bare problem+json 500."""
    if isinstance(exc, HTTPException | DomainError):
        return
    _log.error("unhandled exception", path=scope.get("path"), exc_info=exc)


def openapi_config() -> OpenAPIConfig:
    return OpenAPIConfig(
        title="gpu-advisor",
        version=__version__,
        description=(
            "Which cloud GPU instance should run an AI workload, how to split it across GPUs, "
            "how long it takes and what it costs - and why every other candidate was rejected."
        ),
        path="/schema",
        render_plugins=[SwaggerRenderPlugin()],
    )


def _constant(value: Any) -> Provide:
    return Provide(lambda: value, use_cache=True, sync_to_thread=False)


def create_app(
    settings: Settings | None = None,
    *,
    metrics: Metrics | None = None,
    services: Sequence[ManagedService] = (),
    route_handlers: Sequence[ControllerRouterHandler] = (),
    dependencies: Mapping[str, Any] | None = None,
) -> Litestar:
    """Build the application from its dependencies (the composition root passes them).

    Args:
        settings: the process's settings; defaults to the embedded defaults.
        metrics: the Prometheus series; a fresh :class:`Metrics` when omitted.
        services: opened in order at start-up, closed in reverse order at shutdown.
        route_handlers: the areas' routes, added to the operational ones.
        dependencies: more values handlers receive by name (``catalog``, ``gpus``, ...) and
            find in ``app.state``; ``settings``, ``metrics`` and ``lifecycle`` are always
            provided. A ``catalog`` with ``async health()`` is reported by ``/readyz``.
    """
    settings = settings if settings is not None else Settings()
    metrics = metrics if metrics is not None else Metrics()
    lifecycle = Lifecycle()

    @asynccontextmanager
    async def lifespan(_: Litestar) -> AsyncIterator[None]:
        opened: list[ManagedService] = []
        try:
            for service in services:
                await service.start()
                opened.append(service)
            lifecycle.phase = "ready"
            _log.info("started", settings=settings.public_view())
            yield
        finally:
            # The server calls this after in-flight requests finished (or its graceful
            # shutdown timeout passed): close what we opened, newest first.
            lifecycle.phase = "stopping"
            for service in reversed(opened):
                try:
                    await service.close()
                except Exception:
                    _log.exception("close failed", service=type(service).__name__)
            _log.info("stopped")

    middleware = [http_metrics_config().middleware]
    if settings.rate_limit_per_minute > 0:
        middleware.append(
            RateLimitConfig(
                rate_limit=("minute", settings.rate_limit_per_minute),
                exclude=list(RATE_LIMIT_EXEMPT),
            ).middleware
        )
    cors = (
        CORSConfig(
            allow_origins=list(settings.cors_allow_origins),
            allow_methods=["GET", "POST", "OPTIONS"],
            allow_headers=["Content-Type", "Authorization", "X-Request-ID"],
            expose_headers=[
                "X-Request-ID",
                "RateLimit-Limit",
                "RateLimit-Remaining",
                "Retry-After",
            ],
        )
        if settings.cors_allow_origins
        else None
    )
    provided = {
        "settings": _constant(settings),
        "metrics": _constant(metrics),
        "lifecycle": _constant(lifecycle),
    }
    provided.update({name: _constant(value) for name, value in (dependencies or {}).items()})
    app = Litestar(
        route_handlers=[
            healthz,
            healthz_head,
            readyz,
            readyz_head,
            metrics_endpoint,
            *route_handlers,
        ],
        exception_handlers=EXCEPTION_HANDLERS,
        openapi_config=openapi_config(),
        lifespan=[lifespan],
        after_exception=[log_unexpected],
        before_request=guard_request,
        middleware=middleware,
        cors_config=cors,
        dependencies=provided,
        request_max_body_size=settings.max_request_body_bytes,
        state=State(
            {
                **(dependencies or {}),
                "settings": settings,
                "metrics": metrics,
                "lifecycle": lifecycle,
            }
        ),
        logging_config=None,
    )
    return wrap_app(app, forwarded_allow_ips=settings.forwarded_allow_ips)
