"""Components given by value, what a pair function may return, windows as values, and
event time with its late values read back through ``late_tuples``."""

from __future__ import annotations

import threading
from operator import add
from typing import Any

import pytest

from squall import Spout
from squall.errors import ComponentError
from squall.local.cluster import LocalCluster
from squall.streams import (
    Count,
    Duration,
    SlidingWindows,
    StreamBuilder,
    TumblingWindows,
    ValueMapper,
)
from squall.testing import poll_for
from tests.streams.streams_data import Collect, CollectValue, Numbers, Record, Recorded, run

pytestmark = pytest.mark.timeout(60)


class Given(Spout):
    """A spout whose values are given to its instance (so it travels by value)."""

    outputs = ["n"]

    def __init__(self, values: list[int]) -> None:
        super().__init__()
        self.values = values

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.todo = list(self.values)

    def next_tuple(self) -> None:
        if self.todo:
            n = self.todo.pop(0)
            self.emit([n], tup_id=n)


def test_spouts_and_sinks_given_as_instances_travel_by_value() -> None:
    Recorded.clear()
    b = StreamBuilder()
    b.new_stream(Given([1, 2, 3]), ValueMapper(0)).map(lambda n: n * 10).to(Record(), parallelism=2)
    with LocalCluster() as cluster:
        cluster.submit("given", b.build())
        poll_for(lambda: len(Recorded.get("bolt2")) == 3, 30, "three values recorded")
    assert sorted(Recorded.get("bolt2")) == [[10], [20], [30]]


def test_a_pair_function_returns_a_pair_or_a_two_item_list() -> None:
    b = StreamBuilder()
    b.new_stream(Numbers, ValueMapper(0)).map_to_pair(lambda n: [n, n * n]).to(Collect.spec(name="out"))
    assert run(b.build(), {"spout1": [[3]]})["out"] == [[3, 9]]
    b = StreamBuilder()
    b.new_stream(Numbers, ValueMapper(0)).map_to_pair(lambda n: (n, n, n)).to(CollectValue)
    with pytest.raises(ComponentError, match="must return a pair \\(key, value\\), got \\(1, 1, 1\\)"):
        run(b.build(), {"spout1": [[1]]})


def test_update_state_refuses_what_json_cannot_hold() -> None:
    """The pure operation (the stateful bolt gives it the task's KeyValueState)."""
    from squall.state.kv import KeyValueState
    from squall.state.store import MemoryStore
    from squall.streams.functions import StateUpdater
    from squall.streams.keyed_state import UpdateState

    update = UpdateState(StateUpdater.of(0, lambda state, v: {1, 2}))
    update.state = KeyValueState(MemoryStore(), "t")
    out: list[object] = []
    (push,) = update.bind([[out.append]])
    with pytest.raises(TypeError, match=r"state of 'a'.* cannot be stored as JSON"):
        push(("a", 1))
    with pytest.raises(TypeError, match=r"the key .* cannot be stored as JSON"):
        push((frozenset(), 1))
    update = UpdateState(StateUpdater.of([], lambda state, v: [*state, (v, v)]))
    update.state = KeyValueState(MemoryStore(), "t")
    (push,) = update.bind([[out.append]])
    push((("k", 1), 2))
    push((("k", 1), 3))
    assert out == [(("k", 1), [[2, 2]]), (("k", 1), [[2, 2], [3, 3]])]  # as JSON gives it back


def test_windows_are_values() -> None:
    w = TumblingWindows.of(Count(3))
    assert w == TumblingWindows.of(Count(3)) and hash(w) == hash(TumblingWindows.of(Count(3)))
    lagged = SlidingWindows.of(Duration.seconds(10), Duration.seconds(5)).with_lag(Duration.seconds(1))
    assert lagged != SlidingWindows.of(Duration.seconds(10), Duration.seconds(5))  # a new window
    assert lagged.with_timestamp_field("ts").timestamp_field == "ts" and lagged.timestamp_field is None


class Stamped(Spout):
    """Values with event times; the late one only once the test has seen a window end."""

    outputs = ["n", "ts"]
    late_gate = threading.Event()

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.todo = [[1, 1_000], [2, 1_500], [3, 2_500], [4, 3_200], [5, 9_000]]

    def next_tuple(self) -> None:
        if self.todo:
            self.emit(self.todo.pop(0))
        elif Stamped.late_gate.is_set():
            Stamped.late_gate.clear()
            self.emit([99, 1_200])  # its window ended long ago


def test_event_time_windows_and_their_late_values() -> None:
    Recorded.clear()
    Stamped.late_gate.clear()
    window = (TumblingWindows.of(Duration.seconds(1)).with_timestamp_field("ts")
              .with_lag(Duration.milliseconds(0)).with_late_tuple_stream("late"))
    b = StreamBuilder()
    b.new_stream(Stamped, ValueMapper(0)).window(window).reduce(add).to(Record.spec(name="sums"))
    b.late_tuples("late").to(Record.spec(name="too_late"))
    topology = b.build()
    # The timestamp field travels with the values to the window's bolt.
    first = topology.definition().components["bolt1"]
    assert [list(s.fields) for s in first.streams.values()] == [["value", "ts"]]
    with LocalCluster() as cluster:
        cluster.submit("event_time", topology)
        # Windows (0, 1000], ..., (3000, 4000] and (8000, 9000] end as the watermark (9000,
        # lag 0) passes them.
        poll_for(lambda: len(Recorded.get("sums")) == 5, 30, "five event-time windows")
        Stamped.late_gate.set()
        poll_for(lambda: Recorded.get("too_late"), 30, "the late value")
    # Each sum carries its window's end as the timestamp field.
    assert Recorded.get("sums") == [[1, 1000], [2, 2000], [3, 3000], [4, 4000], [5, 9000]]
    assert Recorded.get("too_late") == [[99]]
