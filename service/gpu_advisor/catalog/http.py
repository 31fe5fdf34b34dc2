"""Fetch a URL or a local file with limits: timeouts, retries with backoff, a size limit and
conditional requests (ETag / If-Modified-Since). httpx for HTTP, tenacity for retries.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

import httpx
from msgspec import Struct
from tenacity import (
    AsyncRetrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
)

from gpu_advisor.catalog.config import CatalogConfig


class FetchError(Exception):
    """A fetch failed for good (after retries): the message says why, for the status."""


class _RetryableError(Exception):
    """A failure worth another attempt (timeout, connection error, 5xx, 429)."""


class Validators(Struct, frozen=True, kw_only=True):
    """What the last successful response said about its version."""

    etag: str | None = None
    last_modified: str | None = None


class Fetched(Struct, frozen=True, kw_only=True):
    """A fetch result: ``body`` is None when the server answered 304 Not Modified."""

    body: bytes | None
    validators: Validators
    origin: str


def is_url(location: str) -> bool:
    return urlparse(location).scheme in ("http", "https")


def join(base: str, relative: str) -> str:
    """``base`` + ``/relative`` for URLs and paths alike."""
    return base.rstrip("/") + "/" + relative.lstrip("/")


def read_local(path: str, max_bytes: int) -> bytes:
    """Read a local file (``file://`` or a path), refusing files over ``max_bytes``.

    Raises:
        FetchError: missing, unreadable or too large.
    """
    p = Path(urlparse(path).path if path.startswith("file://") else path)
    try:
        size = p.stat().st_size
        if size > max_bytes:
            raise FetchError(f"{p}: {size} bytes exceeds the limit of {max_bytes}")
        return p.read_bytes()
    except OSError as exc:
        raise FetchError(f"{p}: {exc.strerror or exc}") from exc


async def _get_once(
    client: httpx.AsyncClient, url: str, validators: Validators | None, max_bytes: int
) -> Fetched:
    headers: dict[str, str] = {}
    if validators is not None:
        if validators.etag:
            headers["If-None-Match"] = validators.etag
        if validators.last_modified:
            headers["If-Modified-Since"] = validators.last_modified
    try:
        async with client.stream("GET", url, headers=headers) as response:
            if response.status_code == 304 and validators is not None:
                return Fetched(body=None, validators=validators, origin=url)
            if response.status_code >= 500 or response.status_code == 429:
                raise _RetryableError(f"{url}: HTTP {response.status_code}")
            if response.status_code != 200:
                raise FetchError(f"{url}: HTTP {response.status_code}")
            declared = response.headers.get("content-length")
            if declared is not None and declared.isdigit() and int(declared) > max_bytes:
                raise FetchError(f"{url}: {declared} bytes exceeds the limit of {max_bytes}")
            chunks: list[bytes] = []
            received = 0
            async for chunk in response.aiter_bytes():
                received += len(chunk)
                if received > max_bytes:
                    raise FetchError(f"{url}: response exceeds the limit of {max_bytes} bytes")
                chunks.append(chunk)
            return Fetched(
                body=b"".join(chunks),
                validators=Validators(
                    etag=response.headers.get("etag"),
                    last_modified=response.headers.get("last-modified"),
                ),
                origin=url,
            )
    except (httpx.TimeoutException, httpx.TransportError) as exc:
        raise _RetryableError(f"{url}: {type(exc).__name__}: {exc}") from exc


async def fetch(
    client: httpx.AsyncClient,
    url: str,
    config: CatalogConfig,
    validators: Validators | None = None,
) -> Fetched:
    """GET ``url`` with the configured retries, backoff and size limit.

    Timeouts come from the client (see :func:`make_client`). 5xx, 429, timeouts and
    connection errors are retried ``config.http_retries`` times with exponential backoff;
    other statuses fail at once.

    Raises:
        FetchError: the last attempt's reason.
    """
    retrying = AsyncRetrying(
        stop=stop_after_attempt(config.http_retries + 1),
        wait=wait_exponential(
            multiplier=config.http_backoff_initial_seconds, max=config.http_backoff_max_seconds
        ),
        retry=retry_if_exception_type(_RetryableError),
        reraise=True,
    )
    try:
        async for attempt in retrying:
            with attempt:
                return await _get_once(client, url, validators, config.max_response_bytes)
    except _RetryableError as exc:
        raise FetchError(str(exc)) from exc
    raise FetchError(f"{url}: no attempt made")  # unreachable: tenacity re-raises


def make_client(config: CatalogConfig) -> httpx.AsyncClient:
    """An httpx client with the configured timeouts; the catalog service owns and closes it."""
    timeout = httpx.Timeout(
        config.http_read_timeout_seconds, connect=config.http_connect_timeout_seconds
    )
    return httpx.AsyncClient(timeout=timeout, follow_redirects=True)
