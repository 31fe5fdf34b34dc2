"""Fixtures for the pricing tests: a local HTTP server over a directory, Redis stores."""

from __future__ import annotations

import os
import threading
from collections import Counter
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.shared_data import DATA_DIR

SHARED_DATA = DATA_DIR
SKYPILOT_DIR = SHARED_DATA / "skypilot-catalog-v7"
REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/15")


class CountingServer:
    """A ThreadingHTTPServer on 127.0.0.1 serving a directory; counts GETs per path and can be
    switched to fail (status), stall (seconds) or send fixed bytes."""

    def __init__(self, directory: Path) -> None:
        self.requests: Counter[str] = Counter()
        self.fail_status: int | None = None
        self.stall_seconds: float = 0.0
        self.override: bytes | None = None
        owner = self

        class Handler(SimpleHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                return

            def do_GET(self) -> None:
                owner.requests[self.path] += 1
                if owner.stall_seconds:
                    threading.Event().wait(owner.stall_seconds)
                if owner.fail_status is not None:
                    self.send_error(owner.fail_status)
                    return
                if owner.override is not None:
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(owner.override)))
                    self.end_headers()
                    self.wfile.write(owner.override)
                    return
                super().do_GET()

        self.httpd = ThreadingHTTPServer(
            ("127.0.0.1", 0), partial(Handler, directory=str(directory))
        )
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> CountingServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def skypilot_server() -> Iterator[CountingServer]:
    server = CountingServer(SKYPILOT_DIR).start()
    yield server
    server.stop()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
