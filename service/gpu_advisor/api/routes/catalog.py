"""Catalog endpoints: ``GET /v1/offers``, ``GET /v1/catalog``, ``POST /v1/catalog/refresh``,
``GET /v1/gpus``. Handlers read the :class:`CatalogService` from ``state.catalog`` and the
GPU table from ``state.gpus``; register ``CATALOG_ROUTES`` in ``create_app``.

Refresh authorisation: ``Authorization: Bearer <token>`` compared with
``CatalogConfig.admin_token`` by ``hmac.compare_digest``. No token configured -> 404 (the
endpoint does not exist for this deployment); no or malformed header -> 401 with
``WWW-Authenticate: Bearer``; a wrong token -> 403.
"""

from __future__ import annotations

import hmac
from typing import Annotated, Any

from litestar import Request, get, post
from litestar.datastructures import State
from litestar.exceptions import NotAuthorizedException, NotFoundException, PermissionDeniedException
from litestar.params import Parameter
from msgspec import Struct

from gpu_advisor.advisor import catalog_info
from gpu_advisor.api.problems import problem_responses
from gpu_advisor.catalog.service import (
    CacheHealth,
    CatalogService,
    RefreshOutcome,
    SourceStatus,
)
from gpu_advisor.core.errors import InvalidSpecError, UnknownGpuError
from gpu_advisor.core.gpus import GpuCatalog, GpuSpec, matching_variants
from gpu_advisor.core.offer_query import OfferQuery, OfferSort, query_offers
from gpu_advisor.core.offers import Offer
from gpu_advisor.core.results import CatalogInfo

MAX_LIMIT = 1000


class OffersPage(Struct, frozen=True, kw_only=True):
    """``GET /v1/offers``: one page of offers, the total, and the catalog used."""

    offers: list[Offer]
    total: int
    limit: int
    offset: int
    catalog: CatalogInfo


class CatalogStatus(Struct, frozen=True, kw_only=True):
    """``GET /v1/catalog``: version, per-source status, cache health."""

    version: str
    offers: int
    degraded: bool
    sources: list[SourceStatus]
    cache: CacheHealth


class GpuList(Struct, frozen=True, kw_only=True):
    """``GET /v1/gpus``: the GPU table (per GPU; marketed and exposed memory in bytes)."""

    gpus: list[GpuSpec]
    as_of: str


def _service(state: State) -> CatalogService:
    service: CatalogService = state.catalog
    return service


@get(
    "/v1/offers",
    tags=["catalog"],
    summary="List normalised offers",
    responses=problem_responses(400, 422, 429),
)
async def list_offers(
    state: State,
    gpu: Annotated[
        str | None,
        Parameter(
            max_length=200,
            description=(
                "GPU id or alias. A family name matches every variant (A100: SXM and PCIe, "
                "40 and 80 GB); a form or size narrows it (A100-80GB, H100-NVL)."
            ),
        ),
    ] = None,
    min_gpu_memory_gib: Annotated[
        float | None, Parameter(ge=0, le=100_000, description="Marketed GiB per GPU.")
    ] = None,
    min_gpus: Annotated[int | None, Parameter(ge=1, le=100_000)] = None,
    max_gpus: Annotated[int | None, Parameter(ge=1, le=100_000)] = None,
    provider: Annotated[str | None, Parameter(max_length=100)] = None,
    region: Annotated[str | None, Parameter(max_length=200)] = None,
    spot: Annotated[
        bool | None,
        Parameter(
            description=(
                "true: only offers with a spot price, and max_price_per_hour_usd applies to "
                "the spot price; false or absent: every offer, on-demand prices."
            )
        ),
    ] = None,
    max_price_per_hour_usd: Annotated[
        float | None, Parameter(gt=0, le=1_000_000, description="USD per instance-hour.")
    ] = None,
    sort: Annotated[OfferSort, Parameter(description="Sort key; '-' for descending.")] = "price",
    limit: Annotated[int, Parameter(ge=1, le=MAX_LIMIT)] = 100,
    offset: Annotated[int, Parameter(ge=0, le=10_000_000)] = 0,
) -> OffersPage:
    """Offers filtered, sorted and paged. Prices are USD per instance-hour.

    Raises:
        UnknownGpuError: ``gpu`` names no known GPU and no offer's GPU id (422, field ``gpu``).
        InvalidSpecError: ``provider`` is not in the catalog (422, the providers it has), or
            ``min_gpus`` exceeds ``max_gpus``.
        ValidationException: a parameter out of range (400, naming it).
    """
    service = _service(state)
    snapshot, index = await service.indexed()
    gpu_ids: tuple[str, ...] | None = None
    if gpu is not None:
        gpus: GpuCatalog = state.gpus
        specs = matching_variants(gpus, gpu)
        if specs:
            gpu_ids = tuple(spec.id for spec in specs)
        elif gpu.upper() in index.gpu_ids():
            gpu_ids = (gpu.upper(),)
        else:
            raise UnknownGpuError(
                f"unknown GPU {gpu!r}; GET /v1/gpus lists the known ids", field="gpu"
            )
    if provider is not None and provider.lower() not in index.providers():
        # a typo would otherwise filter to nothing and read as "no offers"
        known = ", ".join(sorted(index.providers()))
        raise InvalidSpecError(
            f"no provider {provider[:100]!r} in the catalog; it has: {known}", field="provider"
        )
    if min_gpus is not None and max_gpus is not None and min_gpus > max_gpus:
        raise InvalidSpecError("min_gpus is larger than max_gpus", field="min_gpus")
    query = OfferQuery(
        gpu_ids=gpu_ids,
        min_gpu_memory_gib=min_gpu_memory_gib,
        min_gpus=min_gpus,
        max_gpus=max_gpus,
        provider=provider,
        region=region,
        spot=spot,
        max_price_per_hour_usd=max_price_per_hour_usd,
        sort=sort,
        limit=limit,
        offset=offset,
    )
    total, page = query_offers(index, query)
    return OffersPage(
        offers=page,
        total=total,
        limit=limit,
        offset=offset,
        catalog=catalog_info(snapshot, degraded=service.cache_degraded),
    )


