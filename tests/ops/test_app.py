"""The HTTP shell around every route: headers, request id, limits, CORS, lifespan, logs."""

from __future__ import annotations

import io
import json
import re
import warnings
from typing import Any

import msgspec
import numpy as np
import pytest
from litestar import Request, get, post
from litestar.di import NamedDependency
from litestar.params import JSONBody
from litestar.testing import TestClient

from gpu_advisor.api.app import create_app
from gpu_advisor.logs import configure_logging, get_logger
from gpu_advisor.settings import Settings

TOKEN = "admin-token-that-must-never-be-logged-42"
SECURITY = {
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
}


@post("/test/echo", sync_to_thread=False)
def echo(data: JSONBody[dict[str, Any]]) -> dict[str, int]:
    return {"keys": len(data)}


@get("/test/boom", sync_to_thread=False)
def boom() -> dict[str, str]:
    raise RuntimeError("internal detail: /srv/secret/path")


def app_with(**settings: Any) -> Any:
    return create_app(Settings(**settings), route_handlers=[echo, boom])


def assert_security_headers(headers: Any) -> None:
    for name, value in SECURITY.items():
        assert headers[name] == value, name
    assert "frame-ancestors 'none'" in headers["content-security-policy"]


def test_security_headers_on_success_and_on_every_kind_of_error() -> None:
    with TestClient(app_with(max_request_body_bytes=1024, rate_limit_per_minute=3)) as client:
        ok = client.get("/healthz")
        assert ok.status_code == 200
        assert_security_headers(ok.headers)
        assert ok.headers["content-security-policy"] == "default-src 'none'; frame-ancestors 'none'"
        assert ok.headers["cache-control"] == "no-store"

        not_found = client.get("/no/such/route")  # never reaches a route's middleware
        assert not_found.status_code == 404
        assert_security_headers(not_found.headers)
        assert not_found.headers["cache-control"] == "no-store"

        failed = client.get("/test/boom")  # 1st rate-limited request of the minute
        assert failed.status_code == 500
        assert_security_headers(failed.headers)
        assert "/srv/secret" not in failed.text

        too_large = client.post("/test/echo", content=b'{"a": "' + b"x" * 2000 + b'"}')
        assert too_large.status_code == 413
        assert_security_headers(too_large.headers)

        client.post("/test/echo", json={})  # 3rd (the 413 counted as the 2nd)
        limited = client.post("/test/echo", json={})
        assert limited.status_code == 429
        assert_security_headers(limited.headers)
        # RFC 9110 10.2.3 delay-seconds: when the minute's window resets (1..60 s from now).
        assert 1 <= int(limited.headers["retry-after"]) <= 60


def test_docs_page_may_load_its_scripts_but_is_never_framed() -> None:
    with TestClient(app_with()) as client:
        page = client.get("/schema/swagger")
        assert page.status_code == 200
        assert page.headers["content-security-policy"] == "frame-ancestors 'none'"
        assert page.headers["x-frame-options"] == "DENY"


def test_request_id_is_kept_when_sane_and_generated_otherwise() -> None:
    with TestClient(app_with()) as client:
        kept = client.get("/healthz", headers={"X-Request-ID": "ci-run-17.step:3"})
        assert kept.headers["x-request-id"] == "ci-run-17.step:3"
        for bad in ("has space", "x" * 129, 'quote"', "<script>"):
            replaced = client.get("/healthz", headers={"X-Request-ID": bad})
            assert re.fullmatch(r"[0-9a-f]{32}", replaced.headers["x-request-id"]), bad
        first = client.get("/healthz").headers["x-request-id"]
        second = client.get("/healthz").headers["x-request-id"]
        assert first != second


def test_body_limit_comes_from_the_settings() -> None:
    with TestClient(app_with(max_request_body_bytes=4096)) as client:
        body = {"k": "v" * 3000}  # about 3 KB of JSON: under 4096 bytes
        assert client.post("/test/echo", json=body).status_code == 201
        body = {"k": "v" * 5000}  # over 4096 bytes
        response = client.post("/test/echo", json=body)
        assert response.status_code == 413
        assert response.headers["content-type"].startswith("application/problem+json")
        [error] = response.json()["errors"]  # what to fix: the body
        assert error["source"] == "body"


def test_rate_limit_is_per_minute_and_spares_probes_and_metrics() -> None:
    with TestClient(app_with(rate_limit_per_minute=3)) as client:
        codes = [client.post("/test/echo", json={}).status_code for _ in range(4)]
        assert codes == [201, 201, 201, 429]
        for path in ("/healthz", "/readyz", "/metrics"):
            assert {client.get(path).status_code for _ in range(6)} == {200}, path


