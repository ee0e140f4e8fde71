"""Scenario F of the FsShelter message-flow document: an unhandled exception
outside ``process`` kills the worker; it is restarted with exponential
backoff, the error is reported, and a reliable spout replays what was lost."""

from __future__ import annotations

import threading
from typing import Any

from squall import Bolt, FakeClock, LocalCluster, Spout, Topology
from squall.testing import poll_for
from tests.helpers import Broker, BrokerSpout, Journal, stay


def sink_for(journal: Journal) -> type[Bolt]:
    class Sink(Bolt):
        def process(self, tup: Any) -> None:
            journal.add("seen", tup.values[0])

    return Sink


def broker_spout(broker: Broker) -> type[BrokerSpout]:
    return type("Source", (BrokerSpout,), {"broker": broker})


def test_exception_in_next_tuple_restarts_the_worker_and_nothing_is_lost() -> None:
    broker = Broker([(i, f"m{i}") for i in range(300)])
    journal = Journal()
    crashed = threading.Event()

    class Flaky(BrokerSpout):
        def next_tuple(self) -> None:
            if len(broker.acks) >= 100 and not crashed.is_set():
                crashed.set()
                raise RuntimeError("source connection reset")
            super().next_tuple()

    Flaky.broker = broker

    class T(Topology):
        config = {"topology.max.spout.pending": 10}  # most messages still at the broker at the crash
        source = Flaky.spec()
        sink = sink_for(journal).spec(inputs=[source])

    with LocalCluster(conf={"supervisor.worker.restart.backoff.initial.secs": 0.05}) as cluster:
        runner = cluster.submit("f1", T)
        poll_for(lambda: broker.done, timeout=20, message="every message acked")
        errors = cluster.errors("f1")
        assert runner.restarts == 1
    assert [(e.component, e.fatal) for e in errors] == [("source", True)]
    assert "source connection reset" in errors[0].error and "next_tuple" in errors[0].trace
    assert sorted(broker.acks) == list(range(300))
    assert set(journal.seen) == set(range(300))


def test_exception_in_initialize_restarts_the_worker() -> None:
    journal = Journal()
    attempts: list[int] = []
    broker = Broker([(i, "x") for i in range(20)])

    class Fragile(Bolt):
        def initialize(self, conf: dict[str, Any], context: Any) -> None:
            attempts.append(1)
            if len(attempts) == 1:
                raise OSError("database not reachable yet")

        def process(self, tup: Any) -> None:
            journal.add("seen", tup.values.id)

    class T(Topology):
        source = broker_spout(broker).spec()
        fragile = Fragile.spec(inputs=[source])

    with LocalCluster(conf={"supervisor.worker.restart.backoff.initial.secs": 0.05}) as cluster:
        runner = cluster.submit("f2", T)
        poll_for(lambda: broker.done, timeout=20, message="every message acked")
        errors = cluster.errors("f2")
        assert runner.restarts == 1
    assert len(attempts) == 2
    assert errors[0].component == "fragile" and errors[0].fatal
    assert "database not reachable yet" in errors[0].error


def test_unserializable_emit_kills_the_worker_and_the_tuple_replays() -> None:
    broker = Broker([(i, "x") for i in range(50)])
    journal = Journal()
    emitted_bad = threading.Event()

    class Leaky(Bolt):
        outputs = ["id", "payload"]

        def process(self, tup: Any) -> None:
            payload: Any = {"ok": [1, 2.5, "s", None]}
            if tup.values.id == 25 and not emitted_bad.is_set():
                emitted_bad.set()
                payload = {"when": threading.Lock()}  # no wire format for a lock
            self.emit([tup.values.id, payload])

    class T(Topology):
        source = broker_spout(broker).spec()
        leaky = Leaky.spec(inputs=[source])
        sink = sink_for(journal).spec(inputs=[leaky])

    with LocalCluster(conf={"supervisor.worker.restart.backoff.initial.secs": 0.05}) as cluster:
        runner = cluster.submit("f3", T)
        poll_for(lambda: broker.done, timeout=20, message="every message acked")
        errors = cluster.errors("f3")
        assert runner.restarts == 1
    assert errors[0].fatal and errors[0].component == "leaky"
    assert "SerializationError" in errors[0].error and "'payload'" in errors[0].error
    assert set(journal.seen) == set(range(50))


def test_restarts_back_off_exponentially_on_the_clock() -> None:
    clock = FakeClock()
    attempts: list[int] = []

    class Doomed(Spout):
        outputs = ["x"]

        def initialize(self, conf: dict[str, Any], context: Any) -> None:
            attempts.append(1)
            raise RuntimeError("always broken")

    class T(Topology):
        doomed = Doomed.spec()

    conf = {"supervisor.worker.restart.backoff.initial.secs": 1.0,
            "supervisor.worker.restart.backoff.max.secs": 30.0}
    with LocalCluster(conf=conf, clock=clock) as cluster:
        runner = cluster.submit("backoff", T)
        poll_for(lambda: len(runner.errors) == 1, message="first death")
        # first restart after 1 s, the next after 2 s, then 4 s
        for expected_restarts, wait in ((1, 1.0), (2, 2.0), (3, 4.0)):
            clock.advance(wait * 0.9)
            assert stay(lambda n=expected_restarts: runner.restarts == n - 1, 0.2)
            clock.advance(wait * 0.2)
            poll_for(lambda n=expected_restarts: runner.restarts == n, message=f"restart {expected_restarts}")
            poll_for(lambda n=expected_restarts: len(runner.errors) == n + 1, message="next death")
    assert len(attempts) == 4
    assert all(e.fatal and "always broken" in e.error for e in runner.errors)


def test_a_dead_worker_of_two_is_restarted_alone_and_its_tuples_replay() -> None:
    broker = Broker([(i, "x") for i in range(400)])
    journal = Journal()
    crashed = threading.Event()

    class Crashy(Bolt):
        outputs = ["id"]

        def process(self, tup: Any) -> None:
            self.emit([tup.values.id])

    class Killer(Bolt):
        def process(self, tup: Any) -> None:
            journal.add("seen", tup.values.id)
            if tup.values.id == 200 and not crashed.is_set():
                crashed.set()
                # a BaseException is not a tuple failure: it takes the worker down
                raise SystemExit("worker process lost")

    class T(Topology):
        config = {"topology.workers": 2, "topology.message.timeout.secs": 2}
        source = broker_spout(broker).spec()
        crashy = Crashy.spec(inputs=[source], par=2)
        killer = Killer.spec(inputs=[crashy], par=2)

    with LocalCluster(conf={"supervisor.worker.restart.backoff.initial.secs": 0.05}) as cluster:
        runner = cluster.submit("two", T)
        poll_for(lambda: broker.done, timeout=30, message="every message acked")
        assert runner.restarts == 1
        assert sum(e.fatal for e in runner.errors) == 1
    assert set(journal.seen) == set(range(400))
