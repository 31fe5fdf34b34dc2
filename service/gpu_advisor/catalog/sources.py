"""Pricing sources behind one interface: ``await source.fetch() -> SourceResult``.

* :class:`BundledSource` - the dated snapshot shipped in ``data/offers.csv`` (offline).
* :class:`SkyPilotSource` - SkyPilot catalog v7 ``<cloud>/vms.csv`` from a base URL or dir.
* :class:`GpuhuntSource` - a dstack gpuhunt catalog zip from a URL or file.
* :class:`TableSource` - an operator's CSV or YAML of offers (on-prem, reserved, negotiated).

Every source but ``bundled`` goes through :func:`gpu_advisor.core.normalize.normalize_offers`
(CPU-bound, run in a worker thread). Locations come only from :class:`CatalogConfig`.
A failed fetch raises :class:`SourceError` with a reason; the service keeps the last good copy.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import resources
from typing import Any, Protocol

import httpx
import msgspec
import yaml
from msgspec import Struct

from gpu_advisor.catalog.config import CatalogConfig
from gpu_advisor.catalog.gpuhunt import GpuhuntFormatError, parse_gpuhunt_zip
from gpu_advisor.catalog.http import FetchError, Validators, fetch, is_url, join, read_local
from gpu_advisor.catalog.offers_csv import OffersCsvError, decode_offers_csv
from gpu_advisor.catalog.skypilot import SkyPilotFormatError, parse_vms_csv
from gpu_advisor.core.normalize import (
    NormalizeContext,
    RawOffer,
    SourceStats,
    normalize_offers,
)
from gpu_advisor.core.offers import Network, Offer

MAX_TABLE_ROWS = 200_000


class SourceError(Exception):
    """A source could not deliver (unreachable, HTTP error, garbage, truncated file)."""


class Provenance(Struct, frozen=True, kw_only=True):
    """Where a source's offers came from.

    Attributes:
        source: source name.
        fetched_at: ISO-8601 UTC time of the fetch.
        origins: URLs or paths read.
        upstream_as_of: the upstream's own date when it states one (bundled snapshot date).
        validators: ETag / Last-Modified per origin, for conditional requests.
    """

    source: str
    fetched_at: str
    origins: tuple[str, ...] = ()
    upstream_as_of: str | None = None
    validators: dict[str, Validators] = {}


class SourceResult(Struct, frozen=True, kw_only=True):
    """The offers of one source with the normaliser's counts and their provenance."""

    offers: tuple[Offer, ...]
    stats: SourceStats
    provenance: Provenance


class Source(Protocol):
    """One pricing source."""

    name: str

    async def fetch(self) -> SourceResult:
        """Fetch and normalise. Raises :class:`SourceError` when it cannot deliver."""
        ...


Clock = Callable[[], datetime]


def _utc_now() -> datetime:
    return datetime.now(UTC)


def iso(ts: datetime) -> str:
    return ts.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


class BundledSource:
    """The snapshot in ``gpu_advisor/data/offers.csv`` (+ ``offers.meta.json``)."""

    name = "bundled"

    def __init__(self, clock: Clock = _utc_now) -> None:
        self._clock = clock

    def load(self) -> SourceResult:
        """Read the snapshot synchronously (about 3,000 offers; used at start-up)."""
        data = resources.files("gpu_advisor.data")
        try:
            text = data.joinpath("offers.csv").read_text(encoding="utf-8")
            meta = json.loads(data.joinpath("offers.meta.json").read_text(encoding="utf-8"))
            offers = decode_offers_csv(text, source="bundled")
        except (OSError, ValueError, OffersCsvError) as exc:
            raise SourceError(f"bundled snapshot unreadable: {exc}") from exc
        stats = msgspec.convert(meta.get("stats", {}), SourceStats)
        stats = msgspec.structs.replace(stats, offers_out=len(offers))
        return SourceResult(
            offers=offers,
            stats=stats,
            provenance=Provenance(
                source="bundled",
                fetched_at=str(meta.get("fetched_at", iso(self._clock()))),
                origins=("gpu_advisor/data/offers.csv",),
                upstream_as_of=meta.get("as_of"),
            ),
        )

    async def fetch(self) -> SourceResult:
        return await asyncio.to_thread(self.load)


