"""A component's helper thread hands work back to the executor thread
(how multilang readers and Spark jobs report): emits and acks made there
are tracked like any others."""

from __future__ import annotations

import threading
from typing import Any

from squall import Bolt, LocalCluster, Topology
from squall.testing import poll_for
from tests.helpers import Broker, BrokerSpout, Journal


def test_emit_and_ack_from_a_helper_thread_via_call_soon() -> None:
    broker = Broker([(i, f"m{i}") for i in range(50)])
    journal = Journal()
    executor_threads: set[str] = set()

    class Async(Bolt):
        auto_ack = False
        outputs = ["id"]

        def process(self, tup: Any) -> None:
            def done() -> None:  # runs in the executor thread
                executor_threads.add(threading.current_thread().name)
                self.emit([tup.values.id], anchors=[tup])
                self.ack(tup)

            threading.Timer(0.001, self.call_soon, args=(done,)).start()

    class Sink(Bolt):
        def process(self, tup: Any) -> None:
            journal.add("seen", tup.values.id)

    class T(Topology):
        source = type("Source", (BrokerSpout,), {"broker": broker}).spec()
        work = Async.spec(inputs=[source])
        sink = Sink.spec(inputs=[work])

    with LocalCluster() as cluster:
        cluster.submit("async", T)
        poll_for(lambda: broker.done, message="every message acked")
    assert sorted(journal.seen) == list(range(50))
    assert len(executor_threads) == 1 and next(iter(executor_threads)).startswith("executor-work")


def test_call_soon_outside_a_topology_is_a_clear_error() -> None:
    import pytest

    with pytest.raises(RuntimeError, match="outside a running topology"):
        Bolt().call_soon(lambda: None)
