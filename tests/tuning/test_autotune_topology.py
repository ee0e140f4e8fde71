"""The tuner in a running topology (local mode, real threads and acker): max spout pending
follows the topology's capacity down when a bolt slows, and back up when it recovers."""

from __future__ import annotations

import threading
import time
from typing import Any

from squall import Bolt, LocalCluster, Spout, Topology
from squall.testing import poll_for

SLOW = threading.Event()  # set: every tuple costs the bolt 2 ms


class Numbers(Spout):
    outputs = ["n"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.n = 0

    def next_tuple(self) -> None:
        self.n += 1
        self.emit([self.n], self.n)


class Work(Bolt):
    def process(self, tup: Any) -> None:
        if SLOW.is_set():
            time.sleep(0.002)


class Tuned(Topology):
    config = {"topology.max.spout.pending": 50, "topology.max.spout.pending.autotune": True,
              "topology.max.spout.pending.autotune.secs": 0.3}
    numbers = Numbers.spec()
    work = Work.spec(inputs=[numbers])


def tuned_value(cluster: LocalCluster) -> int:
    (task,) = cluster.metrics("tuned").get("numbers", {"-": {"gauges": {"max_spout_pending": 0}}}).values()
    return int(task["gauges"]["max_spout_pending"])


def sample(cluster: LocalCluster, secs: float) -> list[int]:
    values = []
    deadline = time.monotonic() + secs
    while time.monotonic() < deadline:
        values.append(tuned_value(cluster))
        time.sleep(0.1)
    return values


def test_the_tuned_value_follows_capacity_down_and_up() -> None:
    SLOW.clear()
    with LocalCluster() as cluster:
        cluster.submit("tuned", Tuned)
        poll_for(lambda: tuned_value(cluster) > 50, timeout=20, message="the tuner raising from 50")
        fast = sample(cluster, 3)
        SLOW.set()  # a bolt slows down: progress drops, the tuner backs off
        slow = sample(cluster, 4)
        SLOW.clear()  # and recovers: progress rises, the tuner climbs again
        recovered = sample(cluster, 5)
    assert min(slow) < fast[-1], (fast, slow)
    assert max(recovered) > min(slow), (slow, recovered)
    # It moved by the paper's steps: never below 1, always an int.
    assert all(isinstance(v, int) and v >= 1 for v in fast + slow + recovered)


class Slow(Bolt):
    def process(self, tup: Any) -> None:
        time.sleep(0.001)


class Targeted(Topology):
    config = {"topology.max.spout.pending": 10_000, "topology.max.spout.pending.autotune": True,
              "topology.max.spout.pending.autotune.secs": 0.5,
              "topology.max.spout.pending.autotune.latency.ms": 100}
    numbers = Numbers.spec()
    work = Slow.spec(inputs=[numbers])


def test_a_latency_target_started_far_too_high_comes_down_to_it_not_below() -> None:
    """A bolt of about a millisecond a tuple, and 10,000 trees allowed: the first step down
    leaves thousands in flight, whose wait the next periods see.  The tuner must wait
    that drain out, not take it for its new value's, which threw it down to a handful of
    trees in flight, a tenth of what the target allows."""
    with LocalCluster() as cluster:
        cluster.submit("tuned", Targeted)
        poll_for(lambda: tuned_value(cluster) < 1_000, timeout=30,
                 message="the tuner coming down from 10,000")
        # Little's law: ~1 ms a tree and a 100 ms target allow some 90 in flight
        poll_for(lambda: 20 <= tuned_value(cluster) <= 100, timeout=30,
                 message="the tuner settling where the target allows, not far below it")
