"""What the operations give for given inputs, on real executors (Storm's processor
tests: aggregations, windows, branch, joins, outer joins, co-group)."""

from __future__ import annotations

from operator import add

import pytest

from squall.streams import (
    CombinerAggregator,
    Count,
    PairValueMapper,
    SlidingWindows,
    StreamBuilder,
    TumblingWindows,
    TupleValueMappers,
    ValueMapper,
    ValuesMapper,
    aggregators,
)
from tests.streams.streams_data import Collect, CollectValue, Lines, Numbers, Pairs, Words, run

pytestmark = pytest.mark.timeout(60)

V = ValueMapper(0)
P = PairValueMapper(0, 1)


def numbers(*ns: object) -> list[list[object]]:
    return [[n] for n in ns]


def test_the_guides_first_example() -> None:
    builder = StreamBuilder()
    (builder.new_stream(Lines, ValueMapper(0))
        .window(TumblingWindows.of(Count(2)))
        .flat_map(str.split)
        .map_to_pair(lambda w: (w, 1))
        .count_by_key()
        .to(Collect.spec(name="counts")))
    result = run(builder.build(), {"spout1": [["a b a"], ["b"], ["c"], ["c c"]]})
    assert result["counts"] == [["a", 2], ["b", 2], ["c", 3]]


def test_unwindowed_batch_operations_give_running_results() -> None:
    b = StreamBuilder()
    words = b.new_stream(Words, V)
    words.map_to_pair(lambda w: (w, 1)).count_by_key().to(Collect.spec(name="by_key"))
    words.count().to(CollectValue.spec(name="count"))
    b.new_stream(Numbers, V).reduce(add).to(CollectValue.spec(name="reduce"))
    result = run(b.build(), {"spout1": [["a"], ["b"], ["a"]], "spout2": numbers(1, 2, 3)})
    assert result["by_key"] == [["a", 1], ["b", 1], ["a", 2]]
    assert result["count"] == [[1], [2], [3]]
    assert result["reduce"] == [[1], [3], [6]]
    assert len(result.acked) == 6 and not result.failed


def test_a_sliding_count_window_reduces_each_window() -> None:
    b = StreamBuilder()
    b.new_stream(Numbers, V).window(SlidingWindows.of(Count(4), Count(2))).reduce(add).to(
        CollectValue.spec(name="out"))
    result = run(b.build(), {"spout1": numbers(1, 2, 3, 4, 5, 6)})
    assert result["out"] == [[3], [10], [18]]
    # 3-6 stay in the window: they fail at the message timeout, as Storm's do.
    assert sorted(k for _s, k in result.failed) == [2, 3, 4, 5]


def test_a_window_of_per_window_results() -> None:
    w = TumblingWindows.of(Count(2))
    b = StreamBuilder()
    b.new_stream(Numbers, V).window(w).reduce(add).window(w).reduce(add).to(CollectValue.spec(name="out"))
    assert run(b.build(), {"spout1": numbers(*range(1, 9))})["out"] == [[10], [26]]


def test_group_by_key_in_a_window_keeps_arrival_order() -> None:
    b = StreamBuilder()
    b.new_stream(Pairs, P).window(TumblingWindows.of(Count(4))).group_by_key().to(Collect.spec(name="out"))
    result = run(b.build(), {"spout1": [["a", 1], ["b", 2], ["a", 3], ["a", 0]]})
    assert result["out"] == [["a", [1, 3, 0]], ["b", [2]]]


def test_branch_sends_each_value_to_the_first_predicate_that_holds() -> None:
    b = StreamBuilder()
    evens, threes = b.new_stream(Numbers, V).branch(lambda x: x % 2 == 0, lambda x: x % 3 == 0)
    evens.to(CollectValue.spec(name="evens"))
    threes.to(CollectValue.spec(name="threes"))
    result = run(b.build(), {"spout1": numbers(1, 2, 3, 4, 5, 6)})
    assert result["evens"] == [[2], [4], [6]]
    assert result["threes"] == [[3]]
    assert len(result.acked) == 6  # 1 and 5 go nowhere, and are acked


def test_long_sum_truncates_as_javas_long_value() -> None:
    b = StreamBuilder()
    b.new_stream(Numbers, V).aggregate(aggregators.LongSum()).to(CollectValue.spec(name="out"))
    assert run(b.build(), {"spout1": numbers(1.5, 2.7, -1.9)})["out"][-1] == [2]


class SumAndCount(CombinerAggregator):
    """[sum, how many], so that a result shows how many values it merged."""

    def init(self) -> list[float]:
        return [0, 0]

    def apply(self, acc: list[float], value: float) -> list[float]:
        return [acc[0] + value, acc[1] + 1]

    def merge(self, acc1: list[float], acc2: list[float]) -> list[float]:
        return [acc1[0] + acc2[0], acc1[1] + acc2[1]]

    def result(self, acc: list[float]) -> list[float]:
        return [acc[0], acc[1], "result"]


def test_a_global_aggregate_combines_per_task_then_merges_once() -> None:
    b = StreamBuilder()
    (b.new_stream(Numbers, V, parallelism=2).window(TumblingWindows.of(Count(2))).map(float)
        .aggregate(SumAndCount()).to(CollectValue.spec(name="out")))
    result = run(b.build(), {"spout1": numbers(*range(1, 9))})
    # Each of the two window tasks ends windows of two values and sends its accumulator;
    # the global task merges once both tasks ended a window, and gives one result for
    # them (result() applied once, to the merged accumulator).
    out = [v for [v] in result["out"]]
    assert out
    for total, count, tag in out:
        assert tag == "result" and count >= 4 and count % 2 == 0 and total >= 1 + 2 + 3 + 4
    assert sum(count for _t, count, _ in out) <= 8


