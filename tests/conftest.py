"""Fixtures shared by every test directory."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.redis_process import RedisProcess, free_port


@pytest.fixture
def spare_redis() -> Iterator[RedisProcess]:
    """A ``redis-server`` of the test's own, which the test may kill and start again."""
    proc = RedisProcess(free_port())
    proc.start()
    yield proc
    proc.kill()
