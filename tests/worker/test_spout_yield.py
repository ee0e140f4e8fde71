"""A spout yields to its own worker's bolts (topology.spout.yield.queued.tuples):
it stops calling next_tuple while they have work queued, instead of filling
their queues up to max spout pending; yet a spout with few trees in flight
always gets to emit, so a bolt kept busy by another source cannot starve it."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from squall import Bolt, LocalCluster, Spout, Topology
from squall.testing import poll_for
from tests.helpers import stay

pytestmark = pytest.mark.timeout(60)

MAX_PENDING = 2000


class Counts:
    def __init__(self) -> None:
        self.emitted = 0  # the reliable spout's thread only
        self.processed = 0  # the bolt's thread only
        self.flooded = 0  # the flood spout's thread only

    @property
    def gap(self) -> int:
        """The reliable spout's tuples emitted and not yet processed: queued."""
        return self.emitted - self.processed


def topology(counts: Counts, fast: threading.Event, conf: dict[str, Any],
             flood: bool = False) -> type[Topology]:
    class Numbers(Spout):
        outputs = ["n"]

        def next_tuple(self) -> None:
            counts.emitted += 1
            self.emit([counts.emitted], tup_id=counts.emitted)

    class Flood(Spout):
        """Untracked tuples as fast as it can: never yields, keeps the bolt's queue full."""
        outputs = ["n"]

        def next_tuple(self) -> None:
            counts.flooded += 1
            self.emit([-1])

    class Slow(Bolt):
        def process(self, tup: Any) -> None:
            if not fast.is_set():
                time.sleep(0.0005)
            if tup.values.n > 0:
                counts.processed += 1

    class T(Topology):
        config = {"topology.max.spout.pending": MAX_PENDING, **conf}
        numbers = Numbers.spec()
        if flood:
            flooder = Flood.spec()
            slow = Slow.spec(inputs=[numbers, flooder])
        else:
            slow = Slow.spec(inputs=[numbers])

    return T


def test_a_spout_stops_filling_its_workers_queues_once_they_hold_work() -> None:
    # Given a reliable spout (max spout pending 2000) before a slow bolt in the same worker
    counts = Counts()
    fast = threading.Event()
    worst = [0]

    def bounded() -> bool:
        worst[0] = max(worst[0], counts.gap)
        return counts.gap < 600

    with LocalCluster() as cluster:
        runner = cluster.submit("yield", topology(counts, fast, {}))
        try:
            poll_for(lambda: counts.processed > 500, message="the flow to start")
            start = counts.processed
            # Then the bolt's queue stays near the yield threshold (200 tuples; a spout
            # with under an eighth of its max pending in flight, 250 trees, still emits),
            # nowhere near the 2000 trees max spout pending allows
            assert stay(bounded, seconds=1.0), f"{counts.gap} tuples queued"
            # and the flow goes on
            assert counts.processed - start > 500
            assert runner.stats()["numbers"]["failed"] == 0
        finally:
            fast.set()
    assert worst[0] < 600


def test_with_the_yield_off_the_spout_fills_the_queue_to_max_pending() -> None:
    # Given the same topology with topology.spout.yield.queued.tuples: 0
    counts = Counts()
    fast = threading.Event()
    with LocalCluster() as cluster:
        cluster.submit("yield-off", topology(counts, fast, {"topology.spout.yield.queued.tuples": 0}))
        try:
            # Then the queue holds (nearly) every tree max spout pending allows
            poll_for(lambda: counts.gap > MAX_PENDING - 200, timeout=10,
                     message=f"about {MAX_PENDING} tuples queued")
        finally:
            fast.set()


def test_a_bolt_kept_busy_by_another_source_does_not_starve_the_spout() -> None:
    # Given the slow bolt's queue kept full by an untracked flood from a second spout
    counts = Counts()
    fast = threading.Event()
    with LocalCluster() as cluster:
        runner = cluster.submit("starve", topology(counts, fast, {}, flood=True))
        try:
            poll_for(lambda: counts.flooded > 1000, message="the flood to start")
            acked = runner.stats()["numbers"]["acked"]
            # Then the reliable spout's trees still get through, the flood notwithstanding
            poll_for(lambda: runner.stats()["numbers"]["acked"] > acked + 200, timeout=20,
                     message=f"200 more trees acked (now {runner.stats()['numbers']})")
        finally:
            fast.set()