@pytest.mark.parametrize(("kind", "expected"), [
    ("join", [[2, [4, 8]], [5, [25, 125]]]),
    ("left_outer_join", [[2, [4, 8]], [5, [25, 125]], [7, [49, None]]]),
    ("right_outer_join", [[2, [4, 8]], [5, [25, 125]], [1, [None, 1]], [6, [None, 216]]]),
    ("full_outer_join", [[2, [4, 8]], [5, [25, 125]], [7, [49, None]], [1, [None, 1]], [6, [None, 216]]]),
])
def test_joins_on_storms_join_processor_data(kind: str, expected: list[object]) -> None:
    b = StreamBuilder()
    a, other = b.new_stream(Pairs, P), b.new_stream(Pairs, P)
    getattr(a.window(TumblingWindows.of(Count(7))), kind)(other).to(Collect.spec(name="out"))
    result = run(b.build(), {"spout1": [[2, 4], [5, 25], [7, 49]],
                             "spout2": [[1, 1], [2, 8], [5, 125], [6, 216]]})
    assert result["out"] == expected


def test_a_value_joiner_makes_the_joined_value() -> None:
    b = StreamBuilder()
    a, other = b.new_stream(Pairs, P), b.new_stream(Pairs, P)
    a.window(TumblingWindows.of(Count(7))).join(other, lambda x, y: x + y).to(Collect.spec(name="out"))
    result = run(b.build(), {"spout1": [[2, 4], [5, 25], [7, 49]],
                             "spout2": [[1, 1], [2, 8], [5, 125], [6, 216]]})
    assert result["out"] == [[2, 12], [5, 150]]


def test_co_group_by_key_on_storms_data() -> None:
    b = StreamBuilder()
    a, other = b.new_stream(Pairs, P), b.new_stream(Pairs, P)
    a.window(TumblingWindows.of(Count(9))).co_group_by_key(other).to(Collect.spec(name="out"))
    result = run(b.build(), {"spout1": [[2, 4], [5, 25], [7, 49], [7, 87]],
                             "spout2": [[1, 1], [2, 8], [5, 125], [5, 50], [6, 216]]})
    assert result["out"] == [[2, [[4], [8]]], [5, [[25], [125, 50]]], [7, [[49, 87], []]],
                             [1, [[], [1]]], [6, [[], [216]]]]


def test_a_join_repeats_keys_on_both_sides_m_times_n() -> None:
    b = StreamBuilder()
    a, other = b.new_stream(Pairs, P), b.new_stream(Pairs, P)
    a.window(TumblingWindows.of(Count(5))).join(other).to(Collect.spec(name="out"))
    result = run(b.build(), {"spout1": [["k", 1], ["k", 2]], "spout2": [["k", "x"], ["k", "y"], ["k", "z"]]})
    assert result["out"] == [["k", [v1, v2]] for v1 in (1, 2) for v2 in ("x", "y", "z")]


def test_unwindowed_outer_join_emits_none_until_a_match_comes() -> None:
    b = StreamBuilder()
    a, other = b.new_stream(Pairs, P), b.new_stream(Pairs, P)
    a.left_outer_join(other).to(Collect.spec(name="out"))
    # One spout's values all come before the other's in this test: the first task
    # of the join sees a's 1 before b's 1.
    result = run(b.build(), {"spout1": [[1, "a"]], "spout2": []})
    assert result["out"] == [[1, ["a", None]]]


def test_windowed_sides_with_equal_windows_join_per_window() -> None:
    w = TumblingWindows.of(Count(2))
    b = StreamBuilder()
    left = b.new_stream(Pairs, P).window(w).reduce_by_key(add)
    right = b.new_stream(Pairs, P).window(w).reduce_by_key(add)
    left.join(right).to(Collect.spec(name="out"))
    result = run(b.build(), {"spout1": [["a", 1], ["a", 2]], "spout2": [["a", 10], ["b", 5]]})
    assert result["out"] == [["a", [3, 10]]]


def test_mappers_by_index_and_name_and_typed_tuples() -> None:
    b = StreamBuilder()
    b.new_stream(Pairs, ValuesMapper("v", 0)).to(CollectValue.spec(name="values"))
    (b.new_stream(Pairs, TupleValueMappers.of(0, 1, "k")).map(lambda t: [type(t).__name__, *t])
        .to(CollectValue.spec(name="typed")))
    b.new_stream(Pairs, lambda tup: tup.values.k * 2).to(CollectValue.spec(name="fn"))
    result = run(b.build(), {"spout1": [["a", 1]], "spout2": [["b", 2]], "spout3": [["c", 3]]})
    assert result["values"] == [[[1, "a"]]]
    assert result["typed"] == [[["tuple", "b", 2, "b"]]]
    assert result["fn"] == [["cc"]]


def keys_are_tuples(kv: object) -> None:
    if not (type(kv) is tuple and type(kv[0]) is tuple):  # type: ignore[index]
        raise TypeError(f"expected a pair with a tuple key, got {kv!r}")  # noqa: EM102


def test_values_cross_bolts_as_lists_and_keys_come_back_as_tuples() -> None:
    b = StreamBuilder()
    (b.new_stream(Pairs, V).map_to_pair(lambda k: ((k, 1), (k, 2))).repartition(2)
        .peek(keys_are_tuples).to(Collect.spec(name="out")))
    result = run(b.build(), {"spout1": [["a", 0]]})  # fail_fast: a TypeError would raise here
    assert result["out"] == [[["a", 1], ["a", 2]]]  # a to() sink gets lists
