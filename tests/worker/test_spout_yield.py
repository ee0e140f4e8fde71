"""A spout yields to its own worker's bolts (topology.spout.yield.queued.tuples):
it stops calling next_tuple while they have work queued, instead of filling
their queues up to max spout pending (or, acking off, to the queues' high
watermark); yet a spout with few trees in flight always gets to emit, and
one with acking off emits a batch after 50 ms of yielding, so a bolt kept
busy by another source cannot starve it."""

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
ACKING = pytest.mark.parametrize("acking", [{}, {"topology.acker.executors": 0}],
                                 ids=["acking on", "acking off"])


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
        throttled_by_pending = False  # as a spout that bounds itself: it never yields

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
        # The threshold these tests reason about (the default is 1000); a conf may change it.
        config = {"topology.max.spout.pending": MAX_PENDING, "topology.spout.yield.queued.tuples": 200,
                  **conf}
        numbers = Numbers.spec()
        if flood:
            flooder = Flood.spec()
            slow = Slow.spec(inputs=[numbers, flooder])
        else:
            slow = Slow.spec(inputs=[numbers])

    return T


@ACKING
def test_a_spout_stops_filling_its_workers_queues_once_they_hold_work(acking: dict[str, Any]) -> None:
    # Given a spout (max spout pending 2000, or acking off) before a slow bolt in the same worker
    counts = Counts()
    fast = threading.Event()
    worst = [0]

    def bounded() -> bool:
        worst[0] = max(worst[0], counts.gap)
        return counts.gap < 600

    with LocalCluster() as cluster:
        runner = cluster.submit("yield", topology(counts, fast, acking))
        try:
            poll_for(lambda: counts.processed > 500, message="the flow to start")
            start = counts.processed
            # Then the bolt's queue stays near the yield threshold (200 tuples; a spout
            # with under an eighth of its max pending in flight, 250 trees, still emits;
            # acking off, a batch of 64 every 50 ms), nowhere near the 2000 trees max
            # spout pending allows, or the 32768 of the queue's high watermark
            assert stay(bounded, seconds=1.0), f"{counts.gap} tuples queued"
            # and the flow goes on
            assert counts.processed - start > 500
            assert runner.stats()["numbers"]["failed"] == 0
        finally:
            fast.set()
    assert worst[0] < 600


@ACKING
def test_with_the_yield_off_the_spout_fills_the_queue_to_max_pending(acking: dict[str, Any]) -> None:
    # Given the same topology with topology.spout.yield.queued.tuples: 0
    counts = Counts()
    fast = threading.Event()
    with LocalCluster() as cluster:
        conf = {"topology.spout.yield.queued.tuples": 0, **acking}
        cluster.submit("yield-off", topology(counts, fast, conf))
        try:
            # Then the queue holds (nearly) every tree max spout pending allows, or more
            poll_for(lambda: counts.gap > MAX_PENDING - 200, timeout=10,
                     message=f"about {MAX_PENDING} tuples queued")
        finally:
            fast.set()


@ACKING
def test_a_bolt_kept_busy_by_another_source_does_not_starve_the_spout(acking: dict[str, Any]) -> None:
    # Given the slow bolt's queue (high watermark 1000, low 500: never under the yield's
    # 200) kept full by a second spout that never yields
    counts = Counts()
    fast = threading.Event()
    conf = {"topology.executor.receive.buffer.size": 1000, **acking}
    with LocalCluster() as cluster:
        cluster.submit("starve", topology(counts, fast, conf, flood=True))
        try:
            poll_for(lambda: counts.flooded > 1000, message="the flood to start")
            processed = counts.processed
            # Then the first spout's tuples still get through: acking on, it always has an
            # eighth of its max pending in flight; acking off, it emits after 50 ms of yielding
            poll_for(lambda: counts.processed > processed + 200, timeout=20,
                     message=f"200 more of the first spout's tuples processed (now {counts.processed})")
        finally:
            fast.set()


def test_a_spout_that_waits_in_next_tuple_sends_each_tuple_without_waiting_for_a_batch() -> None:
    """A spout that sleeps in next_tuple (as Storm's examples' spouts do) has its tuples
    sent as it emits them, not once a batch of next_tuple calls (64 sleeps) has passed."""
    seen: list[int] = []
    emitted: list[int] = []

    class Slow(Spout):
        outputs = ["n"]

        def next_tuple(self) -> None:
            time.sleep(0.05)
            emitted.append(len(emitted))
            self.emit([emitted[-1]])

    class Seen(Bolt):
        def process(self, tup: Any) -> None:
            seen.append(tup.values.n)

    class SlowSpout(Topology):
        slow = Slow.spec()
        seen = Seen.spec(inputs=[slow])

    with LocalCluster() as cluster:
        cluster.submit("slow", SlowSpout, {"topology.spout.batch.size": 64})
        poll_for(lambda: len(seen) >= 3, 30, "three tuples at the bolt")
        # Before the spout emitted a batch's worth: each went as it was emitted.
        assert len(emitted) < 64