def test_rate_limit_zero_switches_it_off() -> None:
    with TestClient(app_with(rate_limit_per_minute=0)) as client:
        assert {client.post("/test/echo", json={}).status_code for _ in range(20)} == {201}


def test_cors_is_off_by_default_and_on_for_listed_origins() -> None:
    preflight = {
        "Origin": "https://app.example",
        "Access-Control-Request-Method": "POST",
    }
    with TestClient(app_with()) as client:
        response = client.options("/test/echo", headers=preflight)
        assert "access-control-allow-origin" not in response.headers
    with TestClient(app_with(cors_allow_origins=("https://app.example",))) as client:
        response = client.options("/test/echo", headers=preflight)
        assert response.headers["access-control-allow-origin"] == "https://app.example"
        other = client.get("/healthz", headers={"Origin": "https://evil.example"})
        assert "access-control-allow-origin" not in other.headers


class RecordingService:
    def __init__(self, name: str, journal: list[str]) -> None:
        self.name, self.journal = name, journal

    async def start(self) -> None:
        self.journal.append(f"start {self.name}")

    async def close(self) -> None:
        self.journal.append(f"close {self.name}")


def test_lifespan_opens_services_in_order_and_closes_them_in_reverse() -> None:
    journal: list[str] = []
    services = [RecordingService("cache", journal), RecordingService("catalog", journal)]
    app = create_app(Settings(), services=services)
    with TestClient(app) as client:
        assert journal == ["start cache", "start catalog"]
        ready = client.get("/readyz")
        assert ready.status_code == 200
        assert ready.json()["status"] == "ready"
    assert journal == ["start cache", "start catalog", "close catalog", "close cache"]


def test_readyz_is_503_until_started() -> None:
    client = TestClient(create_app(Settings()))  # no lifespan run: still starting
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["status"] == "starting"
    head = client.head("/readyz")
    assert (head.status_code, head.content) == (503, b"")


def test_probes_answer_head_like_get_without_a_body() -> None:
    with TestClient(app_with(rate_limit_per_minute=1)) as client:
        for path in ("/healthz", "/readyz"):
            for _ in range(3):  # probes are never rate limited, HEAD included
                response = client.head(path)
                assert (response.status_code, response.content) == (200, b""), path
                assert response.headers["content-length"] == "0"
                assert_security_headers(response.headers)


def test_dependencies_reach_handlers_by_name() -> None:
    @get("/test/dep", sync_to_thread=False)
    def dep(catalog: NamedDependency[str], settings: NamedDependency[Settings]) -> dict[str, Any]:
        return {"catalog": catalog, "port": settings.port}

    app = create_app(Settings(port=8123), route_handlers=[dep], dependencies={"catalog": "C"})
    with TestClient(app) as client:
        assert client.get("/test/dep").json() == {"catalog": "C", "port": 8123}


def log_lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]


def test_logs_have_request_ids_and_no_secrets_or_bodies(log_stream: io.StringIO) -> None:
    body_marker = "body-field-value-never-logged-7f3a"
    settings = Settings(admin_token=TOKEN, redis_url="redis://app:redis-pass-9d2c@redis:6379/0")
    app = create_app(settings, route_handlers=[echo, boom])
    with TestClient(app) as client:
        client.post(
            "/test/echo",
            json={"workload": {"note": body_marker}},
            headers={"X-Request-ID": "req-42", "Authorization": f"Bearer {TOKEN}"},
        )
        client.get("/test/boom", headers={"X-Request-ID": "req-43"})
    text = log_stream.getvalue()
    assert TOKEN not in text
    assert "redis-pass-9d2c" not in text
    assert body_marker not in text
    lines = log_lines(log_stream)
    access = [line for line in lines if line["event"] == "request"]
    assert {(a["request_id"], a["path"], a["status"]) for a in access} >= {
        ("req-42", "/test/echo", 201),
        ("req-43", "/test/boom", 500),
    }
    errors = [line for line in lines if line["event"] == "unhandled exception"]
    assert len(errors) == 1
    assert errors[0]["request_id"] == "req-43"
    assert errors[0]["level"] == "error"
    assert "RuntimeError" in json.dumps(errors[0]["exception"])
    assert all({"timestamp", "level", "event", "logger"} <= line.keys() for line in lines)
    # the service's own lines name their logger as the libraries' (stdlib) lines do
    assert {a["logger"] for a in access} == {"gpu_advisor.access"}
    assert errors[0]["logger"] == "gpu_advisor.app"


def test_settings_are_logged_at_start_without_secrets(log_stream: io.StringIO) -> None:
    with TestClient(create_app(Settings(admin_token=TOKEN))):
        pass
    started = [line for line in log_lines(log_stream) if line["event"] == "started"]
    assert len(started) == 1
    assert started[0]["settings"]["admin_token"] == "***"
    assert TOKEN not in log_stream.getvalue()
    assert msgspec.json.encode(Settings(admin_token=TOKEN).public_view()).count(b"***") == 1


