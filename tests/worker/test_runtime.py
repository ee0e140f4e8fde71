"""Worker runtime behaviour observed in real local-mode runs: ticks, the
control queue, backpressure, activation, kill, streams, manual acking,
parallelism inside an executor, stats and the serialization check.

Every test runs real executor threads in a LocalCluster; time that matters
(ticks, timeouts) is driven by a FakeClock wherever the test can be exact.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from typing import Any

import pytest

from squall import (
    Bolt,
    FailedException,
    FakeClock,
    LocalCluster,
    Spout,
    SquallError,
    Stream,
    Topology,
    TopologyValidationError,
)
from squall.testing import poll_for
from tests.helpers import Journal, gate, numbers_spout, stay

TICK_FREQ = "topology.tick.tuple.freq.secs"


class Recorder:
    """Thread-safe lists of what components saw, keyed by kind."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[str, list[Any]] = defaultdict(list)

    def add(self, kind: str, item: Any = None) -> None:
        with self._lock:
            self._items[kind].append(item)

    def count(self, kind: str) -> int:
        with self._lock:
            return len(self._items[kind])

    def items(self, kind: str) -> list[Any]:
        with self._lock:
            return list(self._items[kind])


# -- tick tuples ---------------------------------------------------------------


@pytest.mark.parametrize("level", ["topology", "component"])
def test_ticks_arrive_once_per_period_of_fake_time(level: str) -> None:
    # Given a bolt with a 5 s tick frequency (set on the topology or on the
    # component only), a plain bolt beside it, and a fake clock
    clock = FakeClock()
    rec = Recorder()

    class Ticking(Bolt):
        def process(self, tup: Any) -> None:
            rec.add("processed", (tup.stream, tup.component))

        def process_tick(self, tup: Any) -> None:
            rec.add("ticks", (tup.stream, tup.component, tup.is_tick, tup.values.rate_secs))

    class Plain(Bolt):
        def process(self, tup: Any) -> None:
            rec.add("plain_processed", tup.stream)

        def process_tick(self, tup: Any) -> None:
            rec.add("plain_ticks", tup.stream)

    component_conf = {TICK_FREQ: 5} if level == "component" else None

    class T(Topology):
        config = {TICK_FREQ: 5} if level == "topology" else {}
        numbers = numbers_spout(rec, 3, reliable=False).spec()
        ticking = Ticking.spec(inputs=[numbers], config=component_conf)
        plain = Plain.spec(inputs=[numbers])

    with LocalCluster(clock=clock) as cluster:
        runner = cluster.submit("ticks", T)
        assert runner.wait_ready(5)
        poll_for(lambda: rec.count("processed") == 3, message="3 data tuples at the ticking bolt")

        # When fake time moves just short of one period: no tick
        clock.advance(4.9)
        assert stay(lambda: rec.count("ticks") == 0)

        # When it passes 5 s: exactly one tick
        clock.advance(0.2)
        poll_for(lambda: rec.count("ticks") == 1, message="the first tick")
        assert stay(lambda: rec.count("ticks") == 1)

        # When 10 s more pass: two more, three in total
        clock.advance(10)
        poll_for(lambda: rec.count("ticks") == 3, message="three ticks")
        assert stay(lambda: rec.count("ticks") == 3)

    # Then every tick is a system tick tuple, and none went to process()
    assert rec.items("ticks") == [("__tick", "__system", True, 5)] * 3
    assert rec.items("processed") == [("default", "numbers")] * 3
    if level == "component":
        # a component's own config does not give its neighbours ticks
        assert rec.items("plain_ticks") == []
    else:
        assert rec.count("plain_ticks") == 3
    assert rec.items("plain_processed") == ["default"] * 3


