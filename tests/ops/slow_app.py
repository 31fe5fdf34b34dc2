"""An ASGI factory for the graceful-shutdown test: the real app plus a slow route and a service
that writes a marker file when the lifespan closes it. Run as a server target, never imported
by the suite itself."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from litestar import Litestar, get

from gpu_advisor.api.app import create_app
from gpu_advisor.settings import Settings


@get("/test/slow")
async def slow() -> dict[str, str]:
    await asyncio.sleep(float(os.environ["SLOW_SECONDS"]))
    return {"status": "finished"}


class MarkerService:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    async def start(self) -> None:
        self.marker.write_text("started", encoding="utf-8")

    async def close(self) -> None:
        self.marker.write_text("closed", encoding="utf-8")


def create() -> Litestar:
    marker = Path(os.environ["MARKER_FILE"])
    return create_app(Settings(), services=[MarkerService(marker)], route_handlers=[slow])
