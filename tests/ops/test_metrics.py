"""GET /metrics: HTTP series from the Litestar plugin and the service's own series."""

from __future__ import annotations

import json
from pathlib import Path

from litestar.testing import TestClient
from prometheus_client.parser import text_string_to_metric_families

from gpu_advisor.api.app import create_app
from gpu_advisor.asgi import build
from gpu_advisor.metrics import Metrics
from gpu_advisor.observer import NULL_OBSERVER, AnswerObserver, CatalogObserver, ComputeObserver
from gpu_advisor.settings import Settings

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mixtral-8x7b-serving.json"


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return out


def value(text: str, name: str, **labels: str) -> float:
    matches = [v for (n, ls), v in samples(text).items() if n == name and set(labels.items()) <= ls]
    assert len(matches) == 1, (name, labels, matches)
    return matches[0]


def test_metrics_expose_http_and_service_series_after_a_few_requests() -> None:
    now = 1_000_000.0
    metrics = Metrics(clock=lambda: now)
    with TestClient(create_app(Settings(), metrics=metrics)) as client:
        before = client.get("/metrics").text
        for _ in range(3):
            assert client.get("/healthz").status_code == 200
        client.get("/readyz")
        metrics.observe_compute("recommendations", 0.02)
        with metrics.time_compute("estimate"):
            pass
        metrics.catalog_loaded("skypilot", fetched_at_unix_s=now - 600, offer_count=1234)
        metrics.rows_dropped("skypilot", "price_not_positive", 7)
        metrics.refresh_failed("gpuhunt", "http 503")
        metrics.cache_hit("redis")
        metrics.cache_hit("redis")
        metrics.cache_miss("memory")
        metrics.cache_error("redis")
        response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/plain; version=1.0.0; charset=utf-8"
    text = response.text

    healthz = {"method": "GET", "path": "/healthz", "status_code": "200"}
    # The HTTP series live in the process-wide registry: compare with the scrape before.
    seen_before = sum(
        v
        for (n, ls), v in samples(before).items()
        if n == "gpu_advisor_http_requests_total" and set(healthz.items()) <= ls
    )
    assert value(text, "gpu_advisor_http_requests_total", **healthz) == seen_before + 3
    assert value(text, "gpu_advisor_http_request_duration_seconds_count", **healthz) >= 3
    assert value(text, "gpu_advisor_compute_seconds_count", endpoint="recommendations") == 1
    assert value(text, "gpu_advisor_compute_seconds_sum", endpoint="recommendations") == 0.02
    assert value(text, "gpu_advisor_compute_seconds_count", endpoint="estimate") == 1
    assert value(text, "gpu_advisor_catalog_offers", source="skypilot") == 1234
    assert (
        value(text, "gpu_advisor_catalog_age_seconds", source="skypilot") == 600
    )  # now - (now - 600)
    assert (
        value(text, "gpu_advisor_catalog_fetched_timestamp_seconds", source="skypilot") == now - 600
    )
    assert (
        value(
            text,
            "gpu_advisor_catalog_rows_dropped_total",
            source="skypilot",
            reason="price_not_positive",
        )
        == 7
    )
    assert value(text, "gpu_advisor_catalog_refresh_failures_total", source="gpuhunt") == 1
    assert value(text, "gpu_advisor_cache_requests_total", layer="redis", result="hit") == 2
    assert value(text, "gpu_advisor_cache_requests_total", layer="memory", result="miss") == 1
    assert value(text, "gpu_advisor_cache_requests_total", layer="redis", result="error") == 1
    assert value(text, "gpu_advisor_build_info") == 1


def test_catalog_age_grows_between_scrapes() -> None:
    clock = [5_000.0]
    metrics = Metrics(clock=lambda: clock[0])
    metrics.catalog_loaded("bundled", fetched_at_unix_s=4_000.0, offer_count=10)
    first = metrics.exposition()[0].decode()
    clock[0] = 5_060.0
    second = metrics.exposition()[0].decode()
    assert value(first, "gpu_advisor_catalog_age_seconds", source="bundled") == 1_000  # 5000 - 4000
    assert (
        value(second, "gpu_advisor_catalog_age_seconds", source="bundled") == 1_060
    )  # 5060 - 4000


def test_scrapes_are_not_rate_limited_or_counted_as_routes() -> None:
    with TestClient(create_app(Settings(rate_limit_per_minute=1))) as client:
        assert {client.get("/metrics").status_code for _ in range(5)} == {200}
        text = client.get("/metrics").text
    assert 'path="/metrics"' not in text


def test_metrics_and_null_observer_satisfy_the_observer_protocols() -> None:
    observers: list[CatalogObserver] = [Metrics(), NULL_OBSERVER]
    computes: list[ComputeObserver] = [Metrics(), NULL_OBSERVER]
    answers: list[AnswerObserver] = [Metrics(), NULL_OBSERVER]
    for observer in observers:
        observer.catalog_loaded("table", fetched_at_unix_s=0.0, offer_count=0)
        observer.cache_miss("memory")
        observer.cache_degraded("redis", "connection refused")
        observer.refresh_failed("table", "no gpu column")
    for answer in answers:
        answer.answer_cache("estimate", hit=True)
    for compute in computes:
        with compute.time_compute("check"):
            compute.observe_compute("check", 0.001)


def test_catalog_package_does_not_import_prometheus() -> None:
    import ast
    from pathlib import Path

    import gpu_advisor

    root = Path(gpu_advisor.__file__).parent
    for folder in ("catalog", "core"):
        for path in (root / folder).rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                names = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                    if isinstance(node, ast.ImportFrom)
                    else []
                )
                for name in names:
                    assert not name.startswith(("prometheus_client", "gpu_advisor.metrics")), path


def test_answer_cache_hits_and_misses_are_counted_per_endpoint() -> None:
    # Two equal recommendation requests: one miss (planned), then one hit. An estimate: one
    # miss. The app wires its Metrics as the advisor's observer.
    body = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    with TestClient(build(Settings(rate_limit_per_minute=0))) as client:
        for _ in range(2):
            assert client.post("/v1/recommendations", json=body).status_code == 200
        estimate = {"model": body["model"], "workload": body["workload"]}
        assert client.post("/v1/estimate", json=estimate).status_code == 200
        text = client.get("/metrics").text
    series = "gpu_advisor_answer_cache_requests_total"
    assert value(text, series, endpoint="recommendations", result="miss") == 1
    assert value(text, series, endpoint="recommendations", result="hit") == 1
    assert value(text, series, endpoint="estimate", result="miss") == 1
