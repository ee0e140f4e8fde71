"""How a build lays operations into bolts: Storm's StreamBuilderTest bolt counts and
groupings, the names of what it makes, and an ordinary topology definition."""

from __future__ import annotations

from operator import add

from squall.streams import (
    Count,
    PairValueMapper,
    SlidingWindows,
    StreamBuilder,
    TumblingWindows,
    ValueMapper,
    aggregators,
)
from squall.streams.bolts import (
    HoldingProcessorBolt,
    ProcessorBolt,
    WindowedProcessorBolt,
)
from squall.topology.component import PUNCTUATION_STREAM
from tests.streams.streams_data import CollectValue, Numbers, Pairs, inputs_of

V = ValueMapper(0)
P = PairValueMapper(0, 1)
W = TumblingWindows.of(Count(2))


def one(x: object) -> tuple[object, int]:
    return (x, 1)


def test_a_spout_straight_to_a_bolt_is_that_bolt_alone() -> None:
    b = StreamBuilder()
    b.new_stream(Numbers).to(CollectValue)
    assert inputs_of(b.build()) == [("bolt1", 1, [("spout1", "shuffle", ())])]


def test_operations_with_no_cut_share_one_bolt() -> None:
    b = StreamBuilder()
    b.new_stream(Numbers, V).map_to_pair(one).reduce_by_key(add).print()
    topo = b.build()
    assert inputs_of(topo) == [("bolt1", 1, [("spout1", "shuffle", ())])]
    cdef = topo.definition().components["bolt1"]
    assert cdef.cls is ProcessorBolt
    assert cdef.options["operations"] == ["map_tuple(<lambda>)", "map_to_pair(one)",
                                                     "reduce_by_key(add)", "print"]


def test_a_window_starts_a_bolt_whose_later_operations_it_runs() -> None:
    b = StreamBuilder()
    b.new_stream(Numbers, V).map_to_pair(one).window(W).reduce_by_key(add).reduce_by_key(add).print()
    topo = b.build()
    assert [(n, par) for n, par, _ in inputs_of(topo)] == [("bolt1", 1), ("bolt2", 1)]
    assert topo.definition().components["bolt2"].cls is WindowedProcessorBolt


def test_a_repartition_before_a_key_operation_is_one_cut_by_key() -> None:
    b = StreamBuilder()
    (b.new_stream(Numbers, V).map_to_pair(one).window(W).reduce_by_key(add)
        .repartition(10).reduce_by_key(add).print())
    shape = inputs_of(b.build())
    assert len(shape) == 3
    name, par, ins = shape[2]
    assert (name, par) == ("bolt3", 10)
    assert ins == [("bolt2", "fields", ("key",))]


def test_a_window_and_a_key_cut_at_one_point_are_one_bolt_read_by_key() -> None:
    b = StreamBuilder()
    b.new_stream(Pairs, P, parallelism=2).window(W).aggregate_by_key(aggregators.Count())
    assert inputs_of(b.build()) == [("bolt1", 2, [("spout1", "shuffle", ())]),
                                    ("bolt2", 2, [("bolt1", "fields", ("key",))])]


def test_an_aggregate_above_parallelism_one_is_global() -> None:
    for windowed in (False, True):
        b = StreamBuilder()
        s = b.new_stream(Numbers, V, parallelism=2)
        (s.window(W) if windowed else s).aggregate(aggregators.Count())
        topo = b.build()
        assert inputs_of(topo) == [("bolt1", 2, [("spout1", "shuffle", ())]),
                                   ("bolt2", 2, [("bolt1", "global", ())])]
        assert (topo.definition().components["bolt2"].cls is WindowedProcessorBolt) is windowed


def test_an_aggregate_after_an_operation_on_a_window_combines_each_task_first() -> None:
    b = StreamBuilder()
    b.new_stream(Numbers, V, parallelism=2).window(W).map(str).aggregate(aggregators.Count())
    topo = b.build()
    shape = inputs_of(topo)
    assert [(n, par, [g for _c, g, _f in ins]) for n, par, ins in shape] == [
        ("bolt1", 2, ["shuffle"]), ("bolt2", 2, ["shuffle"]), ("bolt3", 2, ["global"])]
    comps = topo.definition().components
    assert comps["bolt2"].options["operations"] == ["map(str)", "aggregate(Count, partial)"]
    assert comps["bolt3"].options["operations"] == ["aggregate(Count, merge)"]
    assert comps["bolt3"].cls is HoldingProcessorBolt  # it waits for the window's end
    marker_inputs = [(i.component, i.grouping.type) for i in comps["bolt3"].inputs
                     if i.stream == PUNCTUATION_STREAM]
    assert marker_inputs == [("bolt2", "all")]


