"""The service's own per-request cost, without a network: the Litestar app called as an ASGI
callable in process, and one access-log line.

    python bench/bench_edge.py [--repeat 1500]

Prints the mean time of ``GET /healthz`` and of ``POST /v1/recommendations`` answered from the
answer cache (the five bodies of ``bench_recommend.py`` repeat, so after the first round no
request is planned: what is left is decoding, guards, dependency injection, JSON encoding of the
answer, metrics and the access log), and of one ``info`` line through the configured logging
(JSON to /dev/null). ``bench_http.py`` measures the same over HTTP.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import typer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "service"))
sys.path.insert(0, str(ROOT / "bench"))

from bench_http import bodies  # noqa: E402
from gpu_advisor.asgi import build  # noqa: E402
from gpu_advisor.logs import configure_logging, get_logger  # noqa: E402
from gpu_advisor.settings import Settings  # noqa: E402

Message = MutableMapping[str, Any]


def http_scope(method: str, path: str, body: bytes) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"bench"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }


async def measure(repeat: int) -> None:
    with open(os.devnull, "w") as sink:
        app = build(Settings.from_env({"GPU_ADVISOR_RATE_LIMIT_PER_MINUTE": "0"}), {})
        configure_logging("info", "json", stream=sink)  # after build(), which sets stdout
        started = asyncio.Event()
        lifespan: asyncio.Queue[Message] = asyncio.Queue()
        await lifespan.put({"type": "lifespan.startup"})

        async def lifespan_send(message: Message) -> None:
            if message["type"] == "lifespan.startup.complete":
                started.set()

        task = asyncio.create_task(
            app({"type": "lifespan", "asgi": {"version": "3.0"}}, lifespan.get, lifespan_send)  # type: ignore[arg-type]
        )
        await started.wait()

        async def call(method: str, path: str, body: bytes = b"") -> int:
            delivered = False
            status = 0

            async def receive() -> Message:
                nonlocal delivered
                if not delivered:
                    delivered = True
                    return {"type": "http.request", "body": body, "more_body": False}
                await asyncio.sleep(3600)
                return {"type": "http.disconnect"}

            async def send(message: Message) -> None:
                nonlocal status
                if message["type"] == "http.response.start":
                    status = message["status"]

            await app(http_scope(method, path, body), receive, send)  # type: ignore[arg-type]
            return status

        payloads = bodies()
        for body in payloads:  # plans each once: the answer cache holds them afterwards
            assert await call("POST", "/v1/recommendations", body) == 200
        for label, method, path, sent in (
            ("GET /healthz", "GET", "/healthz", [b""]),
            (
                "POST /v1/recommendations (answer cache hit)",
                "POST",
                "/v1/recommendations",
                payloads,
            ),
        ):
            t0 = time.perf_counter()
            for _ in range(repeat):
                for body in sent:
                    assert await call(method, path, body) == 200
            mean = (time.perf_counter() - t0) / (repeat * len(sent))
            print(f"{label:<46} {mean * 1e6:8.1f} us per request")
        log = get_logger("gpu_advisor.access")
        t0 = time.perf_counter()
        for _ in range(repeat * 10):
            log.info("request", method="POST", path="/v1/recommendations", status=200)
        mean = (time.perf_counter() - t0) / (repeat * 10)
        print(f"{'one access-log line (info, JSON)':<46} {mean * 1e6:8.1f} us")
        await lifespan.put({"type": "lifespan.shutdown"})
        await task


def main(repeat: int = 1500) -> None:
    """Run the measurements (see the module docstring)."""
    asyncio.run(measure(repeat))


if __name__ == "__main__":
    typer.run(main)
