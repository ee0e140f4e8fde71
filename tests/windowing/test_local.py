"""Windowed bolts in local mode: real executor threads, real ackers, real
queues; time from a FakeClock where windows are driven by it."""

from __future__ import annotations

import queue
import threading
from typing import Any

import pytest

from squall import Bolt, FakeClock, LocalCluster, Spout, Topology
from squall.testing import poll_for
from squall.windowing import LATE_TUPLE_FIELD, Count, Duration, WindowedBolt
from tests.helpers import Journal, gate, numbers_spout, stay

pytestmark = pytest.mark.timeout(60)


class Sums(WindowedBolt):
    outputs = ["total", "size", "start", "end"]

    def process_window(self, window: Any) -> None:
        self.emit([sum(t.values.n for t in window.tuples), len(window.tuples), window.start, window.end])


def recorder(journal: Journal) -> type[Bolt]:
    class Record(Bolt):
        def process(self, tup: Any) -> None:
            journal.add("seen", tuple(tup.values))

    return Record


def test_sliding_count_window_sums_and_acks_exactly_the_expired(cluster: LocalCluster) -> None:
    # Given 100 reliable numbers into a Count(30) window sliding by Count(10)
    journal, out = Journal(), Journal()

    class T(Topology):
        numbers = numbers_spout(journal, 100).spec()
        sliding = Sums.spec(inputs=[numbers], window=Count(30), slide=Count(10))
        sink = recorder(out).spec(inputs=[sliding])

    runner = cluster.submit("sliding", T)
    # Then every tenth tuple evaluates the last 30
    poll_for(lambda: out.count("seen") == 10, message="10 windows")
    expected = [sum(range(max(1, 10 * k - 29), 10 * k + 1)) for k in range(1, 11)]
    assert [s[0] for s in out.seen] == expected
    assert [s[1] for s in out.seen] == [10, 20, 30, 30, 30, 30, 30, 30, 30, 30]
    assert all(s[2] is None and s[3] is None for s in out.seen)  # count windows have no bounds
    # And the tuples that left the window (1..70) are acked, the last 30 still held
    poll_for(lambda: journal.count("acked") == 70, message="70 expired tuples acked")
    assert sorted(journal.acked) == list(range(1, 71))
    assert stay(lambda: journal.count("acked") == 70 and not journal.failed)
    assert runner.stats()["__acker"]["pending"] == 30


def test_tumbling_duration_window_acks_every_tuple_after_the_anchored_output(fake_clock: FakeClock) -> None:
    # Given a 1 s tumbling window on a FakeClock whose output is held at a gate
    journal, release = Journal(), threading.Event()

    class T(Topology):
        config = {"topology.tick.tuple.freq.secs": 0.05}  # the gate's ticks; the window sets its own
        numbers = numbers_spout(journal, 50).spec()
        tumbling = Sums.spec(inputs=[numbers], tumbling=Duration.seconds(1))
        hold = gate(journal, release).spec(inputs=[tumbling])

    with LocalCluster(clock=fake_clock) as cluster:
        runner = cluster.submit("tumbling", T)
        poll_for(lambda: runner.stats()["tumbling"]["executed"] == 50, message="50 tuples buffered")
        assert journal.count("seen") == 0  # no window before its slide
        # When the clock passes the window's end, the window is evaluated
        fake_clock.advance(1.0)
        poll_for(lambda: journal.count("seen") == 1, message="one window")
        assert journal.seen == [1275]  # the gate journals the first value: the sum
        # and when the next slide expires its tuples, they are acked but the trees stay
        # open: the sum is anchored to all 50 and the gate holds it
        fake_clock.advance(1.0)
        poll_for(lambda: runner.stats()["tumbling"]["acked"] == 50, message="expired tuples acked")
        assert stay(lambda: journal.count("acked") == 0)
        # When the gate acks the sum, every spout tuple completes, none left pending
        release.set()
        fake_clock.advance(0.05)
        poll_for(lambda: journal.count("acked") == 50, message="all 50 trees complete")
        assert sorted(journal.acked) == list(range(1, 51)) and journal.failed == []
        poll_for(lambda: runner.stats()["__acker"]["pending"] == 0, message="acker empty")


def test_window_bounds_are_epoch_ms_of_the_duration(fake_clock: FakeClock) -> None:
    journal, out = Journal(), Journal()

    class T(Topology):
        numbers = numbers_spout(journal, 5).spec()
        tumbling = Sums.spec(inputs=[numbers], tumbling=Duration.seconds(2))
        sink = recorder(out).spec(inputs=[tumbling])

    import time

    with LocalCluster(clock=fake_clock) as cluster:
        runner = cluster.submit("bounds", T)
        poll_for(lambda: runner.stats()["tumbling"]["executed"] == 5, message="5 tuples buffered")
        fake_clock.advance(2.0)
        poll_for(lambda: out.count("seen") == 1, message="one window")
    total, size, start, end = out.seen[0]
    assert (total, size) == (15, 5)
    assert end - start == 2000
    assert abs(end - time.time() * 1000) < 60_000  # epoch milliseconds, not monotonic time


