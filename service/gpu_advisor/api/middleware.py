"""The outermost ASGI layer: request id, security headers and the access log.

It wraps Litestar's whole handler (:func:`wrap_app`), not one route's middleware stack, so it
also sees the responses that never reach a route: 404, 405, 413 (body too large), 429 (rate
limit) and 500.

Request id: a caller's ``X-Request-ID`` is kept when it is sane (1-128 characters from
``A-Za-z0-9._:-``), else a new one is generated. It is bound to every log line of the request
and echoed in the response header.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any, Final

import structlog
from litestar import Litestar
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from gpu_advisor.logs import get_logger

REQUEST_ID_HEADER: Final = "x-request-id"
_SANE_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")

# Every response (OWASP Secure Headers Project, "Best practices" for APIs): no MIME sniffing,
# never framed, no referrer leaks. API answers are not cacheable (they depend on live prices).
SECURITY_HEADERS: Final[tuple[tuple[bytes, bytes], ...]] = (
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
)
# JSON APIs load nothing; the interactive docs under /schema load Swagger UI's scripts and
# styles, so they only get the framing rule.
CSP_API: Final = b"default-src 'none'; frame-ancestors 'none'"
CSP_DOCS: Final = b"frame-ancestors 'none'"
# Answers and problems depend on live prices, as do their text tables: never cached.
_NO_STORE_TYPES: Final = (b"application/json", b"application/problem+json", b"text/plain")
# Probes and scrapes are logged at debug level: every few seconds per pod otherwise.
_QUIET_PATHS: Final = frozenset({"/healthz", "/readyz", "/metrics"})

UNMATCHED_PATH_CHARS: Final = 200
"""The most of a path no route matched that the access log keeps."""

_log = get_logger("gpu_advisor.access")

# Plain ASGI shapes (Litestar's Scope union has no lifespan member, which this layer passes on).
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def request_id_from(headers: Iterable[tuple[bytes, bytes]]) -> str:
    """The caller's ``X-Request-ID`` when sane, else a fresh UUID4 (32 hex digits)."""
    for name, value in headers:
        if name.lower() == REQUEST_ID_HEADER.encode():
            candidate = value.decode("latin-1")
            if _SANE_REQUEST_ID.match(candidate):
                return candidate
            break
    return uuid.uuid4().hex


class RequestContextMiddleware:
    """Pure ASGI middleware; see the module docstring."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = request_id_from(scope["headers"])
        scope.setdefault("state", {})["request_id"] = request_id
        path: str = scope["path"]
        started = time.perf_counter()
        status = 500
        is_docs = path == "/schema" or path.startswith("/schema/")

        async def send_with_headers(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                extra = [(n, v) for n, v in SECURITY_HEADERS if n not in present]
                if b"content-security-policy" not in present:
                    extra.append((b"content-security-policy", CSP_DOCS if is_docs else CSP_API))
                content_type = next((v for n, v in headers if n.lower() == b"content-type"), b"")
                if b"cache-control" not in present and content_type.startswith(_NO_STORE_TYPES):
                    extra.append((b"cache-control", b"no-store"))
                extra.append((REQUEST_ID_HEADER.encode(), request_id.encode()))
                message = {**message, "headers": headers + extra}
            await send(message)

        with structlog.contextvars.bound_contextvars(request_id=request_id):
            try:
                await self.app(scope, receive, send_with_headers)
            finally:
                # The route template; a path no route matched (404) is logged as sent, cut at
                # UNMATCHED_PATH_CHARS so a client cannot write long lines into the log.
                route = scope.get("path_template") or path[:UNMATCHED_PATH_CHARS]
                fields: dict[str, Any] = {
                    "method": scope["method"],
                    "path": route,
                    "status": status,
                    "duration_ms": round((time.perf_counter() - started) * 1000, 3),
                    "client": (scope.get("client") or ("", 0))[0],
                }
                if path in _QUIET_PATHS and status < 400:
                    _log.debug("request", **fields)
                else:
                    _log.info("request", **fields)


def wrap_app(app: Litestar, *, forwarded_allow_ips: str = "127.0.0.1") -> Litestar:
    """Put the outer layers around Litestar's outermost handler: X-Forwarded-For from trusted
    proxies (uvicorn's ``ProxyHeadersMiddleware``, so the client address is right under any
    server, which the per-client rate limit needs), then :class:`RequestContextMiddleware`.

    ``Litestar.asgi_handler`` is the exception-wrapped router that ``Litestar.__call__`` runs
    for every HTTP request, matched route or not; app-level ``middleware=`` only runs for
    matched routes (Litestar 2.x ``Litestar._create_asgi_handler``).
    """
    trusted = [host.strip() for host in forwarded_allow_ips.split(",") if host.strip()]
    inner = ProxyHeadersMiddleware(app.asgi_handler, trusted_hosts=trusted)  # type: ignore[arg-type]
    app.asgi_handler = RequestContextMiddleware(inner)  # type: ignore[assignment,arg-type]
    return app
