"""Each refusal of the pinned API, at the call or at build(), naming the operation."""

from __future__ import annotations

from operator import add
from typing import Any

import pytest

from squall import Spout, Stream
from squall.errors import TopologyValidationError
from squall.state import CheckpointedSpout
from squall.streams import (
    Count,
    Duration,
    PairValueMapper,
    SlidingWindows,
    StateUpdater,
    StreamBuilder,
    TumblingWindows,
    TupleValueMappers,
    ValueMapper,
)
from tests.streams.streams_data import Collect, Numbers, Pairs

V = ValueMapper(0)
P = PairValueMapper(0, 1)
W = TumblingWindows.of(Count(2))


class OnlyOther(Spout):
    outputs = [Stream(["x"], name="other")]


class Positions(CheckpointedSpout):
    outputs = ["n"]


class Stamped(Spout):
    outputs = ["n", "ts"]


def refused(match: str) -> Any:
    return pytest.raises(TopologyValidationError, match=match)


def test_refused_at_the_call() -> None:
    b = StreamBuilder()
    with refused("new_stream: spout OnlyOther declares no 'default' stream"):
        b.new_stream(OnlyOther)
    with refused("mapper field 'nope' is not a field"):
        b.new_stream(Numbers, ValueMapper("nope"))
    with refused("mapper field 3 is out of range"):
        b.new_stream(Pairs, PairValueMapper(0, 3))
    with refused("TupleValueMappers.of: takes 3 to 10 fields"):
        TupleValueMappers.of(0, 1)
    with refused("TupleValueMappers.of: takes 3 to 10 fields"):
        TupleValueMappers.of(*range(11))
    with refused("CheckpointedSpout: it runs as one task"):
        b.new_stream(Positions, V, parallelism=2)
    with refused("parallelism must be an integer >= 1"):
        b.new_stream(Numbers, V, parallelism=0)
    s = b.new_stream(Numbers, V)
    pairs = b.new_stream(Pairs, P)
    with refused("map: expected a function"):
        s.map(3)
    with refused("filter: expected a function"):
        s.filter(None)
    with refused("aggregate: takes a CombinerAggregator or"):
        s.aggregate(Count(5))
    with refused("aggregate_by_key: takes a CombinerAggregator or"):
        pairs.aggregate_by_key(0, add)
    with refused("update_state_by_key: takes a StateUpdater or"):
        pairs.update_state_by_key(add)
    with refused("repartition: the parallelism must be an integer >= 1"):
        s.repartition(0)
    with refused("to: the bolt .* has inputs"):
        s.to(Collect.spec(inputs=["spout1"]))


def test_windowed_streams_need_a_batch_operation_before_another_window_or_state() -> None:
    b = StreamBuilder()
    windowed = b.new_stream(Pairs, P).window(W)
    with refused("window: the stream is windowed and no batch operation"):
        windowed.window(W)
    with refused("group_by_key_and_window: the stream is windowed"):
        windowed.group_by_key_and_window(W)
    with refused("update_state_by_key: the stream is windowed"):
        windowed.map_values(str).update_state_by_key(0, add)
    state = b.new_stream(Pairs, P).update_state_by_key(0, add)
    with refused("state_query: the stream is windowed"):
        b.new_stream(Numbers, V).window(W).state_query(state)
    # After a batch operation they are allowed.
    windowed.reduce_by_key(add).window(W).reduce_by_key(add)


def test_join_sides_must_fit() -> None:
    b = StreamBuilder()
    a, other = b.new_stream(Pairs, P), b.new_stream(Pairs, P)
    with refused("join: the other side must be a PairStream of this builder"):
        a.join(b.new_stream(Numbers, V))
    with refused("co_group_by_key: the other side must be a PairStream of this builder"):
        a.co_group_by_key(StreamBuilder().new_stream(Pairs, P))
    with refused("join: the two sides are windowed differently"):
        a.window(W).join(other.window(TumblingWindows.of(Count(3))))
    with refused("left_outer_join: one side is windowed and the other is not"):
        a.window(W).reduce_by_key(add).left_outer_join(other)
    with refused("full_outer_join: the two sides' windows differ"):
        a.window(W).reduce_by_key(add).full_outer_join(other.window(SlidingWindows.of(Count(2), Count(1)))
                                                        .reduce_by_key(add))
    with refused("join: one side is the stream a window\\(\\) returned and the other is windowed"):
        a.window(W).join(other.window(W).reduce_by_key(add))


def test_a_state_query_of_another_builders_state() -> None:
    other_state = StreamBuilder().new_stream(Pairs, P).update_state_by_key(StateUpdater.of(0, add))
    with refused("state_query: expected a StreamState of this builder"):
        StreamBuilder().new_stream(Numbers, V).state_query(other_state)


def test_refused_at_build() -> None:
    with refused("no stream"):
        StreamBuilder().build()

    b = StreamBuilder()
    b.new_stream(Numbers).filter(bool).to(Collect)
    with refused("are a spout's Tuples, which cannot leave their first bolt"):
        b.build()

    b = StreamBuilder()
    b.new_stream(Numbers, V).window(W.with_timestamp_field("ts")).count().print()
    with refused("reads timestamp field 'ts', which spout Numbers does not declare"):
        b.build()

    b = StreamBuilder()
    b.new_stream(Stamped, V).window(W.with_timestamp_field("ts")).count().print()
    b.new_stream(Stamped, V).window(W.with_timestamp_field("n")).count().print()
    with refused("two timestamp fields"):
        b.build()

    b = StreamBuilder()
    b.new_stream(Positions, V).window(W).count().print()
    with refused("CheckpointedSpout Positions reaches a window"):
        b.build()

    b = StreamBuilder()
    b.new_stream(Numbers, V).window(TumblingWindows.of(Duration.seconds(20))).count().print()
    with refused("not below topology.message.timeout.secs"):
        b.build(config={"topology.message.timeout.secs": 30})
    b.build(config={"topology.message.timeout.secs": 60})

    b = StreamBuilder()
    b.late_tuples("late").print()
    b.new_stream(Numbers, V).window(W).count().print()
    with refused("late_tuples\\('late'\\): no window declares"):
        b.build()

    b = StreamBuilder()
    b.new_stream(Pairs, P).update_state_by_key(0, add)
    with refused("give build\\(name=...\\)"):
        b.build(name=None)

    b = StreamBuilder()
    b.new_stream(Numbers.spec(name="x"), V).to(Collect.spec(name="x"))
    with refused("the component name 'x' is given twice"):
        b.build()


def test_a_window_before_parallel_batch_operations_in_a_later_bolt_needs_one_slide_more() -> None:
    window = SlidingWindows.of(Duration.seconds(10), Duration.seconds(5))
    b = StreamBuilder()
    b.new_stream(Numbers, V, parallelism=2).window(window).map(str).count().print()
    with refused("holds its values 20000 ms"):
        b.build(config={"topology.message.timeout.secs": 20})
    b.build(config={"topology.message.timeout.secs": 21})
