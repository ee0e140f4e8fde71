"""StatefulWindowedBolt: its spec's checks, and its state restored into a second run
(LocalCluster: real executors, the checkpoint wrapper, SQLite state)."""

from __future__ import annotations

import json
import sqlite3
import threading
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from squall import Spout, Topology
from squall.errors import TopologyValidationError
from squall.local.cluster import LocalCluster
from squall.state import CheckpointedSpout
from squall.testing import poll_for
from squall.windowing import Count, Duration, StatefulWindowedBolt

pytestmark = pytest.mark.timeout(60)

N = 200  # numbers 0..N-1, tumbling windows of 10: every window fills


class Probe:
    lock = threading.Lock()
    limit = N  # how far the spout goes
    restored: list[Any] = []  # the total each init_state saw
    acked: list[Any] = []
    failed: list[Any] = []


class Numbers(CheckpointedSpout):
    outputs = ["n"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.pos = 0

    def snapshot(self) -> int:
        return self.pos

    def restore(self, position: Any) -> None:
        self.pos = position or 0

    def next_tuple(self) -> None:
        if self.pos < Probe.limit:
            self.emit([self.pos])
            self.pos += 1


class Tracked(Spout):
    """A plain reliable spout: 20 numbers with ids, its acks and fails recorded."""

    outputs = ["n"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.todo = list(range(20))

    def next_tuple(self) -> None:
        if self.todo:
            n = self.todo.pop(0)
            self.emit([n], tup_id=n)

    def ack(self, tup_id: Any) -> None:
        with Probe.lock:
            Probe.acked.append(tup_id)

    def fail(self, tup_id: Any) -> None:
        with Probe.lock:
            Probe.failed.append(tup_id)


class Sums(StatefulWindowedBolt):
    outputs = ["sum"]

    def init_state(self, state: Any) -> None:
        self.state = state
        with Probe.lock:
            Probe.restored.append(state.get("total", 0))

    def process_window(self, window: Any) -> None:
        total = sum(t.values.n for t in window.tuples)
        self.state.put("total", self.state.get("total", 0) + total)
        self.state.put("windows", self.state.get("windows", 0) + 1)
        self.emit([total])


def topology(db: Path, persist: bool = False) -> type[Topology]:
    class WindowSums(Topology):
        config = {"topology.state.checkpoint.interval.ms": 100,
                  "topology.state.provider.config": {"path": str(db)}}
        numbers = Numbers.spec()
        sums = Sums.spec(inputs=[numbers], tumbling=Count(10), persist=persist)

    return WindowSums


def committed(db: Path, key: str = "sums/%/committed") -> dict[str, Any]:
    try:
        with closing(sqlite3.connect(db, timeout=10)) as conn:
            rows = conn.execute("SELECT value FROM squall_state WHERE key LIKE ? AND key NOT LIKE ?",
                                (key, "" if "/window/" in key else "%/window/%"))
            out: dict[str, Any] = {}
            for (value,) in rows.fetchall():
                record = json.loads(value)
                if record:
                    out.update(record["data"])
            return out
    except sqlite3.OperationalError:
        return {}


def checkpoint_txid(db: Path) -> int:
    try:
        with closing(sqlite3.connect(db, timeout=10)) as conn:
            row = conn.execute("SELECT value FROM squall_state WHERE key = '$checkpoint/record'").fetchone()
    except sqlite3.OperationalError:
        return 0
    record = json.loads(row[0]) if row else None
    return record["txid"] if record and record["phase"] == "committed" else 0


def buffered(db: Path) -> list[int]:
    """The timestamps of the committed window buffer."""
    return (committed(db, "sums/%/window/committed").get("buffer") or {}).get("ts", [])


@pytest.fixture(autouse=True)
def _probe() -> None:
    Probe.restored.clear()
    Probe.acked.clear()
    Probe.failed.clear()
    Probe.limit = N


def test_the_window_state_is_committed_and_restored_into_a_second_run(tmp_path: Path) -> None:
    db = tmp_path / "state.sqlite"
    want = {"total": sum(range(N)), "windows": N // 10}
    with LocalCluster() as cluster:
        cluster.submit("sums", topology(db))
        poll_for(lambda: committed(db) == want, timeout=30, message="every window committed")
        assert not cluster.errors("sums")
    assert Probe.restored == [0]
    # A second run of the same topology starts from the committed state and position
    with LocalCluster() as cluster:
        cluster.submit("sums", topology(db))
        poll_for(lambda: len(Probe.restored) == 2, timeout=30, message="the second run's init_state")
        assert not cluster.errors("sums")
    assert Probe.restored == [0, sum(range(N))]
    assert committed(db) == want


def test_a_persisted_window_resumes_with_its_buffered_tuples(tmp_path: Path) -> None:
    # Given a first run that stops with 5 tuples (100..104) in an unfinished window (the
    # buffer also holds the last window's 90..99, evicted by the next window)
    db = tmp_path / "state.sqlite"
    Probe.limit = 105
    with LocalCluster() as cluster:
        cluster.submit("sums", topology(db, persist=True))
        # (the window's record and the user's are two writes of one commit: wait for both)
        poll_for(lambda: len(buffered(db)) == 15 and committed(db).get("windows") == 10,
                 timeout=30, message="the unfinished window committed")
        assert committed(db)["total"] == sum(range(100))
        assert not cluster.errors("sums")
    # When a second run goes on from the committed position (105)
    Probe.limit = N
    with LocalCluster() as cluster:
        cluster.submit("sums", topology(db, persist=True))
        poll_for(lambda: committed(db).get("windows") == N // 10, timeout=30, message="every window")
        assert not cluster.errors("sums")
    # Then the restored tuples completed their window: nothing lost, nothing twice
    assert committed(db) == {"total": sum(range(N)), "windows": N // 10}


@pytest.mark.parametrize("persist", [True, False])
def test_a_persisted_window_acks_its_tuples_on_commit_not_on_expiry(tmp_path: Path, persist: bool) -> None:
    # Given a reliable spout into a window of 1000 that never fills (nothing expires)
    class Unfilled(Topology):
        config = {"topology.state.checkpoint.interval.ms": 100,
                  "topology.state.provider.config": {"path": str(tmp_path / "s.sqlite")}}
        numbers = Tracked.spec()
        sums = Sums.spec(inputs=[numbers], tumbling=Count(1000), persist=persist)

    with LocalCluster() as cluster:
        cluster.submit("unfilled", Unfilled)
        if persist:
            # Then persisted, every tuple is acked once a checkpoint holding it commits
            poll_for(lambda: sorted(Probe.acked) == list(range(20)), timeout=20, message="all acked")
        else:
            # (not persisted, a tuple is acked only when it leaves the window: none is)
            poll_for(lambda: checkpoint_txid(tmp_path / "s.sqlite") >= 5, timeout=20,
                     message="several checkpoints committed")
            assert Probe.acked == []
        assert Probe.failed == []
        assert not cluster.errors("unfilled")


@pytest.mark.parametrize(("kwargs", "says"), [
    ({"persist": "yes"}, "persist must be True or False"),
    ({"persist": True, "max_events_in_memory": 0}, "max_events_in_memory must be a positive int"),
    ({"max_events_in_memory": 10}, "needs persist=True"),
    ({"persist": True, "max_events_in_memory": 2.5}, "max_events_in_memory must be a positive int"),
])
def test_spec_refuses_what_cannot_work(kwargs: dict[str, Any], says: str) -> None:
    with pytest.raises(TopologyValidationError, match=says):
        Sums.spec(inputs=["numbers"], tumbling=Count(10), **kwargs)


def test_a_persisted_window_refuses_the_memory_provider() -> None:
    with pytest.raises(TopologyValidationError, match="'memory'"):
        class InMemory(Topology):
            config = {"topology.state.provider": "memory"}
            numbers = Numbers.spec()
            sums = Sums.spec(inputs=[numbers], tumbling=Count(10), persist=True)


def test_only_a_persisted_window_may_outlast_the_message_timeout() -> None:
    with pytest.raises(TopologyValidationError, match="timeout"):
        class Long(Topology):
            config = {"topology.message.timeout.secs": 30}
            numbers = Numbers.spec()
            sums = Sums.spec(inputs=[numbers], tumbling=Duration.minutes(5))

    class LongPersisted(Topology):
        config = {"topology.message.timeout.secs": 30}
        numbers = Numbers.spec()
        sums = Sums.spec(inputs=[numbers], tumbling=Duration.minutes(5), persist=True)

    assert LongPersisted.definition().components["sums"].options["bolt_options"]["persist"] is True


def test_it_is_exported_from_both_packages() -> None:
    import squall.state
    import squall.windowing

    assert squall.state.StatefulWindowedBolt is squall.windowing.StatefulWindowedBolt is StatefulWindowedBolt
