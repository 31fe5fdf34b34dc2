"""The HTTP shell: routes, error mapping and the application's lifespan.

``create_app`` receives everything it needs (settings, catalog service, GPU table, model
presets) from the composition root (:mod:`gpu_advisor.asgi`); nothing here reads the
environment.
"""

from __future__ import annotations

from typing import Any

from litestar import Litestar, get
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import SwaggerRenderPlugin

from gpu_advisor import __version__
from gpu_advisor.api.problems import EXCEPTION_HANDLERS


@get("/healthz", sync_to_thread=False, tags=["operations"], summary="Liveness")
def healthz() -> dict[str, str]:
    """Liveness: the process answers. Does not touch Redis or sources."""
    return {"status": "ok"}


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


def create_app(**kwargs: Any) -> Litestar:
    """Build the application (the composition root passes its dependencies)."""
    return Litestar(
        route_handlers=[healthz],
        exception_handlers=EXCEPTION_HANDLERS,
        openapi_config=openapi_config(),
        **kwargs,
    )
