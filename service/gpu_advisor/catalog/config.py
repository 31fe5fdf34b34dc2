"""Catalog configuration: a plain value the composition root builds (this package never reads
the environment). The ops layer maps ``GPU_ADVISOR_SOURCES``, ``GPU_ADVISOR_SKYPILOT_URL``,
``GPU_ADVISOR_GPUHUNT_URL``, ``GPU_ADVISOR_TABLE_PATH``, ``REDIS_URL`` and
``GPU_ADVISOR_ADMIN_TOKEN`` onto it.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta, Struct

SourceName = Literal["bundled", "skypilot", "gpuhunt", "table"]

# SkyPilot catalog v7 clouds that carry GPU offers (shared/data/skypilot-catalog-v7/README.md).
DEFAULT_SKYPILOT_CLOUDS: tuple[str, ...] = (
    "aws",
    "gcp",
    "lambda",
    "runpod",
    "primeintellect",
    "shadeform",
    "cudo",
    "vast",
    "nebius",
    "seeweb",
    "simplepod",
    "hyperbolic",
    "mithril",
)

DEFAULT_TTLS: dict[str, float] = {
    "bundled": 86400.0,
    "skypilot": 6 * 3600.0,
    "gpuhunt": 6 * 3600.0,
    "table": 300.0,
}

Seconds = Annotated[float, Meta(gt=0, le=7 * 86400)]


class CatalogConfig(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """How the pricing catalog is sourced, cached and refreshed.

    Attributes:
        sources: sources to serve, in order (``bundled``, ``skypilot``, ``gpuhunt``, ``table``).
            Until a configured source has delivered, the bundled snapshot is served.
        skypilot_url: base URL (``https://.../catalogs/v7``) or local directory holding
            ``<cloud>/vms.csv``.
        skypilot_clouds: the clouds fetched from ``skypilot_url``.
        gpuhunt_url: URL or path of a gpuhunt catalog zip.
        table_path: path of an operator's CSV or YAML of offers.
        ttl_seconds: freshness per source; older entries are served stale and refreshed in
            the background.
        last_good_ttl_seconds: how long the last good copy of each source is kept in the cache.
        redis_url: shared cache; None runs the same code on an in-process store.
        key_prefix: namespace and schema version of every cache key.
        refresh_lock_timeout_seconds: the single-flight lock expires after this (a crashed
            holder never blocks refreshes for longer).
        refresh_wait_seconds: how long a replica waits for another's refresh before serving
            what it has.
        revalidate_interval_seconds: how often a replica checks the shared cache for a newer
            catalog version (cheap: one small key per source).
        http_connect_timeout_seconds / http_read_timeout_seconds: per request.
        http_retries: attempts after the first for timeouts, connection errors and 5xx.
        http_backoff_initial_seconds / http_backoff_max_seconds: exponential backoff bounds.
        max_response_bytes: a response (or an unpacked gpuhunt zip) larger than this fails.
        redis_socket_timeout_seconds: a Redis call slower than this counts as a miss.
        redis_retry_interval_seconds: while degraded, how often Redis is pinged.
        admin_token: bearer token for ``POST /v1/catalog/refresh``; None disables the endpoint.
    """

    sources: tuple[SourceName, ...] = ("bundled",)
    skypilot_url: str | None = None
    skypilot_clouds: tuple[str, ...] = DEFAULT_SKYPILOT_CLOUDS
    gpuhunt_url: str | None = None
    table_path: str | None = None
    ttl_seconds: dict[str, float] = msgspec.field(default_factory=lambda: dict(DEFAULT_TTLS))
    last_good_ttl_seconds: Seconds = 7 * 86400.0
    redis_url: str | None = None
    key_prefix: str = "gpu-advisor:v2"
    refresh_lock_timeout_seconds: Seconds = 120.0
    refresh_wait_seconds: Seconds = 60.0
    revalidate_interval_seconds: Seconds = 5.0
    http_connect_timeout_seconds: Seconds = 5.0
    http_read_timeout_seconds: Seconds = 30.0
    http_retries: Annotated[int, Meta(ge=0, le=10)] = 2
    http_backoff_initial_seconds: Annotated[float, Meta(ge=0, le=60)] = 0.5
    http_backoff_max_seconds: Annotated[float, Meta(ge=0, le=600)] = 5.0
    max_response_bytes: Annotated[int, Meta(gt=0)] = 64 * 2**20
    redis_socket_timeout_seconds: Seconds = 0.5
    redis_retry_interval_seconds: Seconds = 2.0
    admin_token: str | None = None

    def ttl_for(self, source: str) -> float:
        """Freshness TTL of a source in seconds (1 hour when not configured)."""
        return float(self.ttl_seconds.get(source, 3600.0))
