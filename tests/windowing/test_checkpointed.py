"""Windowed bolts inside a checkpointed topology (LocalCluster: real executors, the
checkpoint wrapper around every bolt, SQLite state).

A stateful bolt anywhere makes every bolt run inside the checkpoint wrapper, which
subscribes it to ``$checkpoint`` streams besides its data.  Those streams carry
barriers only: an event-time window must not wait for a watermark from them, and a
join reading two spouts must still be defined (one barrier source: the checkpoint
spout)."""

from __future__ import annotations

import queue
import threading
from pathlib import Path
from typing import Any

import pytest

from squall import LocalCluster, Spout, Topology
from squall.state import StatefulBolt
from squall.testing import poll_for
from squall.topology.grouping import Grouping
from squall.windowing import Duration, JoinBolt, StatefulWindowedBolt, WindowedBolt
from tests.helpers import Journal
from tests.windowing.test_stateful_windowed import checkpoint_txid

pytestmark = pytest.mark.timeout(60)

WATERMARKS = Duration.milliseconds(50)  # the window's ticks: each may carry the watermark forward


class FedSpout(Spout):
    """Emits what the test puts in ``feed`` as (tup_id, values), reliably; journals acks."""

    feed: queue.Queue
    journal: Journal

    def next_tuple(self) -> None:
        try:
            tup_id, values = self.feed.get_nowait()
        except queue.Empty:
            return
        self.emit(list(values), tup_id=tup_id)

    def ack(self, tup_id: Any) -> None:
        self.journal.add("acked", tup_id)

    def fail(self, tup_id: Any) -> None:
        self.journal.add("failed", tup_id)


def fed(journal: Journal, outputs: Any) -> tuple[type[Spout], queue.Queue]:
    feed: queue.Queue = queue.Queue()
    return type("Fed", (FedSpout,), {"feed": feed, "journal": journal, "outputs": outputs}), feed


class Windows:
    """The windows the bolts under test gave out (one process: class state is shared)."""

    lock = threading.Lock()
    seen: list[Any] = []


@pytest.fixture(autouse=True)
def _windows() -> None:
    Windows.seen.clear()


def saw(row: Any) -> None:
    with Windows.lock:
        Windows.seen.append(row)


def seen() -> list[Any]:
    with Windows.lock:
        return list(Windows.seen)


class IdWindows(WindowedBolt):
    outputs = ["ids"]

    def process_window(self, window: Any) -> None:
        self.emit([[t.values.id for t in window.tuples]])


class RecordState(StatefulBolt):
    """Records each row it reads, and keeps their count as checkpointed state."""

    def init_state(self, state: Any) -> None:
        self.state = state

    def process(self, tup: Any) -> None:
        saw(tup.values[0])
        self.state.put("rows", self.state.get("rows", 0) + 1)


class StatefulIdWindows(StatefulWindowedBolt):
    def init_state(self, state: Any) -> None:
        self.state = state

    def process_window(self, window: Any) -> None:
        ids = [t.values.id for t in window.tuples]
        saw(ids)
        self.state.put("windows", self.state.get("windows", 0) + 1)


def event_time(bolt: type[WindowedBolt], inputs: Any) -> Any:
    return bolt.spec(inputs=inputs, tumbling=Duration.seconds(10), timestamp_field="ts",
                     lag=Duration.seconds(0), watermark_interval=WATERMARKS)


def windowed_into_stateful(spout: type[Spout]) -> type[Topology]:
    """A plain event-time WindowedBolt whose rows a StatefulBolt keeps."""
    specs: dict[str, Any] = {"events": spout.spec()}
    specs["windows"] = event_time(IdWindows, [specs["events"]])
    specs["keep"] = RecordState.spec(inputs=[specs["windows"]])
    return Topology.from_specs("WindowedIntoState", specs)


def stateful_windowed(spout: type[Spout]) -> type[Topology]:
    """An event-time StatefulWindowedBolt reading the spout."""
    specs: dict[str, Any] = {"events": spout.spec()}
    specs["windows"] = event_time(StatefulIdWindows, [specs["events"]])
    return Topology.from_specs("StatefulWindows", specs)


def state_conf(tmp_path: Path) -> dict[str, Any]:
    return {"topology.state.checkpoint.interval.ms": 100,
            "topology.state.provider.config": {"path": str(tmp_path / "state.sqlite")}}


def wait_initialized(tmp_path: Path) -> None:
    """Until a checkpoint committed: every bolt has its state by then.  A row reaching a
    stateful bolt before its first (init) barrier is failed as emitted before the reset,
    for its spout to replay; these spouts do not, and a test feeding before that would race."""
    poll_for(lambda: checkpoint_txid(tmp_path / "state.sqlite") >= 1, timeout=20,
             message="a checkpoint committed")


