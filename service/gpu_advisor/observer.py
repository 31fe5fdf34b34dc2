"""What the catalog and the request handlers report about themselves, without knowing how.

The pricing catalog and the recommendation handlers call these methods; the composition root
passes in :class:`gpu_advisor.metrics.Metrics` (Prometheus), tests and the CLI pass
:data:`NULL_OBSERVER`. Keeping the protocols here means the catalog package never imports
``prometheus_client``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Final, Protocol


class CatalogObserver(Protocol):
    """Events of the pricing catalog and its cache."""

    def catalog_loaded(self, source: str, *, fetched_at_unix_s: float, offer_count: int) -> None:
        """A source's catalog was (re)loaded: when the source produced it (Unix seconds, UTC)
        and how many normalised offers it holds."""

    def rows_dropped(self, source: str, reason: str, count: int) -> None:
        """``count`` rows of ``source`` were dropped for ``reason`` (a reason code)."""

    def refresh_failed(self, source: str, reason: str) -> None:
        """A refresh of ``source`` failed for ``reason`` (the last good copy keeps serving)."""

    def cache_hit(self, layer: str) -> None:
        """A cache read found a value. ``layer``: ``memory`` or ``redis``."""

    def cache_miss(self, layer: str) -> None:
        """A cache read found nothing."""

    def cache_error(self, layer: str) -> None:
        """A cache operation failed (Redis unreachable, timeout, corrupt entry)."""

    def cache_degraded(self, layer: str, error: str | None) -> None:
        """The shared cache ``layer`` became unreachable (``error``: why), or reachable again
        (``error`` None). Called on each change of state, not on every failed call."""


class AnswerObserver(Protocol):
    """The advisor's answer cache."""

    def answer_cache(self, endpoint: str, *, hit: bool) -> None:
        """A request to ``endpoint`` (``recommendations``, ``estimate``, ``check``) was answered
        from the answer cache (``hit``) or had to be computed."""


class ComputeObserver(Protocol):
    """Time spent computing answers (recommendations, estimates, checks)."""

    def observe_compute(self, endpoint: str, seconds: float) -> None:
        """One computation for ``endpoint`` (``recommendations``, ``estimate``, ``check``)
        took ``seconds`` of wall time."""

    def time_compute(self, endpoint: str) -> AbstractContextManager[None]:
        """``with observer.time_compute("recommendations"): ...`` observes the block."""


class NullObserver:
    """Discards every event (CLI, tests, a catalog used outside the service)."""

    def catalog_loaded(self, source: str, *, fetched_at_unix_s: float, offer_count: int) -> None:
        """Discard."""

    def rows_dropped(self, source: str, reason: str, count: int) -> None:
        """Discard."""

    def refresh_failed(self, source: str, reason: str) -> None:
        """Discard."""

    def cache_hit(self, layer: str) -> None:
        """Discard."""

    def cache_miss(self, layer: str) -> None:
        """Discard."""

    def cache_error(self, layer: str) -> None:
        """Discard."""

    def cache_degraded(self, layer: str, error: str | None) -> None:
        """Discard."""

    def answer_cache(self, endpoint: str, *, hit: bool) -> None:
        """Discard."""

    def observe_compute(self, endpoint: str, seconds: float) -> None:
        """Discard."""

    @contextmanager
    def time_compute(self, endpoint: str) -> Iterator[None]:
        """Run the block, time nothing."""
        yield


NULL_OBSERVER: Final = NullObserver()


class LoggingCatalogObserver:
    """A :class:`CatalogObserver` that forwards every event to ``inner`` (the metrics) and
    also writes the events an operator must see in the log: a source's refresh failing
    (warning, with the reason) and the shared cache going away or coming back (warning /
    info). The service wires it; the CLI keeps :data:`NULL_OBSERVER`, so its output has no
    log lines."""

    def __init__(self, inner: CatalogObserver, log: Any) -> None:
        self._inner = inner
        self._log = log

    def catalog_loaded(self, source: str, *, fetched_at_unix_s: float, offer_count: int) -> None:
        """Forward."""
        self._inner.catalog_loaded(
            source, fetched_at_unix_s=fetched_at_unix_s, offer_count=offer_count
        )

    def rows_dropped(self, source: str, reason: str, count: int) -> None:
        """Forward."""
        self._inner.rows_dropped(source, reason, count)

    def refresh_failed(self, source: str, reason: str) -> None:
        """Forward and log a warning."""
        self._inner.refresh_failed(source, reason)
        self._log.warning("catalog.refresh_failed", source=source, reason=reason)

    def cache_hit(self, layer: str) -> None:
        """Forward."""
        self._inner.cache_hit(layer)

    def cache_miss(self, layer: str) -> None:
        """Forward."""
        self._inner.cache_miss(layer)

    def cache_error(self, layer: str) -> None:
        """Forward."""
        self._inner.cache_error(layer)

    def cache_degraded(self, layer: str, error: str | None) -> None:
        """Forward and log: a warning when the cache goes away, info when it is back."""
        self._inner.cache_degraded(layer, error)
        if error is None:
            self._log.info("cache.recovered", backend=layer)
        else:
            self._log.warning("cache.degraded", backend=layer, error=error, serving="from memory")