class _Fetcher:
    """Shared by remote sources: URL or local path, with per-origin validators and bodies."""

    def __init__(self, client: httpx.AsyncClient, config: CatalogConfig) -> None:
        self._client = client
        self._config = config
        self._cache: dict[str, tuple[Validators, bytes]] = {}

    async def get(self, location: str) -> tuple[bytes, Validators]:
        if not is_url(location):
            body = await asyncio.to_thread(read_local, location, self._config.max_response_bytes)
            return body, Validators()
        previous = self._cache.get(location)
        result = await fetch(
            self._client, location, self._config, previous[0] if previous else None
        )
        if result.body is None and previous is not None:
            return previous[1], previous[0]
        body = result.body or b""
        if result.validators.etag or result.validators.last_modified:
            self._cache[location] = (result.validators, body)
        return body, result.validators


class SkyPilotSource:
    """SkyPilot catalog v7: ``<base>/<cloud>/vms.csv`` for each configured cloud."""

    name = "skypilot"

    def __init__(
        self,
        config: CatalogConfig,
        client: httpx.AsyncClient,
        ctx: NormalizeContext,
        clock: Clock = _utc_now,
    ) -> None:
        if not config.skypilot_url:
            raise SourceError("skypilot source configured without skypilot_url")
        self._base = config.skypilot_url
        self._clouds = config.skypilot_clouds
        self._fetcher = _Fetcher(client, config)
        self._ctx = ctx
        self._clock = clock

    async def fetch(self) -> SourceResult:
        fetched_at = iso(self._clock())
        locations = {cloud: join(self._base, f"{cloud}/vms.csv") for cloud in self._clouds}
        try:
            bodies = await asyncio.gather(*(self._fetcher.get(loc) for loc in locations.values()))
        except FetchError as exc:
            raise SourceError(str(exc)) from exc
        texts: dict[str, str] = {}
        validators: dict[str, Validators] = {}
        for (cloud, location), (body, val) in zip(locations.items(), bodies, strict=True):
            try:
                texts[cloud] = body.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise SourceError(f"{location}: not UTF-8 text") from exc
            validators[location] = val

        def work() -> SourceResult:
            rows: list[RawOffer] = []
            for cloud, text in texts.items():
                try:
                    rows.extend(parse_vms_csv(text, cloud))
                except SkyPilotFormatError as exc:
                    raise SourceError(f"{locations[cloud]}: {exc}") from exc
            result = normalize_offers(rows, self._ctx, source=self.name, fetched_at=fetched_at)
            return SourceResult(
                offers=result.offers,
                stats=result.stats,
                provenance=Provenance(
                    source=self.name,
                    fetched_at=fetched_at,
                    origins=tuple(locations.values()),
                    validators=validators,
                ),
            )

        return await asyncio.to_thread(work)


