"""Prometheus metrics: the service's own series, and the exposition served at ``/metrics``.

HTTP request count and latency per route and status come from Litestar's Prometheus plugin
(:func:`http_metrics_config`, series ``gpu_advisor_http_*``, labelled by path *template* so
cardinality stays bounded). Everything else lives on one :class:`Metrics` object that the
composition root creates and hands to the catalog (as a
:class:`gpu_advisor.observer.CatalogObserver`) and to the request handlers (as a
:class:`gpu_advisor.observer.ComputeObserver`).

Several worker processes: set ``PROMETHEUS_MULTIPROC_DIR`` to an empty writable directory
(prometheus-client's multiprocess mode, see docs/configuration.md), or run one worker per pod.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Final

from litestar.plugins.prometheus import PrometheusConfig
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from gpu_advisor import __version__

NAMESPACE: Final = "gpu_advisor"

# Seconds. Recommendations search every offer x plan; most answer in milliseconds, a large
# catalog with multi-node plans in tenths of a second. The service's budget is "well under a
# second" (common brief), so the buckets are dense below 1 s.
COMPUTE_BUCKETS_SECONDS: Final = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
)  # fmt: skip

# Paths whose requests are not worth a latency series of their own (probes, the scrape).
UNMEASURED_PATHS: Final = ("^/metrics$",)


def http_metrics_config() -> PrometheusConfig:
    """Litestar's Prometheus middleware: ``gpu_advisor_http_requests_total``,
    ``gpu_advisor_http_request_duration_seconds`` and ``..._requests_in_progress``, labelled
    ``method``, ``path`` (the route template, e.g. ``/v1/offers``), ``status_code``."""
    return PrometheusConfig(
        app_name="gpu-advisor",
        prefix=f"{NAMESPACE}_http",
        group_path=True,
        exclude_unhandled_paths=True,
        exclude=list(UNMEASURED_PATHS),
    )


class _CatalogAgeCollector(Collector):
    """``gpu_advisor_catalog_age_seconds{source}``: now minus the source's fetched_at, computed
    at scrape time so it grows between refreshes."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._fetched_at: dict[str, float] = {}
        self._lock = threading.Lock()

    def set(self, source: str, fetched_at_unix_s: float) -> None:
        with self._lock:
            self._fetched_at[source] = fetched_at_unix_s

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            f"{NAMESPACE}_catalog_age_seconds",
            "Seconds since the source's catalog was fetched.",
            labels=["source"],
        )
        now = self._clock()
        with self._lock:
            items = sorted(self._fetched_at.items())
        for source, fetched_at in items:
            family.add_metric([source], max(0.0, now - fetched_at))
        yield family


