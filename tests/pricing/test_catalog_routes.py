"""Catalog endpoints through Litestar's test client, on a small app with CATALOG_ROUTES."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from litestar import Litestar
from litestar.datastructures import State
from litestar.testing import AsyncTestClient

from gpu_advisor.api.problems import EXCEPTION_HANDLERS
from gpu_advisor.api.routes.catalog import CATALOG_ROUTES
from gpu_advisor.catalog.config import CatalogConfig
from gpu_advisor.catalog.service import CatalogService
from tests.redis_process import RedisProcess

pytestmark = pytest.mark.anyio
GIB = 2**30


async def _client(token: str | None) -> AsyncIterator[AsyncTestClient[Litestar]]:
    service = CatalogService(CatalogConfig(admin_token=token))
    await service.start()
    app = Litestar(
        route_handlers=CATALOG_ROUTES,
        state=State({"catalog": service, "gpus": service.gpus}),
        exception_handlers=EXCEPTION_HANDLERS,
    )
    async with AsyncTestClient(app) as client:
        yield client
    await service.close()


@pytest.fixture
async def client() -> AsyncIterator[AsyncTestClient[Litestar]]:
    async for c in _client("s3cret"):
        yield c


async def test_offers_filtered_by_alias_sorted_and_paged(client: AsyncTestClient[Litestar]) -> None:
    r = await client.get("/v1/offers", params={"gpu": "a100-80gb", "min_gpus": 8, "limit": 5})
    assert r.status_code == 200
    body = r.json()
    assert body["limit"] == 5
    assert body["offset"] == 0
    assert body["total"] >= len(body["offers"])
    prices = [o["price_per_hour_usd"] for o in body["offers"]]
    assert prices == sorted(prices)
    for o in body["offers"]:
        assert o["gpu"] == "A100-SXM-80GB"
        assert o["gpu_count"] >= 8
    assert body["catalog"]["version"]
    page2 = (
        await client.get(
            "/v1/offers", params={"gpu": "a100-80gb", "min_gpus": 8, "limit": 5, "offset": 5}
        )
    ).json()
    assert page2["total"] == body["total"]
    assert not {o["instance_type"] + o["region"] for o in page2["offers"]} & {
        o["instance_type"] + o["region"] for o in body["offers"]
    }


async def test_offers_other_filters(client: AsyncTestClient[Litestar]) -> None:
    r = await client.get(
        "/v1/offers",
        params={
            "provider": "aws",
            "spot": "true",
            "min_gpu_memory_gib": 40,
            "max_price_per_hour_usd": 50,
            "limit": 1000,
        },
    )
    body = r.json()
    assert body["total"] > 0
    upper = await client.get("/v1/offers", params={"provider": "AWS", "limit": 1})
    assert upper.status_code == 200  # provider ids compare without case
    for o in body["offers"]:
        assert o["provider"] == "aws"
        assert o["spot_price_per_hour_usd"] is not None
        assert o["spot_price_per_hour_usd"] <= 50
        assert o["gpu_memory_bytes"] >= 40 * GIB


@pytest.mark.parametrize(
    ("params", "status", "field"),
    [
        ({"limit": 0}, 400, "limit"),
        ({"limit": 5000}, 400, "limit"),
        ({"min_gpus": "x"}, 400, "min_gpus"),
        ({"max_price_per_hour_usd": -1}, 400, "max_price_per_hour_usd"),
        ({"sort": "bogus"}, 400, "sort"),
        ({"gpu": "not-a-gpu"}, 422, "gpu"),
        ({"min_gpus": 8, "max_gpus": 2}, 422, "min_gpus"),
        ({"provider": "nope"}, 422, "provider"),  # not "no offers": a typo, named
    ],
)
async def test_invalid_filters_name_the_parameter(
    client: AsyncTestClient[Litestar], params: dict[str, str | int], status: int, field: str
) -> None:
    r = await client.get("/v1/offers", params=params)
    assert r.status_code == status
    assert r.headers["content-type"].startswith("application/problem+json")
    assert r.json()["errors"][0]["field"] == field


async def test_catalog_status(client: AsyncTestClient[Litestar]) -> None:
    body = (await client.get("/v1/catalog")).json()
    (bundled,) = body["sources"]
    assert bundled["name"] == "bundled"
    assert bundled["fetched_at"] == "2026-11-30T00:00:00Z"
    assert bundled["offers"] == body["offers"] > 2000
    assert bundled["dropped"]["tpu"] == 1584
    assert "spot_placeholder" in bundled["corrected"]
    assert body["cache"] == {
        "backend": "memory",
        "degraded": False,
        "last_error": None,
        "last_error_at": None,
        "catalog_version": body["version"],
    }


async def test_refresh_auth(client: AsyncTestClient[Litestar]) -> None:
    r = await client.post("/v1/catalog/refresh")
    assert r.status_code == 401
    assert r.headers["www-authenticate"] == "Bearer"
    # every 4xx names what to fix: here the header
    [error] = r.json()["errors"]
    assert (error["field"], error["source"]) == ("Authorization", "header")
    assert (
        await client.post("/v1/catalog/refresh", headers={"Authorization": "Basic x"})
    ).status_code == 401
    wrong = await client.post("/v1/catalog/refresh", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 403
    assert wrong.json()["errors"] == [
        {"field": "Authorization", "message": "wrong admin token", "source": "header"}
    ]
    ok = await client.post("/v1/catalog/refresh", headers={"Authorization": "Bearer s3cret"})
    assert ok.status_code == 200
    assert ok.json()["failed"] == {}


async def test_refresh_disabled_without_token() -> None:
    async for c in _client(None):
        r = await c.post("/v1/catalog/refresh", headers={"Authorization": "Bearer anything"})
        assert r.status_code == 404


async def test_gpus(client: AsyncTestClient[Litestar]) -> None:
    body = (await client.get("/v1/gpus")).json()
    assert body["as_of"] == "2026-11-30"
    h100 = next(g for g in body["gpus"] if g["id"] == "H100-SXM-80GB")
    assert h100["memory_bytes"] == 80 * GIB
    assert h100["memory_exposed_bytes"] == 81559 * 2**20


async def test_offers_carry_the_live_degraded_flag(spare_redis: RedisProcess) -> None:
    # The catalog block of /v1/offers says whether the shared cache is degraded now, as the
    # planning answers' block does -- not as it was when the snapshot was taken.
    service = CatalogService(
        CatalogConfig(
            sources=("bundled",), redis_url=spare_redis.url, redis_socket_timeout_seconds=0.2
        )
    )
    await service.start()
    app = Litestar(
        route_handlers=CATALOG_ROUTES,
        state=State({"catalog": service, "gpus": service.gpus}),
        exception_handlers=EXCEPTION_HANDLERS,
    )
    try:
        async with AsyncTestClient(app) as client:
            before = (await client.get("/v1/offers", params={"limit": 1})).json()
            assert before["catalog"]["degraded"] is False
            spare_redis.kill()
            assert (await service.health()).degraded is True
            after = (await client.get("/v1/offers", params={"limit": 1})).json()
            assert after["catalog"]["degraded"] is True
            assert after["catalog"]["version"] == before["catalog"]["version"]
    finally:
        await service.close()
