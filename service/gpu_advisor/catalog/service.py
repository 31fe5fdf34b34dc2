"""The catalog service: sources -> normalised catalog -> cache -> one snapshot per request.

* Start-up never waits on a remote source: the bundled snapshot is loaded first and served
  until a configured source has delivered (from the shared cache or a fetch).
* Each source's normalised catalog is cached as compact msgpack
  (:mod:`gpu_advisor.catalog.codec`: offers grouped by shape, about 70 bytes an offer) under
  ``<prefix>:catalog:<source>`` (TTL = the source's freshness TTL), with a last-good copy
  ``<prefix>:catalog:<source>:last-good`` (kept ``last_good_ttl_seconds``) and a small
  ``<prefix>:catalog:<source>:version`` key (the content hash) so replicas notice a newer
  catalog without downloading it.
* Stale-while-revalidate: requests get the in-process snapshot at once; a background task
  checks the cache every ``revalidate_interval_seconds`` and refreshes stale sources.
* Single flight across replicas: ``SET NX PX`` lock per source, released by token
  (:mod:`gpu_advisor.catalog.cache`); a replica that finds the lock taken waits for the
  holder's result instead of fetching.
* A failed fetch keeps the last good catalog and records the reason in the source status.
* The decoded catalog is kept in process keyed by its content hash: requests never decode,
  and a cache read whose version matches the in-process one is not decoded either.
* Redis errors count as misses and never fail a call; ``cache_degraded`` says so until a
  ping succeeds again (the client reconnects by itself).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import secrets
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Literal

import httpx
import msgspec
from msgspec import Struct

from gpu_advisor.catalog.cache import CatalogStore, MemoryStore, RedisStore, StoreError
from gpu_advisor.catalog.codec import (
    CachedCatalog,
    CacheFormatError,
    decode_catalog,
    encode_catalog,
)
from gpu_advisor.catalog.config import CatalogConfig
from gpu_advisor.catalog.gpu_table import load_gpu_catalog
from gpu_advisor.catalog.http import make_client
from gpu_advisor.catalog.reference import load_network_rules, load_providers
from gpu_advisor.catalog.sources import (
    BundledSource,
    Provenance,
    Source,
    SourceError,
    SourceResult,
    build_sources,
)
from gpu_advisor.core.gpus import GpuCatalog
from gpu_advisor.core.normalize import NormalizeContext, SourceStats
from gpu_advisor.core.offer_query import OfferIndex
from gpu_advisor.core.offers import Offer, ProviderInfo
from gpu_advisor.observer import NULL_OBSERVER, CatalogObserver

__all__ = [
    "CacheHealth",
    "CachedCatalog",
    "CatalogService",
    "CatalogSnapshot",
    "RefreshOutcome",
    "SourceStatus",
    "load_gpu_catalog",
    "load_providers",
]

_POLL_SECONDS = 0.05


class SourceStatus(Struct, frozen=True, kw_only=True):
    """One source's freshness and normalisation counts (``GET /v1/catalog``).

    Attributes:
        name: source name.
        fetched_at: ISO-8601 UTC time its offers were fetched (None: never).
        ttl_seconds: freshness TTL.
        stale: True when older than the TTL, or when the last refresh failed.
        offers: offers served from it.
        fallback: True for the bundled snapshot served only until configured sources arrive.
        version: content hash of its offers.
        rows_in / dropped / corrected / unknown_gpus: the normaliser's counts.
        last_error / last_error_at: why the last refresh failed, when.
        origins: URLs or paths read.
    """

    name: str
    fetched_at: str | None
    ttl_seconds: float
    stale: bool
    offers: int
    fallback: bool = False
    version: str | None = None
    rows_in: int = 0
    dropped: dict[str, int] = {}
    corrected: dict[str, int] = {}
    unknown_gpus: dict[str, int] = {}
    last_error: str | None = None
    last_error_at: str | None = None
    origins: tuple[str, ...] = ()


class CatalogSnapshot(Struct, frozen=True, kw_only=True):
    """The catalog one request sees: immutable, shared by all requests until it changes.

    Attributes:
        version: content hash over the served sources' versions.
        offers: every served offer (sources concatenated in configured order).
        sources: per-source status.
        degraded: True while the shared cache is unreachable (answers come from memory).
    """

    version: str
    offers: tuple[Offer, ...]
    sources: tuple[SourceStatus, ...]
    degraded: bool = False


class CacheHealth(Struct, frozen=True, kw_only=True):
    """For ``/readyz``: ``backend`` redis|memory, ``degraded`` while Redis is unreachable;
    ``last_error`` the last store error seen (kept after recovery, for the record) and
    ``last_error_at`` when it happened (ISO 8601 UTC)."""

    backend: Literal["redis", "memory"]
    degraded: bool
    last_error: str | None = None
    last_error_at: str | None = None
    catalog_version: str = ""


class RefreshOutcome(Struct, frozen=True, kw_only=True):
    """What a refresh did: ``fetched`` sources were fetched here, ``shared`` came from another
    replica's fetch via the cache, ``failed`` kept their last good copy."""

    version: str
    fetched: tuple[str, ...] = ()
    shared: tuple[str, ...] = ()
    failed: dict[str, str] = {}
    sources: tuple[SourceStatus, ...] = ()


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _parse_iso(text: str) -> float:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def content_version(offers: tuple[Offer, ...]) -> str:
    """Content hash of a catalog: sha256 of its msgpack encoding, 16 hex digits."""
    return hashlib.sha256(msgspec.msgpack.encode(offers)).hexdigest()[:16]