class Metrics:
    """The service's own Prometheus series on a registry of its own (one per app, so tests can
    build several apps in one process).

    Implements :class:`gpu_advisor.observer.CatalogObserver` and
    :class:`gpu_advisor.observer.ComputeObserver`.

    Args:
        clock: Unix time in seconds; injectable for tests of the catalog age.
        multiprocess_mode: True when ``PROMETHEUS_MULTIPROC_DIR`` is set (the composition root
            decides): the scrape then aggregates every worker's files.
    """

    def __init__(
        self, *, clock: Callable[[], float] = time.time, multiprocess_mode: bool = False
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.multiprocess_mode = multiprocess_mode
        self._answers = Counter(
            f"{NAMESPACE}_answer_cache_requests",
            "Planning requests by endpoint answered from the answer cache (hit) or computed "
            "(miss).",
            labelnames=["endpoint", "result"],
            registry=self.registry,
        )
        self._compute = Histogram(
            f"{NAMESPACE}_compute_seconds",
            "Wall time of one computation (recommendations, estimate, check), in seconds.",
            labelnames=["endpoint"],
            buckets=COMPUTE_BUCKETS_SECONDS,
            registry=self.registry,
        )
        self._offers = Gauge(
            f"{NAMESPACE}_catalog_offers",
            "Normalised offers in the source's current catalog.",
            labelnames=["source"],
            registry=self.registry,
            multiprocess_mode="mostrecent",
        )
        self._fetched_at = Gauge(
            f"{NAMESPACE}_catalog_fetched_timestamp_seconds",
            "Unix time at which the source's current catalog was fetched.",
            labelnames=["source"],
            registry=self.registry,
            multiprocess_mode="mostrecent",
        )
        self._dropped = Counter(
            f"{NAMESPACE}_catalog_rows_dropped",
            "Source rows dropped during normalisation, by reason code.",
            labelnames=["source", "reason"],
            registry=self.registry,
        )
        self._refresh_failures = Counter(
            f"{NAMESPACE}_catalog_refresh_failures",
            "Failed refreshes of a pricing source (the last good copy keeps serving).",
            labelnames=["source"],
            registry=self.registry,
        )
        self._cache = Counter(
            f"{NAMESPACE}_cache_requests",
            "Catalog cache operations by layer (memory, redis) and result (hit, miss, error).",
            labelnames=["layer", "result"],
            registry=self.registry,
        )
        info = Gauge(
            f"{NAMESPACE}_build_info",
            "Always 1; the version label says which build is running.",
            labelnames=["version"],
            registry=self.registry,
            multiprocess_mode="max",
        )
        info.labels(__version__).set(1)
        self._age = _CatalogAgeCollector(clock)
        self.registry.register(self._age)

    # AnswerObserver
    def answer_cache(self, endpoint: str, *, hit: bool) -> None:
        """Count one answer-cache lookup of ``endpoint``."""
        self._answers.labels(endpoint, "hit" if hit else "miss").inc()

    # ComputeObserver
    def observe_compute(self, endpoint: str, seconds: float) -> None:
        """Record one computation of ``endpoint`` that took ``seconds``."""
        self._compute.labels(endpoint).observe(seconds)

    @contextmanager
    def time_compute(self, endpoint: str) -> Iterator[None]:
        """Observe the wall time of the ``with`` block (also when it raises)."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.observe_compute(endpoint, time.perf_counter() - start)

    # CatalogObserver
    def catalog_loaded(self, source: str, *, fetched_at_unix_s: float, offer_count: int) -> None:
        """A source's catalog was loaded: sets offers, fetched-at and the age's reference."""
        self._offers.labels(source).set(offer_count)
        self._fetched_at.labels(source).set(fetched_at_unix_s)
        self._age.set(source, fetched_at_unix_s)

    def rows_dropped(self, source: str, reason: str, count: int) -> None:
        """Add ``count`` dropped rows of ``source`` under ``reason``."""
        self._dropped.labels(source, reason).inc(count)

    def refresh_failed(self, source: str, reason: str) -> None:
        """Count one failed refresh of ``source`` (the reason goes to the log, not a label)."""
        self._refresh_failures.labels(source).inc()

    def cache_hit(self, layer: str) -> None:
        """Count a cache hit in ``layer``."""
        self._cache.labels(layer, "hit").inc()

    def cache_miss(self, layer: str) -> None:
        """Count a cache miss in ``layer``."""
        self._cache.labels(layer, "miss").inc()

    def cache_error(self, layer: str) -> None:
        """Count a failed cache operation in ``layer``."""
        self._cache.labels(layer, "error").inc()

    def cache_degraded(self, layer: str, error: str | None) -> None:
        """Nothing to count: ``/readyz`` and the answers' catalog block show the state, and
        ``cache_error`` counts the failed calls."""

    def exposition(self) -> tuple[bytes, str]:
        """The text exposition for ``GET /metrics`` and its content type.

        One process: the default registry (HTTP series from the Litestar plugin, process and
        GC series) followed by this object's registry. Multiprocess mode: every worker's
        files aggregated by prometheus-client, plus this worker's catalog age.
        """
        if self.multiprocess_mode:
            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
            registry.register(self._age)
            return generate_latest(registry), CONTENT_TYPE_LATEST
        return generate_latest(REGISTRY) + generate_latest(self.registry), CONTENT_TYPE_LATEST