def test_ticks_are_not_stuck_behind_a_data_backlog() -> None:
    # Given a slow bolt (2 ms per tuple) with a real 50 ms tick, fed 2000
    # tuples at once by an unreliable spout
    total = 2000
    rec = Recorder()
    fast = threading.Event()  # set at the end so that shutdown does not wait for the backlog
    progress = {"emitted": 0, "processed": 0}

    class Burst(Spout):
        outputs = ["n"]

        def next_tuple(self) -> None:
            if progress["emitted"] < total:
                progress["emitted"] += 1
                self.emit([progress["emitted"]])

    class Slow(Bolt):
        def process(self, tup: Any) -> None:
            if not fast.is_set():
                time.sleep(0.002)
            progress["processed"] += 1

        def process_tick(self, tup: Any) -> None:
            rec.add("ticks", (progress["processed"], progress["emitted"]))

    class T(Topology):
        burst = Burst.spec()
        slow = Slow.spec(inputs=[burst], config={TICK_FREQ: 0.05})

    def ticks_during_backlog() -> int:
        # ticks seen once the whole burst was queued, before half of it was processed
        return sum(1 for done, emitted in rec.items("ticks") if emitted == total and done < total // 2)

    with LocalCluster() as cluster:
        cluster.submit("backlog", T)
        try:
            # Then ticks keep arriving while the backlog is far from drained
            poll_for(lambda: ticks_during_backlog() >= 3, timeout=5,
                     message="3 ticks while more than half of the burst is still queued")
            assert progress["processed"] < total
        finally:
            fast.set()


# -- backpressure ----------------------------------------------------------------


class FloodCounts:
    def __init__(self) -> None:
        self.emitted = 0  # written by the spout thread only
        self.processed = 0  # written by the bolt thread only

    @property
    def gap(self) -> int:
        return self.emitted - self.processed


def flood_topology(counts: FloodCounts, fast: threading.Event, conf: dict[str, Any]) -> type[Topology]:
    class Flood(Spout):
        outputs = ["n"]

        def next_tuple(self) -> None:
            counts.emitted += 1
            self.emit([counts.emitted])

    class Slow(Bolt):
        def process(self, tup: Any) -> None:
            if not fast.is_set():
                time.sleep(0.001)
            counts.processed += 1

    class T(Topology):
        # The spout's yield to its bolts is off: these tests are about the receive buffer
        # alone (tests/worker/test_spout_yield.py has the yield's).
        config = {"topology.acker.executors": 0, "topology.spout.yield.queued.tuples": 0, **conf}
        flood = Flood.spec()
        slow = Slow.spec(inputs=[flood])

    return T


def test_a_small_receive_buffer_bounds_how_far_a_fast_spout_runs_ahead() -> None:
    # Given an unreliable spout emitting as fast as it can, no ackers, no max
    # pending, and a slow bolt whose receive buffer holds 100 tuples
    buffer = 100
    counts = FloodCounts()
    fast = threading.Event()
    T = flood_topology(counts, fast, {"topology.executor.receive.buffer.size": buffer})
    worst = [0]

    def bounded() -> bool:
        worst[0] = max(worst[0], counts.gap)
        return counts.gap < 5 * buffer

    with LocalCluster() as cluster:
        cluster.submit("flood", T)
        try:
            poll_for(lambda: counts.processed > 0, message="the flow to start")
            start = counts.emitted
            # Then over a second the spout never runs more than a few buffers ahead
            assert stay(bounded, seconds=1.0), f"gap reached {counts.gap} (limit {5 * buffer})"
            # And it was throttled, not stopped
            assert counts.emitted - start > 2 * buffer
            assert counts.processed > 2 * buffer
        finally:
            fast.set()
    assert worst[0] < 5 * buffer


def test_without_a_small_buffer_the_spout_runs_far_ahead() -> None:
    # Given the same flood with the default receive buffer (32768 tuples)
    counts = FloodCounts()
    fast = threading.Event()
    T = flood_topology(counts, fast, {})
    with LocalCluster() as cluster:
        cluster.submit("flood", T)
        try:
            # Then the spout gets far more than 5 x 100 tuples ahead of the bolt
            poll_for(lambda: counts.gap > 2500, timeout=5, message="the spout to run 2500 tuples ahead")
        finally:
            fast.set()


# -- activation --------------------------------------------------------------------


def test_deactivate_stops_next_tuple_and_activate_resumes_it(cluster: LocalCluster) -> None:
    # Given a spout recording its lifecycle calls and every next_tuple call
    rec = Recorder()

    class Watched(Spout):
        outputs = ["n"]

        def next_tuple(self) -> None:
            rec.add("calls")
            if rec.count("events") == 0 or rec.items("events")[-1] != "next_tuple":
                rec.add("events", "next_tuple")

        def activate(self) -> None:
            rec.add("events", "activate")

        def deactivate(self) -> None:
            rec.add("events", "deactivate")

    class T(Topology):
        watched = Watched.spec()

    cluster.submit("act", T)
    poll_for(lambda: rec.count("calls") > 5, message="next_tuple calls")
    # Then activate() was called once, at startup, before any next_tuple
    assert rec.items("events") == ["activate", "next_tuple"]

    # When the topology is deactivated
    cluster.deactivate("act")
    poll_for(lambda: "deactivate" in rec.items("events"), message="deactivate() called")
    calls = rec.count("calls")
    # Then next_tuple is no longer called
    assert stay(lambda: rec.count("calls") == calls)

    # When it is activated again, activate() is called and next_tuple resumes
    cluster.activate("act")
    poll_for(lambda: rec.count("calls") > calls + 5, message="next_tuple calls to resume")
    assert rec.items("events") == ["activate", "next_tuple", "deactivate", "activate", "next_tuple"]

    # Activating an active topology does not call activate() again
    cluster.activate("act")
    now = rec.count("calls")
    poll_for(lambda: rec.count("calls") > now + 5, message="more next_tuple calls")
    assert rec.items("events").count("activate") == 2


# -- kill and names ------------------------------------------------------------------


def lifecycle_topology(rec: Recorder) -> type[Topology]:
    class Source(Spout):
        outputs = ["n"]

        def initialize(self, conf: dict[str, Any], context: Any) -> None:
            self.i = 0

        def next_tuple(self) -> None:
            self.i += 1
            rec.add("spout", "next_tuple")
            self.emit([self.i], tup_id=self.i)

        def deactivate(self) -> None:
            rec.add("spout", "deactivate")

        def close(self) -> None:
            rec.add("spout", "close")

    class Sink(Bolt):
        def process(self, tup: Any) -> None:
            rec.add("processed", tup.values.n)

        def cleanup(self) -> None:
            rec.add("cleanup", self.context.task_id)

    class T(Topology):
        config = {"topology.max.spout.pending": 10}
        source = Source.spec()
        sink = Sink.spec(inputs=[source], tasks=2)

    return T


def test_kill_stops_the_topology_in_order_and_frees_its_name(cluster: LocalCluster) -> None:
    # Given a running topology
    rec = Recorder()
    T = lifecycle_topology(rec)
    runner = cluster.submit("doomed", T)
    poll_for(lambda: rec.count("processed") > 10, message="tuples flowing")

    # When it is killed
    cluster.kill("doomed")

    # Then its spout was closed and both bolt tasks cleaned up by the time kill returned
    assert rec.items("spout")[-1] == "close"
    assert rec.items("spout").count("close") == 1
    assert sorted(rec.items("cleanup")) == runner.plan.component_tasks["sink"]
    # And nothing runs any more
    spout_calls = rec.count("spout")
    processed = rec.count("processed")
    assert stay(lambda: rec.count("spout") == spout_calls and rec.count("processed") == processed)
    # And it is gone from the cluster
    with pytest.raises(SquallError, match="doomed"):
        cluster.stats("doomed")

    # When a topology is submitted again under the same name, it runs
    again = Recorder()
    cluster.submit("doomed", lifecycle_topology(again))
    poll_for(lambda: again.count("processed") > 10, message="the new topology's tuples")


def test_kill_with_a_wait_deactivates_before_closing(cluster: LocalCluster) -> None:
    rec = Recorder()
    cluster.submit("drain", lifecycle_topology(rec))
    poll_for(lambda: rec.count("processed") > 10, message="tuples flowing")
    cluster.kill("drain", wait=0.2)
    events = rec.items("spout")
    assert events[-2:] == ["deactivate", "close"]


def test_kill_stops_a_busy_bolt_promptly() -> None:
    # (Regression: the executor loop once went on through up to 2048 queued
    # tuples after being stopped, so kill outlived the shutdown timeout and
    # cleanup() ran after kill had returned.)
    # Given a slow bolt (3 ms per tuple) with a backlog of 3000 tuples, and a
    # 1 s shutdown timeout
    counts = FloodCounts()
    fast = threading.Event()
    rec = Recorder()

    class Burst(Spout):
        outputs = ["n"]

        def next_tuple(self) -> None:
            if counts.emitted < 3000:
                counts.emitted += 1
                self.emit([counts.emitted])

    class Slow(Bolt):
        def process(self, tup: Any) -> None:
            if not fast.is_set():
                time.sleep(0.003)
            counts.processed += 1

        def cleanup(self) -> None:
            rec.add("cleanup")

    class T(Topology):
        config = {"worker.shutdown.timeout.secs": 1.0}
        burst = Burst.spec()
        slow = Slow.spec(inputs=[burst])

    with LocalCluster() as cluster:
        cluster.submit("busy", T)
        poll_for(lambda: counts.emitted == 3000 and counts.processed > 10, message="a backlog")
        try:
            # When the topology is killed
            cluster.kill("busy")
            # Then by the time kill returns the bolt was cleaned up and processes nothing more
            assert rec.count("cleanup") == 1
            processed = counts.processed
            assert stay(lambda: counts.processed == processed)
        finally:
            fast.set()  # let a thread that outlived kill drain quickly


def test_a_long_process_sees_stopping_and_the_worker_clock() -> None:
    # Given a bolt whose process works until the component's clock passes a
    # deadline or the executor is stopping (as a batching bolt or a helper
    # thread would), under a fake clock
    clock = FakeClock()
    rec = Recorder()

    class Patient(Bolt):
        def process(self, tup: Any) -> None:
            rec.add("started", self.stopping())
            deadline = self.clock.now() + 60
            while self.clock.now() < deadline and not self.stopping():
                time.sleep(0.005)
            rec.add("ended", "clock" if self.clock.now() >= deadline else "stopping")

    class T(Topology):
        config = {"worker.shutdown.timeout.secs": 5.0}
        numbers = numbers_spout(rec, 2).spec()
        patient = Patient.spec(inputs=[numbers])

    with LocalCluster(clock=clock) as cluster:
        cluster.submit("patient", T)
        poll_for(lambda: rec.count("started") == 1, message="the first tuple")
        # Then the bolt waits on the worker's clock, not on real time
        assert stay(lambda: rec.count("ended") == 0, 0.5)
        clock.advance(60)
        poll_for(lambda: rec.items("ended") == ["clock"], message="the fake deadline")
        # And when the topology is killed, stopping() ends the second wait at once
        poll_for(lambda: rec.count("started") == 2, message="the second tuple")
        started = time.monotonic()
        cluster.kill("patient")
        assert rec.items("ended") == ["clock", "stopping"]
        assert time.monotonic() - started < 5.0
    assert rec.items("started") == [False, False]


@pytest.mark.parametrize("operation", ["kill", "activate", "deactivate", "stats", "errors", "topology"])
def test_unknown_topology_names_are_refused_by_name(cluster: LocalCluster, operation: str) -> None:
    with pytest.raises(SquallError, match="'no-such-topology'"):
        getattr(cluster, operation)("no-such-topology")


def test_a_second_topology_with_a_running_name_is_refused(cluster: LocalCluster) -> None:
    # Given a running topology
    rec = Recorder()
    cluster.submit("taken", lifecycle_topology(rec))
    poll_for(lambda: rec.count("processed") > 0, message="the first topology running")
    # When another is submitted under its name, it is refused
    other = Recorder()
    with pytest.raises(TopologyValidationError, match="'taken'"):
        cluster.submit("taken", lifecycle_topology(other))
    # And the first one is untouched, the second never started
    seen = rec.count("processed")
    poll_for(lambda: rec.count("processed") > seen, message="the first topology still running")
    assert other.count("spout") == 0


@pytest.mark.parametrize("name", ["a/b", "", "a b", "a.b", "a:b"])
def test_invalid_topology_names_are_refused(cluster: LocalCluster, name: str) -> None:
    rec = Recorder()
    with pytest.raises(TopologyValidationError, match="topology name"):
        cluster.submit(name, lifecycle_topology(rec))
    assert stay(lambda: rec.count("spout") == 0, seconds=0.1)


def test_leaving_the_cluster_context_stops_every_thread_in_order() -> None:
    # Given a topology running in a LocalCluster context
    rec = Recorder()
    before = set(threading.enumerate())
    with LocalCluster() as cluster:
        runner = cluster.submit("ctx", lifecycle_topology(rec))
        assert runner.wait_ready(5)
        poll_for(lambda: rec.count("processed") > 10, message="tuples flowing")
        started = [t for t in threading.enumerate() if t not in before]
        executors = [t for t in started if t.name.startswith("executor-")]
        # spout, two sink tasks in one executor, one acker
        assert sorted(t.name.split("-")[1] for t in executors) == ["__acker", "sink", "source"]

    # Then every thread the topology started is gone, and it was shut down orderly
    poll_for(lambda: not any(t.is_alive() for t in started), timeout=5,
             message="the topology's threads to end")
    assert not [t.name for t in threading.enumerate() if t.name.startswith("executor-") and t in started]
    assert rec.items("spout")[-1] == "close"
    assert len(rec.items("cleanup")) == 2


# -- streams and tuples ----------------------------------------------------------------


def test_named_streams_reach_only_their_subscribers_with_field_access(cluster: LocalCluster) -> None:
    # Given a bolt emitting words and numbers on two named streams (par 2,
    # each word tagged with the emitting task), and one consumer per stream
    rec = Recorder()

    class Lines(Spout):
        outputs = ["line"]

        def initialize(self, conf: dict[str, Any], context: Any) -> None:
            self.todo = ["a 1 b", "2 c 3", "d"]

        def next_tuple(self) -> None:
            if self.todo:
                self.emit([self.todo.pop(0)])

    class Tokens(Bolt):
        outputs = [Stream(["word"], name="words"), Stream(["n"], name="numbers")]

        def initialize(self, conf: dict[str, Any], context: Any) -> None:
            rec.add("token_tasks", context.task_id)

        def process(self, tup: Any) -> None:
            for token in tup["line"].split():
                if token.isdigit():
                    self.emit([int(token)], stream="numbers")
                else:
                    self.emit([f"{self.context.task_id}:{token}"], stream="words")

    class Words(Bolt):
        def process(self, tup: Any) -> None:
            rec.add("words", (tup.stream, tup.component, tup.task, tup.values.word, tup["word"],
                              tup.values[0]))

    class Numbers(Bolt):
        def process(self, tup: Any) -> None:
            rec.add("numbers", (tup.stream, tup.component, tup.values.n, tup["n"], tup.values[0]))

    class T(Topology):
        lines = Lines.spec()
        tokens = Tokens.spec(inputs=[lines], par=2)
        words = Words.spec(inputs=[tokens["words"]])
        numbers = Numbers.spec(inputs=[tokens["numbers"]])

    cluster.submit("streams", T)
    poll_for(lambda: rec.count("words") == 4 and rec.count("numbers") == 3, message="all tokens delivered")
    assert stay(lambda: rec.count("words") == 4 and rec.count("numbers") == 3)

    # Then each consumer got only its stream, and every way to read a field agrees
    words = rec.items("words")
    assert sorted(w[3].split(":")[1] for w in words) == ["a", "b", "c", "d"]
    for stream, component, task, by_attr, by_key, by_index in words:
        assert (stream, component) == ("words", "tokens")
        assert by_attr == by_key == by_index
        # tup.task is the emitting task
        assert task == int(by_attr.split(":")[0])
        assert task in rec.items("token_tasks")
    assert sorted(rec.items("numbers")) == [("numbers", "tokens", n, n, n) for n in (1, 2, 3)]


def test_bad_emits_fail_the_tuple_and_report_the_stream_and_field_count() -> None:
    # Given a bolt that emits on an undeclared stream for one input and the
    # wrong number of values for another (a fake clock: no timeouts)
    rec = Recorder()

    class Careless(Bolt):
        outputs = [Stream(["word"], name="words")]

        def process(self, tup: Any) -> None:
            if tup.values.n == 1:
                self.emit(["x"], stream="nowhere")
            elif tup.values.n == 2:
                self.emit(["x", "y"], stream="words")
            else:
                self.emit(["fine"], stream="words")

    class T(Topology):
        numbers = numbers_spout(rec, 3).spec()
        careless = Careless.spec(inputs=[numbers])

    with LocalCluster(clock=FakeClock()) as cluster:
        cluster.submit("bad", T)
        poll_for(lambda: rec.count("acked") + rec.count("failed") == 3, message="3 settled")
        errors = cluster.errors("bad")

    # Then the two bad tuples failed at once, the good one was acked
    assert sorted(rec.items("failed")) == [1, 2]
    assert rec.items("acked") == [3]
    # And each error names what was wrong
    assert [(e.component, e.fatal) for e in errors] == [("careless", False)] * 2
    texts = sorted(e.error for e in errors)
    assert any("'nowhere'" in t and "undeclared" in t for t in texts), texts
    assert any("2 values" in t and "'words'" in t and "1 fields" in t for t in texts), texts


# -- manual acking ------------------------------------------------------------------------


def test_manual_anchoring_and_late_ack_hold_the_spout_tuple() -> None:
    # Given a bolt with auto_ack = auto_anchor = False that holds its input,
    # emits a child anchored to it by hand, and acks the input only on a tick
    # after release; the child goes to a gate that also acks on release
    clock = FakeClock()
    rec = Recorder()
    journal = Journal()
    release_holder = threading.Event()
    release_gate = threading.Event()

    class Holder(Bolt):
        auto_ack = False
        auto_anchor = False
        outputs = ["id"]

        def initialize(self, conf: dict[str, Any], context: Any) -> None:
            self.held: list[Any] = []

        def process(self, tup: Any) -> None:
            self.held.append(tup)
            self.emit([tup.values.n], anchors=[tup])

        def process_tick(self, tup: Any) -> None:
            if release_holder.is_set():
                for held in self.held:
                    self.ack(held)
                    rec.add("holder_acked", held.values.n)
                self.held.clear()

    class T(Topology):
        config = {TICK_FREQ: 1}
        numbers = numbers_spout(rec, 1).spec()
        holder = Holder.spec(inputs=[numbers])
        hold = gate(journal, release_gate).spec(inputs=[holder])

    with LocalCluster(clock=clock) as cluster:
        runner = cluster.submit("manual", T)
        assert runner.wait_ready(5)
        poll_for(lambda: journal.count("seen") == 1, message="the anchored child at the gate")
        # Then nothing is acked while the holder keeps its input
        clock.advance(1)
        assert stay(lambda: rec.count("acked") == 0)

        # When the holder acks its input, the anchored child still holds the tree open
        release_holder.set()
        clock.advance(1)
        poll_for(lambda: rec.items("holder_acked") == [1], message="the holder's ack")
        assert stay(lambda: rec.count("acked") == 0)

        # When the child is acked too, the spout tuple completes
        release_gate.set()
        clock.advance(1)
        poll_for(lambda: rec.items("acked") == [1], message="the spout ack")
    assert rec.items("failed") == []


def test_batch_done_lets_a_bolt_flush_what_it_buffered_once_per_batch() -> None:
    # Given a bolt that only buffers in process (and on a tick) and emits and
    # acks what it holds in batch_done, after a spout of 2000 reliable numbers
    clock = FakeClock()
    rec = Recorder()

    class Buffering(Bolt):
        auto_ack = False
        auto_anchor = False
        outputs = ["n"]

        def initialize(self, conf: dict[str, Any], context: Any) -> None:
            self.held: list[Any] = []

        def process(self, tup: Any) -> None:
            self.held.append(tup)

        def process_tick(self, tup: Any) -> None:
            rec.add("ticked", len(self.held))

        def batch_done(self) -> None:
            rec.add("batch", len(self.held))
            for tup in self.held:
                self.emit([tup.values.n], anchors=[tup])
                self.ack(tup)
            self.held.clear()

    class Sink(Bolt):
        def process(self, tup: Any) -> None:
            rec.add("sunk", tup.values.n)

    class T(Topology):
        config = {TICK_FREQ: 1}
        numbers = numbers_spout(rec, 2000).spec()
        buffering = Buffering.spec(inputs=[numbers])
        sink = Sink.spec(inputs=[buffering])

    with LocalCluster(clock=clock) as cluster:
        cluster.submit("batches", T)
        # Then every number goes through and its tree completes
        poll_for(lambda: rec.count("acked") == 2000, message="every number acked")
        assert sorted(rec.items("sunk")) == list(range(1, 2001))
        # And batch_done ran once per batch, not once per tuple
        sizes = [n for n in rec.items("batch") if n]
        assert sum(sizes) == 2000
        assert len(sizes) < 2000
        # And it runs after a tick too (the tick found nothing buffered)
        batches = rec.count("batch")
        clock.advance(1)
        poll_for(lambda: rec.count("ticked") == 1 and rec.count("batch") > batches,
                 message="batch_done after the tick")
    assert rec.items("ticked") == [0]
    assert rec.items("failed") == []


def test_a_bolt_without_auto_fail_leaves_the_tuple_to_time_out() -> None:
    # Given a bolt with auto_fail = False whose process raises, and a 10 s
    # message timeout on a fake clock
    clock = FakeClock()
    rec = Recorder()

    class Broken(Bolt):
        auto_fail = False

        def process(self, tup: Any) -> None:
            raise RuntimeError(f"cannot handle {tup.values.n}")

    class T(Topology):
        config = {"topology.message.timeout.secs": 10}
        numbers = numbers_spout(rec, 1).spec()
        broken = Broken.spec(inputs=[numbers])

    with LocalCluster(clock=clock) as cluster:
        runner = cluster.submit("nofail", T)
        assert runner.wait_ready(5)
        # Then the error is reported ...
        poll_for(lambda: cluster.errors("nofail"), message="the error report")
        errors = cluster.errors("nofail")
        assert [(e.component, e.fatal) for e in errors] == [("broken", False)]
        assert "cannot handle 1" in errors[0].error
        # ... but the tuple is not failed, not even close to the timeout
        assert stay(lambda: rec.count("failed") == 0)
        clock.advance(9.9)
        assert stay(lambda: rec.count("failed") == 0)
        # When fake time passes twice the timeout, it fails (once)
        clock.advance(10.2)
        poll_for(lambda: rec.count("failed") == 1, message="the timeout fail")
        assert stay(lambda: rec.count("failed") == 1)
    assert rec.items("failed") == [1]
    assert rec.items("acked") == []


# -- parallelism and stats ------------------------------------------------------------------


def test_an_executor_runs_several_tasks_each_with_its_own_id(cluster: LocalCluster) -> None:
    # Given a bolt with 4 tasks on 2 executors, fed 200 tuples
    rec = Recorder()

    class WhoAmI(Bolt):
        def initialize(self, conf: dict[str, Any], context: Any) -> None:
            rec.add("tasks", (context.task_id, tuple(context.this_component_tasks)))

        def process(self, tup: Any) -> None:
            rec.add("seen", (self.context.task_id, threading.current_thread().name))

    class T(Topology):
        numbers = numbers_spout(rec, 200, reliable=False).spec()
        who = WhoAmI.spec(inputs=[numbers], par=2, tasks=4)

    cluster.submit("tasks", T)
    poll_for(lambda: rec.count("seen") == 200, message="200 tuples processed")

    # Then 4 instances with distinct task ids processed tuples, on 2 threads
    task_ids = sorted(t for t, _ in rec.items("tasks"))
    assert len(set(task_ids)) == 4
    assert all(tasks == tuple(task_ids) for _, tasks in rec.items("tasks"))
    seen = rec.items("seen")
    assert sorted({t for t, _ in seen}) == task_ids
    threads_of: dict[str, set[int]] = defaultdict(set)
    for task, thread in seen:
        threads_of[thread].add(task)
    assert sorted(len(tasks) for tasks in threads_of.values()) == [2, 2]


def test_stats_count_what_happened(cluster: LocalCluster) -> None:
    # Given 100 reliable tuples, a bolt that fails every tenth and emits two
    # children for the others, and a sink
    rec = Recorder()

    class Double(Bolt):
        outputs = ["n"]

        def process(self, tup: Any) -> None:
            if tup.values.n % 10 == 0:
                raise FailedException("tenth")
            self.emit([tup.values.n])
            self.emit([-tup.values.n])

    class Sink(Bolt):
        def process(self, tup: Any) -> None:
            rec.add("sunk", tup.values.n)

    class T(Topology):
        numbers = numbers_spout(rec, 100).spec()
        double = Double.spec(inputs=[numbers])
        sink = Sink.spec(inputs=[double], par=2)

    cluster.submit("stats", T)
    poll_for(lambda: rec.count("acked") + rec.count("failed") == 100, message="100 settled")

    expected = {
        "numbers": {"emitted": 100, "acked": 90, "failed": 10, "pending": 0},
        "double": {"executed": 100, "emitted": 180, "acked": 90, "failed": 10},
        "sink": {"executed": 180, "emitted": 0, "acked": 180, "failed": 0},
        "__acker": {"acked": 90, "failed": 10, "pending": 0},
    }

    def matches() -> bool:
        stats = cluster.stats("stats")
        return all(stats[c][k] == v for c, want in expected.items() for k, v in want.items())

    poll_for(matches, message=f"stats to match {expected}")
    stats = cluster.stats("stats")
    latency = stats["numbers"]["complete_latency_ms"]
    assert 0 <= latency["p50"] <= latency["p99"]
    assert "complete_latency_ms" not in stats["sink"]


# -- serialization -----------------------------------------------------------------------------


LONE_SURROGATE = "\ud800"  # a str, so the cheap type check passes; not encodable as UTF-8


@pytest.mark.parametrize("always_serialize", [False, True])
def test_always_try_serialize_refuses_what_msgpack_cannot_pack(always_serialize: bool) -> None:
    # Given a spout emitting a lone surrogate, which the cheap check lets
    # through but msgpack cannot pack (a fake clock: a dead worker is not restarted)
    rec = Recorder()

    class Odd(Spout):
        outputs = ["text"]

        def initialize(self, conf: dict[str, Any], context: Any) -> None:
            self.done = False

        def next_tuple(self) -> None:
            if not self.done:
                self.done = True
                self.emit([LONE_SURROGATE])

    class Sink(Bolt):
        def process(self, tup: Any) -> None:
            rec.add("seen", tup.values.text)

    class T(Topology):
        config = {"topology.testing.always.try.serialize": always_serialize}
        odd = Odd.spec()
        sink = Sink.spec(inputs=[odd])

    with LocalCluster(clock=FakeClock()) as cluster:
        cluster.submit("ser", T)
        if not always_serialize:
            # Then in one worker the value is delivered as it is
            poll_for(lambda: rec.count("seen") == 1, message="the odd value delivered")
            assert rec.items("seen") == [LONE_SURROGATE]
            assert cluster.errors("ser") == []
            return
        # Then with the full check it is refused where it was emitted, fatally
        poll_for(lambda: cluster.errors("ser"), message="the serialization error")
        errors = cluster.errors("ser")
        assert stay(lambda: rec.count("seen") == 0)
    assert [(e.component, e.fatal) for e in errors] == [("odd", True)]
    assert "msgpack cannot pack" in errors[0].error and "SerializationError" in errors[0].error


def test_a_value_only_the_wire_refuses_is_blamed_on_its_emitter() -> None:
    """A lone surrogate passes the cheap emit-time check; crossing workers it
    cannot be packed, and the fatal error names the spout that emitted it."""
    from squall import FakeClock
    from squall.testing import poll_for

    class Odd(Spout):
        outputs = ["text"]

        def initialize(self, conf: dict[str, Any], context: Any) -> None:
            self.done = False

        def next_tuple(self) -> None:
            if not self.done:
                self.done = True
                self.emit(["\ud800"])

    class Quiet(Bolt):
        def process(self, tup: Any) -> None:
            pass

    class T(Topology):
        config = {"topology.workers": 2, "topology.acker.executors": 0}
        odd = Odd.spec()
        sink = Quiet.spec(inputs=[odd])

    with LocalCluster(clock=FakeClock()) as cluster:
        cluster.submit("surrogate", T)
        errors = poll_for(lambda: cluster.errors("surrogate"), message="the fatal error")
    assert errors[0].fatal and errors[0].component == "odd"
    assert "msgpack cannot pack" in errors[0].error
