"""max_events_in_memory on LocalCluster (real executors, the checkpoint wrapper,
SQLite state): windows of thousands summed exactly with at most 50 tuples in
memory, and a second run resuming from the partitions in the store."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from squall import Topology
from squall.local.cluster import LocalCluster
from squall.testing import poll_for
from squall.windowing import Count, StatefulWindowedBolt
from tests.windowing.test_stateful_windowed import Numbers, Probe, buffered, committed

pytestmark = pytest.mark.timeout(90)

WINDOW, BOUND = 2000, 50


class Held:
    lock = threading.Lock()
    most = 0  # the most tuples the window held in memory while a window was summed
    kinds: set[str] = set()


class PagedSums(StatefulWindowedBolt):
    outputs = ["sum"]

    def init_state(self, state: Any) -> None:
        self.state = state

    def process_window(self, window: Any) -> None:
        paged = self._core.tuples  # type: ignore[union-attr]
        total, most = 0, 0
        for i, t in enumerate(window.tuples):
            total += t.values.n
            if i % 10 == 0:
                most = max(most, paged.held())
        with Held.lock:
            Held.most = max(Held.most, most)
            Held.kinds.add(type(window.tuples).__name__)
        assert len(window.tuples) == WINDOW
        self.state.put("sums", [*self.state.get("sums", []), total])
        self.emit([total])


def topology(db: Path) -> type[Topology]:
    class PagedWindow(Topology):
        config = {"topology.state.checkpoint.interval.ms": 100,
                  "topology.state.provider.config": {"path": str(db)}}
        numbers = Numbers.spec()
        sums = PagedSums.spec(inputs=[numbers], tumbling=Count(WINDOW), persist=True,
                              max_events_in_memory=BOUND)

    return PagedWindow


def test_windows_of_thousands_with_50_in_memory_sum_exactly_and_resume(tmp_path: Path) -> None:
    db = tmp_path / "state.sqlite"
    # Given a first run stopping 1000 tuples into its third window (the buffer also holds the
    # second window, evicted by the third)
    Probe.limit = 5000
    with LocalCluster() as cluster:
        cluster.submit("paged", topology(db))
        poll_for(lambda: len(buffered(db)) == 3000 and len(committed(db).get("sums", [])) == 2,
                 timeout=40, message="two windows and half a third committed")
        assert not cluster.errors("paged")
    assert committed(db)["sums"] == [sum(range(0, 2000)), sum(range(2000, 4000))]
    # When a second run goes on from the committed position, its window restored from the store
    Probe.limit = 8000
    with LocalCluster() as cluster:
        cluster.submit("paged", topology(db))
        poll_for(lambda: len(committed(db).get("sums", [])) == 4, timeout=40, message="four windows")
        assert not cluster.errors("paged")
    # Then every window is exact, and no more than the bound was ever held while summing
    assert committed(db)["sums"] == [sum(range(k, k + WINDOW)) for k in (0, 2000, 4000, 6000)]
    assert Held.kinds == {"TupleView"} and 0 < Held.most <= BOUND
