"""Every scenario of the FsShelter message-flow document
(../shared/seeds/fsshelter-message-flow.txt), run for real in local mode:
real executor threads, real acker, real queues."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from squall import Bolt, FailedException, FakeClock, LocalCluster, Spout, Topology
from squall.testing import poll_for
from tests.helpers import Journal, gate, numbers_spout, stay


def test_a_unreliable_spout_is_never_acked_or_failed(cluster: LocalCluster) -> None:
    # Given a spout emitting without message ids
    journal = Journal()

    class Sink(Bolt):
        def process(self, tup: Any) -> None:
            journal.add("seen", tup.values.n)

    class T(Topology):
        numbers = numbers_spout(journal, 50, reliable=False).spec()
        sink = Sink.spec(inputs=[numbers])

    runner = cluster.submit("a", T)
    # Then every tuple is delivered, and none is tracked by the acker
    poll_for(lambda: journal.count("seen") == 50, message="50 tuples at the sink")
    assert stay(lambda: journal.count("acked") == 0 and journal.count("failed") == 0)
    assert runner.stats()["__acker"]["pending"] == 0
    assert sorted(journal.seen) == list(range(1, 51))


def test_b_reliable_tree_is_acked_only_when_the_whole_tree_is_done(cluster: LocalCluster) -> None:
    # Given spout -> split (2 children per tuple) -> gate (holds until released)
    journal = Journal()
    release = threading.Event()

    class Fan(Bolt):
        outputs = ["id"]

        def process(self, tup: Any) -> None:
            self.emit([tup.values.n * 10])
            self.emit([tup.values.n * 10 + 1])

    class T(Topology):
        config = {"topology.tick.tuple.freq.secs": 0.05}
        numbers = numbers_spout(journal, 5).spec()
        fan = Fan.spec(inputs=[numbers])
        hold = gate(journal, release).spec(inputs=[fan])

    cluster.submit("b", T)
    # When the first two levels are done but the leaves are held
    poll_for(lambda: journal.count("seen") == 10, message="10 leaves held")
    # Then no spout tuple is acked
    assert stay(lambda: journal.count("acked") == 0)
    # When the leaves are acked, every spout tuple completes, once
    release.set()
    poll_for(lambda: journal.count("acked") == 5, message="5 acks")
    assert sorted(journal.acked) == [1, 2, 3, 4, 5]
    assert journal.failed == []


def test_b_multi_anchored_dag_completes_only_with_all_its_parents(cluster: LocalCluster) -> None:
    # Given a join bolt that anchors one output to tuples of two spout trees,
    # and a leaf gate holding that output
    journal = Journal()
    release = threading.Event()

    class Join(Bolt):
        auto_ack = False
        auto_anchor = False
        outputs = ["id"]

        def initialize(self, conf: dict[str, Any], context: Any) -> None:
            self.waiting: list[Any] = []

        def process(self, tup: Any) -> None:
            self.waiting.append(tup)
            if len(self.waiting) == 2:
                a, b = self.waiting
                self.emit([a.values.n + b.values.n], anchors=[a, b])
                self.emit([a.values.n * b.values.n], anchors=[a, b, a])  # same anchor twice
                self.ack(a)
                self.ack(b)
                self.waiting = []

    class T(Topology):
        config = {"topology.tick.tuple.freq.secs": 0.05}
        numbers = numbers_spout(journal, 4).spec()
        join = Join.spec(inputs=[numbers])
        hold = gate(journal, release).spec(inputs=[join])

    cluster.submit("dag", T)
    poll_for(lambda: journal.count("seen") == 4, message="joined outputs held")
    assert stay(lambda: journal.count("acked") == 0)
    release.set()
    poll_for(lambda: journal.count("acked") == 4, message="both parents of each join acked")
    assert sorted(journal.acked) == [1, 2, 3, 4] and journal.failed == []


def test_c_max_spout_pending_stops_and_resumes_next_tuple(cluster: LocalCluster) -> None:
    journal = Journal()
    release = threading.Event()

    class T(Topology):
        config = {"topology.max.spout.pending": 3, "topology.tick.tuple.freq.secs": 0.05}
        numbers = numbers_spout(journal, 10).spec()
        hold = gate(journal, release).spec(inputs=[numbers])

    cluster.submit("c", T)
    # The spout stops at exactly max pending
    poll_for(lambda: journal.count("emitted") == 3, message="3 pending")
    assert stay(lambda: journal.count("emitted") == 3)
    # Acks arrive: it resumes, and never has more than 3 pending
    release.set()
    poll_for(lambda: journal.count("acked") == 10, message="all 10 acked")
    assert journal.emitted == list(range(1, 11))


def test_d_a_tuple_never_acked_fails_between_t_and_2t_and_replays() -> None:
    clock = FakeClock()
    journal = Journal()
    release = threading.Event()  # never set: the gate never acks

    class Replaying(Spout):
        outputs = ["n"]

        def initialize(self, conf: dict[str, Any], context: Any) -> None:
            self.todo = [1]

        def next_tuple(self) -> None:
            if self.todo:
                n = self.todo.pop()
                journal.add("emitted", n)
                self.emit([n], tup_id=n)

        def fail(self, tup_id: Any) -> None:
            journal.add("failed", tup_id)
            self.todo.append(tup_id)  # replay

    class T(Topology):
        config = {"topology.message.timeout.secs": 30}
        numbers = Replaying.spec()
        hold = gate(journal, release).spec(inputs=[numbers])

    with LocalCluster(clock=clock) as cluster:
        runner = cluster.submit("d", T)
        assert runner.wait_ready(5)
        poll_for(lambda: journal.count("seen") == 1, message="tuple held by the gate")
        for _ in range(29):  # just under T: still pending
            clock.advance(1)
        assert stay(lambda: journal.count("failed") == 0)
        for _ in range(31):  # by 2T it must have failed, once, and been replayed
            clock.advance(1)
        poll_for(lambda: journal.count("failed") == 1, message="the timeout fail")
        poll_for(lambda: journal.count("seen") == 2, message="the replay reaching the gate")
        assert journal.emitted == [1, 1]
        assert journal.acked == []


def test_e_bolt_exception_fails_the_tuple_at_once_and_the_bolt_goes_on() -> None:
    clock = FakeClock()  # never advanced: a fail can only come from the exception
    journal = Journal()

    class Picky(Bolt):
        def process(self, tup: Any) -> None:
            if tup.values.n == 3:
                raise ValueError("three is not allowed")
            if tup.values.n == 4:
                raise FailedException("four is failed on purpose")
            journal.add("seen", tup.values.n)

    class T(Topology):
        numbers = numbers_spout(journal, 6).spec()
        picky = Picky.spec(inputs=[numbers])

    with LocalCluster(clock=clock) as cluster:
        cluster.submit("e", T)
        poll_for(lambda: journal.count("acked") + journal.count("failed") == 6, message="6 settled")
        assert sorted(journal.failed) == [3, 4]
        assert sorted(journal.acked) == [1, 2, 5, 6]
        assert sorted(journal.seen) == [1, 2, 5, 6]
        errors = cluster.errors("e")
        # the ValueError is reported (not fatal); FailedException is not an error
        assert [(e.component, e.fatal) for e in errors] == [("picky", False)]
        assert "three is not allowed" in errors[0].error


def test_ackers_zero_acks_at_emit(cluster: LocalCluster) -> None:
    journal = Journal()
    release = threading.Event()  # the gate would never ack

    class T(Topology):
        config = {"topology.acker.executors": 0}
        numbers = numbers_spout(journal, 5).spec()
        hold = gate(journal, release).spec(inputs=[numbers])

    runner = cluster.submit("zero", T)
    poll_for(lambda: journal.count("acked") == 5, message="5 acks without any ack from the gate")
    assert "__acker" not in runner.stats()
    assert journal.failed == []


def test_reliable_emit_with_no_subscriber_is_acked_at_once(cluster: LocalCluster) -> None:
    journal = Journal()

    class T(Topology):
        numbers = numbers_spout(journal, 3).spec()

    cluster.submit("lonely", T)
    poll_for(lambda: journal.count("acked") == 3, message="3 acks")


def test_unanchored_bolt_emits_are_not_tracked(cluster: LocalCluster) -> None:
    journal = Journal()
    release = threading.Event()

    class Unanchored(Bolt):
        outputs = ["id"]

        def process(self, tup: Any) -> None:
            self.emit([tup.values.n], anchors=[])

    class T(Topology):
        numbers = numbers_spout(journal, 4).spec()
        loose = Unanchored.spec(inputs=[numbers])
        hold = gate(journal, release).spec(inputs=[loose])

    cluster.submit("loose", T)
    # the gate never acks, but its tuples are not in the tree: the spout is acked
    poll_for(lambda: journal.count("acked") == 4, message="4 acks")
    # (the acks can come before the gate has taken its tuples: they do not wait for it)
    poll_for(lambda: journal.count("seen") == 4, message="the gate saw the 4 tuples")


@pytest.mark.parametrize("workers", [1, 2])
def test_multi_worker_local_mode_tracks_trees_across_workers(workers: int) -> None:
    journal = Journal()

    class Double(Bolt):
        outputs = ["n"]

        def process(self, tup: Any) -> None:
            self.emit([tup.values.n * 2])

    class Sink(Bolt):
        def process(self, tup: Any) -> None:
            journal.add("seen", tup.values.n)

    class T(Topology):
        config = {"topology.workers": workers}
        numbers = numbers_spout(journal, 200).spec()
        double = Double.spec(inputs=[numbers], par=2)
        sink = Sink.spec(inputs=[double], par=2)

    with LocalCluster() as cluster:
        cluster.submit("mw", T)
        poll_for(lambda: journal.count("acked") == 200, message="200 acks")
    assert sorted(journal.seen) == [2 * i for i in range(1, 201)]
