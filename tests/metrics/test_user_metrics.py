"""Components register their own metrics in initialize (Storm's registerMetric);
a running topology shows them per task, in local mode and in the worker's heartbeat."""

from __future__ import annotations

from typing import Any

import pytest

from squall import Bolt, Grouping, LocalCluster, Topology
from squall.testing import poll_for
from tests.helpers import Journal, numbers_spout

Numbers = numbers_spout(Journal(), 200)


class Measured(Bolt):
    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.seen = self.metrics.counter("seen")
        self.values = self.metrics.histogram("values")
        self.last = 0
        self.metrics.gauge("last", lambda: self.last)

    def process(self, tup: Any) -> None:
        self.seen.inc()
        self.values.observe(tup.values.n)
        self.last = tup.values.n


class MeasuredTopology(Topology):
    numbers = Numbers.spec()
    measured = Measured.spec(inputs={numbers: Grouping.shuffle()}, par=2)


def test_a_bolts_own_metrics_are_shown_per_task() -> None:
    with LocalCluster() as cluster:
        cluster.submit("m", MeasuredTopology)

        def seen() -> int:
            tasks = cluster.metrics("m").get("measured", {})
            return sum(t["counters"].get("seen", 0) for t in tasks.values())

        poll_for(lambda: seen() == 200, timeout=20, message="every tuple counted by the bolt's own counter")
        tasks = cluster.metrics("m")["measured"]
        assert len(tasks) == 2  # one registry per task
        assert sum(t["histograms"]["values"]["count"] for t in tasks.values()) == 200
        assert max(t["histograms"]["values"]["max"] for t in tasks.values()) == 200
        assert all(isinstance(t["gauges"]["last"], int) for t in tasks.values())


def test_metrics_cannot_be_registered_before_the_component_runs() -> None:
    with pytest.raises(AttributeError, match="in initialize"):
        Measured().metrics.counter("early")