class FedSpout(Spout):
    """Emits what the test puts in ``feed``: (id, ts), reliably."""

    outputs = ["id", "ts"]
    feed: queue.Queue
    journal: Journal

    def next_tuple(self) -> None:
        try:
            item = self.feed.get_nowait()
        except queue.Empty:
            return
        self.emit(list(item), tup_id=item[0])

    def ack(self, tup_id: Any) -> None:
        self.journal.add("acked", tup_id)

    def fail(self, tup_id: Any) -> None:
        self.journal.add("failed", tup_id)


class IdWindows(WindowedBolt):
    outputs = ["ids", "start", "end"]

    def process_window(self, window: Any) -> None:
        self.emit([[t.values.id for t in window.tuples], window.start, window.end])


def late_count(cluster: LocalCluster) -> int:
    tasks = cluster.metrics("late").get("windows", {})
    return sum(snap["counters"].get("late_tuples", 0) for snap in tasks.values())


def fed(journal: Journal) -> tuple[type[Spout], queue.Queue]:
    feed: queue.Queue = queue.Queue()
    return type("Fed", (FedSpout,), {"feed": feed, "journal": journal}), feed


@pytest.mark.parametrize("late_stream", [None, "late"])
def test_late_tuples_are_counted_and_emitted_or_dropped(fake_clock: FakeClock, late_stream: Any) -> None:
    # Given an event-time tumbling window of 10 s, lag 1 s, watermarks every second
    journal, out, late = Journal(), Journal(), Journal()
    spout, feed = fed(journal)
    specs: dict[str, Any] = {"events": spout.spec()}
    specs["windows"] = IdWindows.spec(inputs=[specs["events"]], tumbling=Duration.seconds(10),
                                      timestamp_field="ts", lag=Duration.seconds(1),
                                      watermark_interval=Duration.seconds(1), late_stream=late_stream)
    specs["sink"] = recorder(out).spec(inputs=[specs["windows"]])
    if late_stream:
        class LateSink(Bolt):
            def process(self, tup: Any) -> None:
                late.add("seen", tup.values[0])
        specs["late_sink"] = LateSink.spec(inputs=[specs["windows"][late_stream]])
    T = Topology.from_specs("Late", specs)  # noqa: N806

    with LocalCluster(clock=fake_clock) as cluster:
        runner = cluster.submit("late", T)
        for item in ((1, 2000), (2, 4000), (3, 15000)):
            feed.put(item)
        poll_for(lambda: runner.stats()["windows"]["executed"] == 3, message="3 tuples in")
        # When the watermark (15 - 1 = 14 s) passes the first window's end
        fake_clock.advance(1.0)
        poll_for(lambda: out.count("seen") == 1, message="the first window")
        assert out.seen[0][0] == [1, 2] and out.seen[0][2] - out.seen[0][1] == 10_000
        # And a tuple below the watermark arrives
        feed.put((4, 9000))
        feed.put((5, 16000))
        poll_for(lambda: runner.stats()["windows"]["executed"] == 5, message="2 more tuples in")
        # Then it is counted as late, acked, and emitted on the late stream when there is one
        poll_for(lambda: late_count(cluster) == 1, message="late counted")
        poll_for(lambda: 4 in journal.acked, message="the late tuple acked")
        if late_stream:
            poll_for(lambda: late.count("seen") == 1, message="late tuple emitted")
            detached = late.seen[0]
            assert detached["values"] == [4, 9000] and detached["ts"] == 9000
            assert detached["component"] == "events"
            assert runner.plan.components["windows"].streams["late"].fields == (LATE_TUPLE_FIELD,)
        else:
            assert stay(lambda: late.count("seen") == 0)
        # And it is in no window
        feed.put((6, 40000))
        poll_for(lambda: runner.stats()["windows"]["executed"] == 6, message="the watermark mover in")
        fake_clock.advance(1.0)
        poll_for(lambda: out.count("seen") == 2, message="the second window")
        assert out.seen[1][0] == [3, 5]


def test_a_failing_window_fails_its_tuples_once_and_never_acks_them(cluster: LocalCluster) -> None:
    # Given a tumbling Count(5) window whose first evaluation raises
    journal, out = Journal(), Journal()

    class Flaky(WindowedBolt):
        outputs = ["ids"]
        raised = False

        def process_window(self, window: Any) -> None:
            if not Flaky.raised:
                Flaky.raised = True
                msg = "boom"
                raise RuntimeError(msg)
            self.emit([[t.values.n for t in window.tuples]])

    class T(Topology):
        numbers = numbers_spout(journal, 10).spec()
        windows = Flaky.spec(inputs=[numbers], tumbling=Count(5))
        sink = recorder(out).spec(inputs=[windows])

    cluster.submit("flaky", T)
    # Then the first window's tuples fail (once each), the error is reported, and
    # the next window, once expired, acks 6..10 only
    poll_for(lambda: sorted(journal.failed) == [1, 2, 3, 4, 5], message="the first window failed")
    poll_for(lambda: any("boom" in e.error for e in cluster.errors("flaky")), message="error reported")
    # (the second window may still be on its way to the sink when the failures are in)
    poll_for(lambda: out.seen == [([6, 7, 8, 9, 10],)], message="the second window emitted")
    assert stay(lambda: journal.count("acked") == 0 and journal.count("failed") == 5)
