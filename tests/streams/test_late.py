"""Late tuples: ``builder.late_tuples(name)`` gives the values too late for the windows
``with_late_tuple_stream(name)``, as the window's input carries them (here mapped pairs),
and a ``to()`` sink can read them straight away."""

from __future__ import annotations

from typing import Any

import pytest

from squall.local.cluster import LocalCluster
from squall.streams import Duration, PairValueMapper, StreamBuilder, TumblingWindows
from squall.testing import poll_for
from tests.streams.streams_data import Record, Recorded, ReplayingSpout, inputs_of

pytestmark = pytest.mark.timeout(60)

WINDOW = TumblingWindows.of(Duration.seconds(2)).with_timestamp_field("ts").with_late_tuple_stream("late")


class Squares(ReplayingSpout):
    """10 and 13, then 1 once 10 was joined: the watermark is past 1 by then."""

    outputs = ["n", "power", "ts"]
    items = [[10, 100, 10_000], [13, 169, 13_000], [1, 1, 1_000]]

    def next_tuple(self) -> None:
        if self.todo and self.todo[-1] == 2 and not Recorded.get("joined"):
            return
        super().next_tuple()


class Cubes(ReplayingSpout):
    outputs = ["n", "power", "ts"]
    items = [[10, 1000, 10_000], [13, 2197, 13_000]]


def join_with_late_tuples() -> Any:
    builder = StreamBuilder()
    squares = builder.new_stream(Squares, PairValueMapper(0, 1))
    cubes = builder.new_stream(Cubes, PairValueMapper(0, 1))
    squares.window(WINDOW).join(cubes).to(Record.spec(name="joined"))
    builder.late_tuples("late").to(Record.spec(name="late"))
    return builder.build()


def test_a_sink_reads_late_tuples_through_a_bolt_of_their_own() -> None:
    # Refused before: "the values of late are a spout's Tuples", though the window's
    # input is mapped pairs; and a sink cannot read a window's late stream (detached records).
    topology = join_with_late_tuples()
    assert inputs_of(topology)[-2:] == [("joined", 1, [("bolt3", "shuffle", ())]),
                                        ("late", 1, [("bolt4", "shuffle", ())])]
    bolt4 = topology.definition().components["bolt4"]
    assert [(i.component, i.stream) for i in bolt4.inputs] == [("bolt3", "late")]
    assert [s.fields for s in bolt4.streams.values()] == [("key", "value")]


def test_late_values_are_the_windows_input_values() -> None:
    Recorded.clear()
    with LocalCluster() as cluster:
        cluster.submit("late", join_with_late_tuples())
        poll_for(lambda: Recorded.get("late"), 30, "the late value")
        cluster.kill("late")
    assert [r[:2] for r in Recorded.get("joined")] == [[10, [100, 1000]]]
    assert Recorded.get("late") == [[1, 1]]  # the mapped pair (n, n*n), key and value
