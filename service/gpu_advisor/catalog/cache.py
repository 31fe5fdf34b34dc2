"""Byte stores for the catalog cache: Redis (shared) and in-process (embedded default).

Both implement :class:`CatalogStore`; one contract test suite runs against both. Values are
bytes under caller-built keys; ``ttl_seconds`` None means no expiry. The single-flight lock is
``SET key token NX PX`` and is released only by its holder (compare-and-delete in one Lua
script, so a lock that expired and was taken by another replica is never deleted).

Backend failures raise :class:`StoreError`; the catalog service counts them as misses.
"""

from __future__ import annotations

import time
from typing import Protocol

import redis.asyncio as aioredis
from redis.exceptions import RedisError

_RELEASE_LUA = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
"""


class StoreError(Exception):
    """The backend failed (connection refused, timeout, protocol error)."""


class CatalogStore(Protocol):
    """Bytes by key, with TTLs and a token lock."""

    async def get(self, key: str) -> bytes | None: ...

    async def set(self, key: str, value: bytes, ttl_seconds: float | None) -> None: ...

    async def delete(self, key: str) -> None: ...

    async def acquire_lock(self, key: str, token: str, ttl_seconds: float) -> bool: ...

    async def release_lock(self, key: str, token: str) -> bool: ...

    async def ping(self) -> bool: ...

    async def close(self) -> None: ...


class MemoryStore:
    """In-process store with the same semantics (expiry checked on read)."""

    def __init__(self, clock: object = time.monotonic) -> None:
        self._data: dict[str, tuple[bytes, float | None]] = {}
        self._now = clock

    def _alive(self, key: str) -> bytes | None:
        item = self._data.get(key)
        if item is None:
            return None
        value, expires = item
        if expires is not None and expires <= self._now():  # type: ignore[operator]
            del self._data[key]
            return None
        return value

    async def get(self, key: str) -> bytes | None:
        return self._alive(key)

    async def set(self, key: str, value: bytes, ttl_seconds: float | None) -> None:
        expires = self._now() + ttl_seconds if ttl_seconds else None  # type: ignore[operator]
        self._data[key] = (value, expires)

    async def delete(self, key: str) -> None:
        self._data.pop(key, None)

    async def acquire_lock(self, key: str, token: str, ttl_seconds: float) -> bool:
        if self._alive(key) is not None:
            return False
        await self.set(key, token.encode(), ttl_seconds)
        return True

    async def release_lock(self, key: str, token: str) -> bool:
        if self._alive(key) == token.encode():
            del self._data[key]
            return True
        return False

    async def ping(self) -> bool:
        return True

    async def close(self) -> None:
        self._data.clear()


class RedisStore:
    """Redis via redis-py asyncio. One client (connection pool) for the app's lifetime; the
    pool reconnects by itself on the next command after Redis comes back."""

    def __init__(self, url: str, *, socket_timeout_seconds: float = 0.5) -> None:
        self._client: aioredis.Redis = aioredis.Redis.from_url(
            url,
            socket_timeout=socket_timeout_seconds,
            socket_connect_timeout=socket_timeout_seconds,
            health_check_interval=30,
        )
        self._release = self._client.register_script(_RELEASE_LUA)

    async def get(self, key: str) -> bytes | None:
        try:
            value = await self._client.get(key)
        except (RedisError, OSError) as exc:
            raise StoreError(f"redis get: {exc}") from exc
        if value is None:
            return None
        return value.encode() if isinstance(value, str) else bytes(value)

    async def set(self, key: str, value: bytes, ttl_seconds: float | None) -> None:
        try:
            if ttl_seconds:
                await self._client.set(key, value, px=max(1, int(ttl_seconds * 1000)))
            else:
                await self._client.set(key, value)
        except (RedisError, OSError) as exc:
            raise StoreError(f"redis set: {exc}") from exc

    async def delete(self, key: str) -> None:
        try:
            await self._client.delete(key)
        except (RedisError, OSError) as exc:
            raise StoreError(f"redis delete: {exc}") from exc

    async def acquire_lock(self, key: str, token: str, ttl_seconds: float) -> bool:
        try:
            return bool(
                await self._client.set(key, token, nx=True, px=max(1, int(ttl_seconds * 1000)))
            )
        except (RedisError, OSError) as exc:
            raise StoreError(f"redis lock: {exc}") from exc

    async def release_lock(self, key: str, token: str) -> bool:
        try:
            return bool(await self._release(keys=[key], args=[token]))
        except (RedisError, OSError) as exc:
            raise StoreError(f"redis unlock: {exc}") from exc

    async def ping(self) -> bool:
        try:
            return bool(await self._client.ping())
        except (RedisError, OSError):
            return False

    async def close(self) -> None:
        await self._client.aclose()
