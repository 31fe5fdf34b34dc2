"""One contract suite for both cache stores (like litestar's tests/conftest.py ``store``
fixture): the real Redis at REDIS_URL (db 15 by default) and the in-process store."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator

import pytest

from gpu_advisor.catalog.cache import CatalogStore, MemoryStore, RedisStore

from .conftest import REDIS_URL

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["memory", "redis"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[CatalogStore]:
    s: CatalogStore = MemoryStore() if request.param == "memory" else RedisStore(REDIS_URL)
    yield s
    await s.close()


@pytest.fixture
def key() -> str:
    return f"gpu-advisor:test:{secrets.token_hex(8)}"


async def test_missing_key_is_none(store: CatalogStore, key: str) -> None:
    assert await store.get(key) is None


async def test_bytes_round_trip(store: CatalogStore, key: str) -> None:
    value = bytes(range(256)) * 4
    await store.set(key, value, 60)
    assert await store.get(key) == value
    await store.delete(key)
    assert await store.get(key) is None


async def test_ttl_expires(store: CatalogStore, key: str) -> None:
    await store.set(key, b"x", 0.05)
    await asyncio.sleep(0.15)
    assert await store.get(key) is None


async def test_no_ttl_keeps(store: CatalogStore, key: str) -> None:
    await store.set(key, b"x", None)
    await asyncio.sleep(0.05)
    assert await store.get(key) == b"x"
    await store.delete(key)


async def test_lock_is_exclusive_and_released_only_by_its_token(
    store: CatalogStore, key: str
) -> None:
    assert await store.acquire_lock(key, "a", 5) is True
    assert await store.acquire_lock(key, "b", 5) is False
    assert await store.release_lock(key, "b") is False  # not the holder: nothing deleted
    assert await store.acquire_lock(key, "b", 5) is False
    assert await store.release_lock(key, "a") is True
    assert await store.acquire_lock(key, "b", 5) is True
    assert await store.release_lock(key, "b") is True


async def test_lock_expires(store: CatalogStore, key: str) -> None:
    assert await store.acquire_lock(key, "a", 0.05) is True
    await asyncio.sleep(0.15)
    assert await store.acquire_lock(key, "b", 5) is True  # a crashed holder blocks no one
    assert await store.release_lock(key, "a") is False  # the late holder cannot free b's lock
    assert await store.release_lock(key, "b") is True


async def test_ping(store: CatalogStore) -> None:
    assert await store.ping() is True