@pytest.mark.parametrize("build", [windowed_into_stateful, stateful_windowed])
def test_an_event_time_window_advances_its_watermark_in_a_checkpointed_topology(
        tmp_path: Path, build: Any) -> None:
    # Given an event-time tumbling window of 10 s (lag 0) in a checkpointed topology:
    # its task reads the checkpoint streams too, which never carry a timestamp
    journal = Journal()
    spout, feed = fed(journal, ["id", "ts"])
    topology = build(spout)
    windows = topology.definition().components["windows"]
    assert any(i.stream == "$checkpoint" for i in windows.inputs)
    with LocalCluster() as cluster:
        cluster.submit("events", topology, state_conf(tmp_path))
        wait_initialized(tmp_path)
        # When events at 1 s and 4 s come, then one at 15 s and one at 25 s move the
        # watermark past the ends of the first two windows (10 s, 20 s)
        for item in ((1, (1, 1000)), (2, (2, 4000)), (3, (3, 15000)), (4, (4, 25000))):
            feed.put(item)
        # Then those windows are evaluated, each with its events
        poll_for(lambda: seen() == [[1, 2], [3]], timeout=20, message="the windows [1, 2] and [3]")
        # And the tuples the second window evicted complete their trees (acked once a
        # checkpoint after them commits, where the state is kept)
        poll_for(lambda: sorted(journal.acked) == [1, 2], timeout=20, message="1 and 2 acked")
        assert not journal.failed
        assert not cluster.errors("events")


USER_FIELDS = ["user_id", "name", "ts"]
ORDER_FIELDS = ["order_id", "user_id", "price", "ts"]


class KeepRows(StatefulBolt):
    """Records each joined row, and keeps their count as checkpointed state."""

    def init_state(self, state: Any) -> None:
        self.state = state

    def process(self, tup: Any) -> None:
        saw(list(tup.values))
        self.state.put("rows", self.state.get("rows", 0) + 1)


def test_a_join_of_two_spouts_in_event_time_runs_in_a_checkpointed_topology(tmp_path: Path) -> None:
    # Given users and orders from two spouts, joined in 10 s event-time windows at two
    # tasks, whose rows a StatefulBolt keeps: every bolt reads the checkpoint streams
    journal = Journal()
    users, users_feed = fed(journal, USER_FIELDS)
    orders, orders_feed = fed(journal, ORDER_FIELDS)
    join = (JoinBolt("users", "user_id").join("orders", "user_id", "users")
            .select("user_id, name, orders:price").with_tumbling_window(Duration.seconds(10))
            .with_timestamp_field("ts").with_lag(Duration.seconds(0)).with_watermark_interval(WATERMARKS))
    specs: dict[str, Any] = {"users": users.spec(), "orders": orders.spec()}
    specs["joined"] = join.spec(inputs={specs["users"]: Grouping.fields("user_id"),
                                        specs["orders"]: Grouping.fields("user_id")}, par=2)
    specs["keep"] = KeepRows.spec(inputs=[specs["joined"]])
    topology = Topology.from_specs("JoinIntoState", specs)
    # (it is defined: the two spouts' barriers come from the one checkpoint spout)
    joined = topology.definition().components["joined"]
    assert sorted((i.component, i.stream) for i in joined.inputs) == [
        ("$checkpointspout", "$checkpoint"), ("orders", "default"), ("users", "default")]
    with LocalCluster() as cluster:
        cluster.submit("join", topology, state_conf(tmp_path))
        wait_initialized(tmp_path)
        # When users 1 and 2 and three orders come in the first 10 s, and then, on both
        # streams, events past 20 s move the watermark of each task past both windows
        for tup_id, user in (("u1", (1, "ann", 1000)), ("u2", (2, "bob", 2000)),
                             ("u1-next", (1, "ann", 25000)), ("u2-next", (2, "bob", 25000))):
            users_feed.put((tup_id, user))
        for tup_id, order in (("o1", (11, 1, 5, 3000)), ("o2", (12, 2, 7, 4000)), ("o3", (13, 2, 3, 5000)),
                              ("o1-next", (14, 1, 0, 25000)), ("o2-next", (15, 2, 0, 25000))):
            orders_feed.put((tup_id, order))
        # Then the first window's rows come out and are kept
        poll_for(lambda: sorted(seen()) == [[1, "ann", 5], [2, "bob", 3], [2, "bob", 7]], timeout=20,
                 message="the first window's three rows")
        # And its tuples complete their trees once evicted and committed
        poll_for(lambda: sorted(journal.acked) == ["o1", "o2", "o3", "u1", "u2"], timeout=20,
                 message="the first window's tuples acked")
        assert not journal.failed
        assert not cluster.errors("join")
