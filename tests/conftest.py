from __future__ import annotations

from collections.abc import Iterator

import pytest

from squall import FakeClock, LocalCluster


@pytest.fixture
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster() as c:
        yield c


@pytest.fixture
def fake_clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def fake_cluster(fake_clock: FakeClock) -> Iterator[LocalCluster]:
    with LocalCluster(clock=fake_clock) as c:
        yield c