class GpuhuntSource:
    """A dstack gpuhunt catalog zip (per-provider CSVs) from a URL or a file."""

    name = "gpuhunt"

    def __init__(
        self,
        config: CatalogConfig,
        client: httpx.AsyncClient,
        ctx: NormalizeContext,
        clock: Clock = _utc_now,
    ) -> None:
        if not config.gpuhunt_url:
            raise SourceError("gpuhunt source configured without gpuhunt_url")
        self._location = config.gpuhunt_url
        self._limit = config.max_response_bytes
        self._fetcher = _Fetcher(client, config)
        self._ctx = ctx
        self._clock = clock

    async def fetch(self) -> SourceResult:
        fetched_at = iso(self._clock())
        try:
            body, validators = await self._fetcher.get(self._location)
        except FetchError as exc:
            raise SourceError(str(exc)) from exc

        def work() -> SourceResult:
            try:
                catalog = parse_gpuhunt_zip(body, max_unpacked_bytes=self._limit)
            except GpuhuntFormatError as exc:
                raise SourceError(f"{self._location}: {exc}") from exc
            result = normalize_offers(
                catalog.rows, self._ctx, source=self.name, fetched_at=fetched_at
            )
            return SourceResult(
                offers=result.offers,
                stats=result.stats,
                provenance=Provenance(
                    source=self.name,
                    fetched_at=fetched_at,
                    origins=(self._location,),
                    upstream_as_of=catalog.version,
                    validators={self._location: validators},
                ),
            )

        return await asyncio.to_thread(work)


# --- table ---------------------------------------------------------------------------------


class TableRow(Struct, kw_only=True, forbid_unknown_fields=True):
    """One row of an operator's table (CSV columns or YAML keys of the same names).

    Required: provider, instance_type, region, gpu, gpu_count, price_per_hour_usd. Prices are
    per instance-hour unless ``price_per_gpu_hour_usd`` is given instead. ``gpu`` is any alias
    (``H100``, ``A100-80GB``); memory in GiB only for GPUs not in the table.
    """

    provider: str
    instance_type: str
    region: str
    gpu: str
    gpu_count: float
    price_per_hour_usd: float | None = None
    price_per_gpu_hour_usd: float | None = None
    spot_price_per_hour_usd: float | None = None
    zone: str | None = None
    gpu_memory_gib: float | None = None
    vcpus: float | None = None
    ram_gib: float | None = None
    interconnect: str | None = None
    network_fabric: str | None = None
    network_gbit_per_s: float | None = None
    billing_increment_seconds: int | None = None
    billing_minimum_seconds: int | None = None


def _blank_to_none(row: dict[str, Any]) -> dict[str, Any]:
    return {k: (None if v in ("", None) else v) for k, v in row.items() if k}


def _csv_items(text: str) -> list[dict[str, Any]]:
    """CSV rows as dicts; a row with more or fewer fields than the header is an error (an
    unquoted comma, or a file cut off mid-row), not a row to guess at."""
    reader = csv.DictReader(io.StringIO(text))
    if not reader.fieldnames:
        raise SourceError("table CSV is empty (no header row)")
    items: list[dict[str, Any]] = []
    for row in reader:
        if None in row:
            raise SourceError(f"table line {reader.line_num}: more fields than the header")
        if any(v is None for v in row.values()):
            raise SourceError(
                f"table line {reader.line_num}: fewer fields than the header (cut off?)"
            )
        items.append(row)
        if len(items) > MAX_TABLE_ROWS:
            break
    return items