def test_repartitions_each_start_a_bolt_at_their_parallelism() -> None:
    b = StreamBuilder()
    (b.new_stream(Numbers, V).repartition(3).filter(bool).repartition(2).filter(bool)
        .aggregate(aggregators.Count()))
    shape = inputs_of(b.build())
    assert [(n, par) for n, par, _ in shape] == [("bolt1", 1), ("bolt2", 3), ("bolt3", 2), ("bolt4", 2)]
    assert shape[3][2] == [("bolt3", "global", ())]


def test_branches_joined_at_parallelism_two_meet_in_a_bolt_read_by_key() -> None:
    for par, expected in ((2, 2), (1, 1)):
        b = StreamBuilder()
        evens, odds = b.new_stream(Numbers, V, parallelism=par).branch(lambda x: x % 2 == 0,
                                                                         lambda x: x % 2 == 1)
        evens.map_to_pair(one).join(odds.map_to_pair(one)).print()
        shape = inputs_of(b.build())
        assert len(shape) == expected
        if par == 2:
            assert [g for _c, g, _f in shape[1][2]] == ["fields", "fields"]


def test_a_window_of_per_window_results_is_a_third_bolt() -> None:
    b = StreamBuilder()
    b.new_stream(Numbers, V).window(W).reduce(add).window(W).reduce(add).print()
    topo = b.build()
    assert len(inputs_of(topo)) == 3
    # A later window's bolt applies its own window and does not wait for markers.
    third = topo.definition().components["bolt3"]
    assert third.cls is WindowedProcessorBolt
    assert all(i.stream != PUNCTUATION_STREAM for i in third.inputs)


def test_the_same_parallelism_repartition_is_the_same_stream() -> None:
    b = StreamBuilder()
    s = b.new_stream(Numbers, V, parallelism=2)
    assert s.repartition(2) is s


def test_names_spouts_bolts_and_sinks_in_order_and_each_build_is_equal() -> None:
    b = StreamBuilder()
    first = b.new_stream(Numbers, V)
    b.new_stream(Numbers.spec(name="numbers"), V).filter(bool).to(CollectValue.spec(name="out"))
    first.map(str).window(SlidingWindows.of(Count(4), Count(2))).reduce(add).to(CollectValue)
    one_build, again = b.build(), b.build()
    names = list(one_build.definition().components)
    assert sorted(names) == ["bolt1", "bolt2", "bolt3", "bolt4", "numbers", "out", "spout1"]
    assert one_build.definition().to_dict()["components"] == again.definition().to_dict()["components"]
    # Each bolt after the bolts it reads; of two that could come next, the earlier call's:
    # the second spout's filter (made before the window) is bolt2, the window's bolt bolt3.
    ins = {c: {i.component for i in d.inputs} for c, d in one_build.definition().components.items()}
    assert ins["bolt2"] == {"numbers"} and ins["out"] == {"bolt2"}
    assert ins["bolt3"] == {"bolt1"} and ins["bolt4"] == {"bolt3"}


def test_a_build_is_an_ordinary_topology_definition() -> None:
    b = StreamBuilder()
    b.new_stream(Pairs, P).count_by_key().to(CollectValue, parallelism=3)
    topo = b.build(name="Counts", config={"topology.workers": 2})
    d = topo.definition()
    assert d.name == "Counts" and d.config["topology.workers"] == 2
    assert topo.__name__ == "Counts"
    streams = {c.name: {s.name: list(s.fields) for s in c.streams.values()} for c in d.components.values()}
    assert streams["bolt1"] == {"s3": ["key", "value"]}
    sink = d.components["bolt2"]
    assert sink.par == 3 and sink.cls is CollectValue
    assert [(i.component, i.stream, i.grouping.type) for i in sink.inputs] == [("bolt1", "s3", "shuffle")]