def test_unset_admin_token_is_logged_as_null_not_masked(log_stream: io.StringIO) -> None:
    with TestClient(create_app(Settings(admin_token=None))):
        pass
    started = [line for line in log_lines(log_stream) if line["event"] == "started"]
    assert started[0]["settings"]["admin_token"] is None


@post("/test/explode", sync_to_thread=False)
def explode(request: Request[Any, Any, Any], data: JSONBody[dict[str, Any]]) -> None:
    # Frame locals hold the request (its headers) and the decoded body when this raises.
    headers = dict(request.headers)
    raise LookupError(f"unexpected: {len(headers)} headers, {len(data)} fields")


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_unexpected_exception_logs_no_locals_headers_or_body(
    log_stream: io.StringIO, fmt: str
) -> None:
    bearer = "bearer-marker-token-5b1e9c"
    cookie = "cookie-marker-value-0d4f"
    body_marker = "body-marker-string-a77c"
    configure_logging("debug", fmt, stream=log_stream)
    with TestClient(create_app(Settings(), route_handlers=[explode])) as client:
        response = client.post(
            "/test/explode",
            json={"note": body_marker},
            headers={"Authorization": f"Bearer {bearer}", "Cookie": f"session={cookie}"},
        )
    assert response.status_code == 500
    text = log_stream.getvalue()
    assert "unhandled exception" in text
    assert "LookupError" in text  # the traceback is there...
    assert "explode" in text  # ...with its frames
    for secret in (bearer, cookie, body_marker):
        assert secret not in text, secret


def test_warnings_are_log_lines_of_the_same_shape(log_stream: io.StringIO) -> None:
    # A numpy overflow (or any Python warning) must not print raw text between the JSON
    # lines: it is one JSON line from the "py.warnings" logger.
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        np.multiply(np.float64(1e308), 10.0)
    [line] = [entry for entry in log_lines(log_stream) if entry["logger"] == "py.warnings"]
    assert line["level"] == "warning"
    assert "RuntimeWarning: overflow encountered in multiply" in line["event"]
    assert log_stream.getvalue().count("\n") == len(log_lines(log_stream))


def test_an_unmatched_path_is_logged_cut_and_without_its_query(log_stream: io.StringIO) -> None:
    with TestClient(create_app(Settings())) as client:
        response = client.get("/nope/" + "x" * 1000, params={"token": "query-secret-31f"})
    assert response.status_code == 404
    [access] = [line for line in log_lines(log_stream) if line["event"] == "request"]
    assert access["status"] == 404
    assert access["path"] == ("/nope/" + "x" * 1000)[:200]
    # (the test client's own httpx lines quote the URL it sent; the service's never do)
    service_lines = [line for line in log_lines(log_stream) if line["logger"] != "httpx"]
    assert "query-secret-31f" not in json.dumps(service_lines)


def test_a_value_msgspec_cannot_encode_never_fails_the_logging_code(
    log_stream: io.StringIO,
) -> None:
    # A file name with a non-UTF-8 byte decodes (surrogateescape) to a lone surrogate, which
    # msgspec refuses: the line still goes out (json.dumps escapes it), as JSON, and the
    # caller goes on.
    path = b"/tmp/offers-\xff.csv".decode("utf-8", "surrogateescape")
    get_logger("gpu_advisor.test").info("table", path=path, count=3)
    [line] = [entry for entry in log_lines(log_stream) if entry["event"] == "table"]
    assert line["path"] == path
    assert line["count"] == 3


def test_url_query_values_are_masked_in_logs(log_stream: io.StringIO) -> None:
    # A presigned catalog URL carries its credentials in the query string; a refresh error
    # quoting the URL must not write them into the log (user:password@ is masked as well).
    reason = (
        "HTTP 403 from https://bucket.s3.amazonaws.com/catalog.zip"
        "?X-Amz-Credential=AKIAEXAMPLE&X-Amz-Signature=f00dfeed"
    )
    get_logger("gpu_advisor.catalog").warning(
        "catalog.refresh_failed", source="gpuhunt", reason=reason, settings={"url": reason}
    )
    [line] = [
        entry for entry in log_lines(log_stream) if entry["event"] == "catalog.refresh_failed"
    ]
    text = json.dumps(line)
    for secret in ("AKIAEXAMPLE", "f00dfeed"):
        assert secret not in text
    assert line["reason"] == (
        "HTTP 403 from https://bucket.s3.amazonaws.com/catalog.zip"
        "?X-Amz-Credential=***&X-Amz-Signature=***"
    )