def parse_table(text: str, *, yaml_format: bool) -> list[RawOffer]:
    """An operator's table -> raw rows.

    Raises:
        SourceError: not CSV/YAML of the documented columns (naming the row and the field),
            a CSV row whose field count differs from the header's, or more than 200,000 rows.
    """
    try:
        if yaml_format:
            data = yaml.safe_load(text)
            items = data.get("offers", data) if isinstance(data, dict) else data
            if not isinstance(items, list):
                raise SourceError("table YAML must be a list of offers (or {offers: [...]})")
        else:
            items = _csv_items(text)
    except (yaml.YAMLError, csv.Error) as exc:
        raise SourceError(f"table unreadable: {exc}") from exc
    if len(items) > MAX_TABLE_ROWS:
        raise SourceError(f"table has more than {MAX_TABLE_ROWS} rows")
    out: list[RawOffer] = []
    for i, item in enumerate(items, start=1):
        if not isinstance(item, dict):
            raise SourceError(f"table row {i}: not a mapping")
        try:
            row = msgspec.convert(_blank_to_none(item), TableRow, strict=False)
        except msgspec.ValidationError as exc:
            raise SourceError(f"table row {i}: {exc}") from exc
        price, basis = row.price_per_hour_usd, "instance"
        if price is None and row.price_per_gpu_hour_usd is not None:
            price, basis = row.price_per_gpu_hour_usd, "gpu"
        network = None
        if row.network_fabric and row.network_gbit_per_s:
            if row.network_fabric not in ("infiniband", "efa", "roce", "ethernet"):
                raise SourceError(f"table row {i}: unknown network_fabric {row.network_fabric}")
            network = Network(
                fabric=row.network_fabric,  # type: ignore[arg-type]
                gbit_per_s=row.network_gbit_per_s,
                cluster_grade=row.network_fabric != "ethernet",
            )
        if row.interconnect is not None and row.interconnect not in (
            "nvlink",
            "nvswitch",
            "pcie",
            "infinity-fabric",
            "roce",
            "none",
            "unknown",
        ):
            raise SourceError(f"table row {i}: unknown interconnect {row.interconnect}")
        out.append(
            RawOffer(
                provider=row.provider,
                instance_type=row.instance_type,
                region=row.region,
                zone=row.zone,
                accelerator_name=row.gpu,
                accelerator_count=row.gpu_count,
                gpu_memory_mib=round(row.gpu_memory_gib * 1024) if row.gpu_memory_gib else None,
                vcpus=row.vcpus,
                ram_gib=row.ram_gib,
                price_per_hour_usd=price,
                spot_price_per_hour_usd=row.spot_price_per_hour_usd,
                price_basis=basis,  # type: ignore[arg-type]
                hints=(row.instance_type,),
                interconnect=row.interconnect,  # type: ignore[arg-type]
                network=network,
                billing_increment_seconds=row.billing_increment_seconds,
                billing_minimum_seconds=row.billing_minimum_seconds,
                ref=f"table:{i}",
            )
        )
    return out


class TableSource:
    """An operator's CSV (``.csv``) or YAML (``.yaml``/``.yml``) of offers."""

    name = "table"

    def __init__(
        self,
        config: CatalogConfig,
        client: httpx.AsyncClient,
        ctx: NormalizeContext,
        clock: Clock = _utc_now,
    ) -> None:
        if not config.table_path:
            raise SourceError("table source configured without table_path")
        self._location = config.table_path
        self._fetcher = _Fetcher(client, config)
        self._ctx = ctx
        self._clock = clock

    async def fetch(self) -> SourceResult:
        fetched_at = iso(self._clock())
        try:
            body, _ = await self._fetcher.get(self._location)
            text = body.decode("utf-8")
        except (FetchError, UnicodeDecodeError) as exc:
            raise SourceError(str(exc)) from exc
        yaml_format = self._location.lower().endswith((".yaml", ".yml"))

        def work() -> SourceResult:
            rows = parse_table(text, yaml_format=yaml_format)
            result = normalize_offers(rows, self._ctx, source=self.name, fetched_at=fetched_at)
            return SourceResult(
                offers=result.offers,
                stats=result.stats,
                provenance=Provenance(
                    source=self.name, fetched_at=fetched_at, origins=(self._location,)
                ),
            )

        return await asyncio.to_thread(work)


def build_sources(
    config: CatalogConfig,
    client: httpx.AsyncClient,
    ctx: NormalizeContext,
    clock: Clock = _utc_now,
) -> dict[str, Source]:
    """The configured sources by name (``bundled`` always present, as the start-up fallback).

    Raises:
        SourceError: a configured source lacks its location setting.
    """
    sources: dict[str, Source] = {"bundled": BundledSource(clock)}
    for name in config.sources:
        if name == "skypilot":
            sources[name] = SkyPilotSource(config, client, ctx, clock)
        elif name == "gpuhunt":
            sources[name] = GpuhuntSource(config, client, ctx, clock)
        elif name == "table":
            sources[name] = TableSource(config, client, ctx, clock)
    return sources
