"""A real redis-server per test (Debian's, installed by ops/bootstrap.sh --tests),
on a free loopback port, stopped whatever the test did."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from squall.contrib.redis.devserver import DevRedis


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[DevRedis]:
    server = DevRedis(tmp_path / "redis", aof=True)
    server.start()
    yield server
    server.stop()