@get(
    "/v1/catalog",
    tags=["catalog"],
    summary="Catalog sources and freshness",
    responses=problem_responses(429),
)
async def catalog_status(state: State) -> CatalogStatus:
    """Sources, fetched_at, TTL, stale flag, offer count, dropped/corrected rows by reason."""
    service = _service(state)
    snapshot = await service.snapshot()
    health = await service.health()
    return CatalogStatus(
        version=snapshot.version,
        offers=len(snapshot.offers),
        degraded=health.degraded,
        sources=list(snapshot.sources),
        cache=health,
    )


def _bearer(request: Request[Any, Any, Any]) -> str:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise NotAuthorizedException(
            detail="refresh needs Authorization: Bearer <admin token>",
            headers={"WWW-Authenticate": "Bearer"},
            extra=[
                {
                    "field": "Authorization",
                    "source": "header",
                    "message": "missing or not 'Bearer <admin token>'",
                }
            ],
        )
    return token.strip()


@post(
    "/v1/catalog/refresh",
    tags=["catalog"],
    summary="Refresh the catalog now (admin token)",
    status_code=200,
    responses=problem_responses(400, 401, 403, 404, 429),
)
async def refresh_catalog(
    request: Request[Any, Any, Any],
    state: State,
    force: Annotated[bool, Parameter(description="Refetch even fresh sources.")] = True,
) -> RefreshOutcome:
    """Fetch the configured sources now; answers what was fetched, shared or failed."""
    service = _service(state)
    expected = service.config.admin_token
    if not expected:
        raise NotFoundException(detail="catalog refresh is disabled (no admin token configured)")
    token = _bearer(request)
    if not hmac.compare_digest(token.encode(), expected.encode()):
        raise PermissionDeniedException(
            detail="wrong admin token",
            extra=[{"field": "Authorization", "source": "header", "message": "wrong admin token"}],
        )
    return await service.refresh(force=force)


@get(
    "/v1/gpus",
    tags=["catalog"],
    summary="The GPU table",
    sync_to_thread=False,
    responses=problem_responses(429),
)
def list_gpus(state: State) -> GpuList:
    """Every known GPU: marketed and exposed memory (bytes), bandwidth, dense TFLOPS, source."""
    gpus: GpuCatalog = state.gpus
    return GpuList(gpus=list(gpus.specs), as_of=gpus.as_of)


CATALOG_ROUTES = [list_offers, catalog_status, refresh_catalog, list_gpus]