class _Local(Struct, kw_only=True):
    entry: CachedCatalog
    last_error: str | None = None
    last_error_at: float | None = None


class CatalogService:
    """Owns sources, the cache store and the in-process snapshot. See the module docstring.

    Args:
        config: catalog configuration.
        gpus: the GPU table (default: the bundled one).
        providers / networks: provider facts and instance network rules (default: bundled).
        sources: source objects by name (default: built from ``config``); tests inject.
        store: the cache store (default: Redis when ``config.redis_url``, else in-process).
        clock: wall clock in seconds (``time.time``).
        observer: told about loads, refresh failures and cache hits/misses/errors (the
            service's Prometheus metrics; nothing by default).
    """

    def __init__(
        self,
        config: CatalogConfig,
        *,
        gpus: GpuCatalog | None = None,
        providers: Mapping[str, ProviderInfo] | None = None,
        sources: Mapping[str, Source] | None = None,
        store: CatalogStore | None = None,
        clock: Callable[[], float] = time.time,
        observer: CatalogObserver | None = None,
    ) -> None:
        self.config = config
        self._observer: CatalogObserver = observer if observer is not None else NULL_OBSERVER
        self.gpus = gpus or load_gpu_catalog()
        self.providers = dict(providers) if providers is not None else load_providers()
        self._clock = clock
        self._client: httpx.AsyncClient | None = None
        if sources is None:
            self._client = make_client(config)
            ctx = NormalizeContext(
                gpus=self.gpus, providers=self.providers, networks=load_network_rules()
            )
            sources = build_sources(config, self._client, ctx)
        self._sources: dict[str, Source] = dict(sources)
        if "bundled" not in self._sources:
            self._sources["bundled"] = BundledSource()
        self._backend: Literal["redis", "memory"] = "redis" if config.redis_url else "memory"
        if store is None:
            store = (
                RedisStore(
                    config.redis_url, socket_timeout_seconds=config.redis_socket_timeout_seconds
                )
                if config.redis_url
                else MemoryStore()
            )
        self._store = store
        self._local: dict[str, _Local] = {}
        self._snapshot = CatalogSnapshot(version="", offers=(), sources=())
        self._degraded = False
        self._store_error: str | None = None
        self._store_error_at: float | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._revalidating = asyncio.Lock()
        self._loop_task: asyncio.Task[None] | None = None
        self._snapshot_versions: list[str] = []
        # One worker thread builds query indexes; a concurrent future can be awaited from any
        # event loop (tests drive the app from a second loop).
        self._index_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="offer-index")
        self._index: tuple[str, Future[OfferIndex]] | None = None

    # --- lifecycle ---------------------------------------------------------------------------

    @property
    def configured(self) -> tuple[str, ...]:
        """Configured source names in order."""
        return tuple(self.config.sources)

    async def start(self) -> None:
        """Load the bundled snapshot, then revalidate in the background (never waits on a
        remote source)."""
        bundled = self._sources["bundled"]
        try:
            result = await bundled.fetch()
            self._adopt("bundled", self._entry_from(result))
        except SourceError as exc:
            self._local.setdefault("bundled", _Local(entry=self._empty("bundled")))
            self._local["bundled"].last_error = str(exc)
        self._rebuild()
        self._loop_task = asyncio.create_task(self._loop())

    async def close(self) -> None:
        """Stop background work and close the HTTP client and the store."""
        tasks = [t for t in (self._loop_task, *self._tasks) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._index_pool.shutdown(wait=False, cancel_futures=True)
        if self._client is not None:
            await self._client.aclose()
        with contextlib.suppress(Exception):
            await self._store.close()

    # --- public API ----------------------------------------------------------------------------

    async def snapshot(self) -> CatalogSnapshot:
        """The current catalog (never raises, never touches Redis or a source)."""
        return self._snapshot

    async def indexed(self) -> tuple[CatalogSnapshot, OfferIndex]:
        """The snapshot and its query index. The index is built once per catalog version in a
        worker thread, started as soon as the version changes; concurrent callers share it."""
        snap = self._snapshot
        return snap, await asyncio.shield(asyncio.wrap_future(self._index_for(snap)))

    def _index_for(self, snap: CatalogSnapshot) -> Future[OfferIndex]:
        building = self._index
        failed = (
            building is not None
            and building[1].done()
            and (building[1].cancelled() or building[1].exception() is not None)
        )
        if building is None or building[0] != snap.version or failed:
            building = (snap.version, self._index_pool.submit(OfferIndex, snap.offers))
            self._index = building
        return building[1]

    @property
    def cache_degraded(self) -> bool:
        return self._degraded

    async def health(self) -> CacheHealth:
        """Cache backend and whether it is degraded. Pings the store each time (a readiness
        probe every few seconds; the Redis client's socket timeouts bound the wait), so Redis
        being unreachable shows here even when no request has needed the cache yet."""
        reachable = await self._store.ping()
        if reachable and self._degraded:
            self._set_degraded(None)
        elif not reachable and not self._degraded:
            self._set_degraded(f"{self._backend} did not answer PING")
        return CacheHealth(
            backend=self._backend,
            degraded=self._degraded,
            last_error=self._store_error,
            last_error_at=_iso(self._store_error_at) if self._store_error_at is not None else None,
            catalog_version=self._snapshot.version,
        )

    async def refresh(self, force: bool = False) -> RefreshOutcome:
        """Refresh the configured sources (``force``: even when fresh). Never raises."""
        fetched: list[str] = []
        shared: list[str] = []
        failed: dict[str, str] = {}
        names = [n for n in self.configured]
        results = await asyncio.gather(*(self._refresh_source(n, force) for n in names))
        for name, outcome in zip(names, results, strict=True):
            if outcome == "fetched":
                fetched.append(name)
            elif outcome == "shared":
                shared.append(name)
            elif outcome.startswith("error:"):
                failed[name] = outcome.removeprefix("error:")
        self._rebuild()
        return RefreshOutcome(
            version=self._snapshot.version,
            fetched=tuple(fetched),
            shared=tuple(shared),
            failed=failed,
            sources=self._snapshot.sources,
        )

    # --- store helpers (errors are misses) -----------------------------------------------------

    def _key(self, name: str, suffix: str = "") -> str:
        return f"{self.config.key_prefix}:catalog:{name}{suffix}"

    def _lock_key(self, name: str) -> str:
        return f"{self.config.key_prefix}:lock:refresh:{name}"

    def _set_degraded(self, error: str | None) -> None:
        degraded = error is not None
        if degraded:
            self._store_error = error
            self._store_error_at = self._clock()
        if degraded != self._degraded:
            self._degraded = degraded
            self._observer.cache_degraded(self._backend, error)

    async def _store_call(self, coro: object) -> object:
        try:
            result = await coro  # type: ignore[misc]
        except StoreError as exc:
            self._set_degraded(str(exc))
            self._observer.cache_error(self._backend)
            return None
        return result

    async def _read_version(self, name: str) -> str | None:
        raw = await self._store_call(self._store.get(self._key(name, ":version")))
        return raw.decode() if isinstance(raw, bytes) else None

    async def _read_entry(self, name: str) -> CachedCatalog | None:
        for suffix in ("", ":last-good"):
            raw = await self._store_call(self._store.get(self._key(name, suffix)))
            if isinstance(raw, bytes):
                try:
                    entry = decode_catalog(raw)
                except CacheFormatError:
                    continue  # a foreign, corrupt or older-layout value: treat as a miss
                self._observer.cache_hit(self._backend)
                return entry
        self._observer.cache_miss(self._backend)
        return None

    async def _write_entry(self, name: str, entry: CachedCatalog) -> None:
        blob = encode_catalog(entry)
        ttl = self.config.ttl_for(name)
        keep = self.config.last_good_ttl_seconds
        await self._store_call(self._store.set(self._key(name), blob, ttl))
        await self._store_call(self._store.set(self._key(name, ":last-good"), blob, keep))
        await self._store_call(
            self._store.set(self._key(name, ":version"), entry.version.encode(), keep)
        )

    # --- state ---------------------------------------------------------------------------------

    def _empty(self, name: str) -> CachedCatalog:
        return CachedCatalog(
            version="",
            stored_at=0.0,
            offers=(),
            stats=SourceStats(),
            provenance=Provenance(source=name, fetched_at=""),
        )

    def _entry_from(self, result: SourceResult) -> CachedCatalog:
        return CachedCatalog(
            version=content_version(result.offers),
            stored_at=self._clock(),
            offers=result.offers,
            stats=result.stats,
            provenance=result.provenance,
        )

    def _adopt(self, name: str, entry: CachedCatalog) -> None:
        fetched = entry.provenance.fetched_at
        self._observer.catalog_loaded(
            name,
            fetched_at_unix_s=_parse_iso(fetched) if fetched else entry.stored_at,
            offer_count=len(entry.offers),
        )
        local = self._local.get(name)
        if local is None:
            self._local[name] = _Local(entry=entry)
        else:
            local.entry = entry
            local.last_error = None
            local.last_error_at = None

    def _is_stale(self, name: str, entry: CachedCatalog) -> bool:
        fetched = _parse_iso(entry.provenance.fetched_at) if entry.provenance.fetched_at else 0.0
        if name == "bundled":
            return False  # a dated snapshot: its date is reported, it is never "refreshed"
        return self._clock() - max(fetched, entry.stored_at) > self.config.ttl_for(name)

    def _has_data(self, name: str) -> bool:
        local = self._local.get(name)
        return local is not None and bool(local.entry.version)

    def _rebuild(self) -> None:
        remote = [n for n in self.configured if n != "bundled"]
        serving = [n for n in self.configured if self._has_data(n)]
        fallback = "bundled" not in self.configured and not any(self._has_data(n) for n in remote)
        if fallback:
            serving = ["bundled", *serving]
        statuses: list[SourceStatus] = []
        for name in [*(["bundled"] if fallback else []), *self.configured]:
            local = self._local.get(name)
            entry = local.entry if local else self._empty(name)
            stats = entry.stats
            failed = local is not None and local.last_error is not None
            statuses.append(
                SourceStatus(
                    name=name,
                    fetched_at=entry.provenance.fetched_at or None,
                    ttl_seconds=self.config.ttl_for(name),
                    stale=(not entry.version) or self._is_stale(name, entry) or failed,
                    offers=len(entry.offers) if name in serving else 0,
                    fallback=fallback and name == "bundled",
                    version=entry.version or None,
                    rows_in=stats.rows_in,
                    dropped=stats.dropped,
                    corrected=stats.corrected,
                    unknown_gpus=stats.unknown_gpus,
                    last_error=local.last_error if local else None,
                    last_error_at=(
                        _iso(local.last_error_at) if local and local.last_error_at else None
                    ),
                    origins=entry.provenance.origins,
                )
            )
        versions = [self._local[n].entry.version for n in serving]
        if versions == self._snapshot_versions and self._snapshot.offers:
            # Same content: keep the offers tuple (no copy), refresh the status only.
            self._snapshot = msgspec.structs.replace(
                self._snapshot, sources=tuple(statuses), degraded=self._degraded
            )
            return
        offers: tuple[Offer, ...] = tuple(o for n in serving for o in self._local[n].entry.offers)
        version = hashlib.sha256(
            "|".join(f"{n}:{self._local[n].entry.version}" for n in serving).encode()
        ).hexdigest()[:16]
        self._snapshot_versions = versions
        self._snapshot = CatalogSnapshot(
            version=version, offers=offers, sources=tuple(statuses), degraded=self._degraded
        )
        with contextlib.suppress(RuntimeError):  # RuntimeError: closed
            self._index_for(self._snapshot)  # build the query index now, not on the first query

    # --- refresh -------------------------------------------------------------------------------

    async def _adopt_from_cache(self, name: str, *, newer_than: float | None) -> bool:
        """Take the cached copy if its version differs from ours (and is newer than given)."""
        version = await self._read_version(name)
        local = self._local.get(name)
        if (
            version is not None
            and local is not None
            and version == local.entry.version
            and (newer_than is None or local.entry.stored_at >= newer_than)
        ):
            return True
        entry = await self._read_entry(name)
        if entry is None or (newer_than is not None and entry.stored_at < newer_than):
            return False
        if local is None or local.entry.version != entry.version:
            self._adopt(name, entry)
        elif local is not None:
            local.entry = entry
        return True

    async def _refresh_source(self, name: str, force: bool) -> str:
        """Returns ``fetched`` | ``shared`` | ``fresh`` | ``error:<reason>``."""
        source = self._sources.get(name)
        if source is None:
            return "error:source not configured"
        started = self._clock()
        if not force and await self._adopt_from_cache(name, newer_than=None):
            local = self._local.get(name)
            if local is not None and not self._is_stale(name, local.entry):
                return "fresh"
        token = secrets.token_hex(16)
        lock_key = self._lock_key(name)
        acquired = await self._store_call(
            self._store.acquire_lock(lock_key, token, self.config.refresh_lock_timeout_seconds)
        )
        if acquired is None:
            acquired = True  # store down: fetch locally (single flight is per process then)
        if not acquired:
            deadline = time.monotonic() + self.config.refresh_wait_seconds
            while time.monotonic() < deadline:
                await asyncio.sleep(_POLL_SECONDS)
                held = await self._store_call(self._store.get(lock_key))
                if held is None:
                    break
            if await self._adopt_from_cache(name, newer_than=started if force else None):
                return "shared"
            return "error:another replica holds the refresh lock"
        try:
            if not force and await self._adopt_from_cache(name, newer_than=started):
                return "shared"
            try:
                result = await source.fetch()
            except SourceError as exc:
                return self._record_error(name, str(exc))
            except Exception as exc:  # a bug in a parser must not take the service down
                return self._record_error(name, f"{type(exc).__name__}: {exc}")
            entry = self._entry_from(result)
            for reason, count in entry.stats.dropped.items():
                self._observer.rows_dropped(name, reason, count)
            self._adopt(name, entry)
            await self._write_entry(name, entry)
            return "fetched"
        finally:
            if acquired is True:
                await self._store_call(self._store.release_lock(lock_key, token))

    def _record_error(self, name: str, reason: str) -> str:
        local = self._local.setdefault(name, _Local(entry=self._empty(name)))
        local.last_error = reason
        local.last_error_at = self._clock()
        self._observer.refresh_failed(name, reason)
        return f"error:{reason}"

    async def _revalidate(self) -> None:
        """Adopt newer cached catalogs; refresh stale or missing sources (single task)."""
        if self._revalidating.locked():
            return
        async with self._revalidating:
            names = [n for n in self.configured if n != "bundled"]
            for name in names:
                await self._adopt_from_cache(name, newer_than=None)
            due = [
                n for n in names if not self._has_data(n) or self._is_stale(n, self._local[n].entry)
            ]
            # A source whose last attempt failed is retried once per interval, not in a loop.
            await asyncio.gather(*(self._refresh_source(n, False) for n in due))
            self._rebuild()

    async def _loop(self) -> None:
        while True:
            try:
                if self._degraded and await self._store.ping():
                    self._set_degraded(None)
                await self._revalidate()
            except Exception as exc:  # never let the background task die
                self._store_error = f"revalidate: {type(exc).__name__}: {exc}"
                self._store_error_at = self._clock()
            await asyncio.sleep(
                self.config.redis_retry_interval_seconds
                if self._degraded
                else self.config.revalidate_interval_seconds
            )
