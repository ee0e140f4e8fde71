"""JoinBolt's pure core on plain data: TestJoinBolt's scenarios with the
expected results pinned in streams.md, keys, field resolution, row order and
the plan's checks."""

from __future__ import annotations

import json
from collections import namedtuple
from typing import Any

import pytest

from squall import TopologyValidationError
from squall.topology.grouping import Grouping
from squall.windowing.join import INNER, LEFT, MISSING, JoinPlan, Selector, hashable_key, lookup
from tests.windowing.join_data import cities, orders, stores, users

STREAM = Selector.STREAM


def plan(first: str, key: str, *joins: tuple[str, str, str, str], select: str | None = None) -> JoinPlan:
    p = JoinPlan(STREAM, first, key)
    for kind, stream, field, prior in joins:
        p.add_join(stream, field, prior, kind)
    if select is not None:
        p.set_select(select)
    return p


def values(rows: list[tuple[list[Any], list[Any]]]) -> list[list[Any]]:
    return [v for v, _refs in rows]


# -- TestJoinBolt ------------------------------------------------------------------------


def test_one_stream_passes_every_tuple_through() -> None:
    p = plan("orders", "order_id", select="order_id, user_id, item_id, price")
    assert values(p.rows(orders())) == [list(o[1].values()) for o in orders()]


def test_inner_join_of_users_and_orders() -> None:
    p = plan("users", "user_id", (INNER, "orders", "user_id", "users"), select="user_id, name, price")
    rows = p.rows(orders() + users())  # TestJoinBolt's window: orders first
    assert len(rows) == 9
    assert rows[0] == ([2, "harsha", 7], [("users", 1), ("orders", 0)])  # anchored to its two tuples
    assert values(rows) == [[2, "harsha", 7], [2, "harsha", 3], [3, "siva", 4], [4, "hugo", 5],
                            [5, "suresh", 2], [6, "guru", 7], [6, "guru", 4], [7, "arun", 2],
                            [8, "satish", 9]]


def test_left_join_keeps_users_without_orders() -> None:
    p = plan("users", "user_id", (LEFT, "orders", "user_id", "users"), select="user_id, name, price")
    rows = p.rows(orders() + users())
    assert len(rows) == 12
    assert [v for v in values(rows) if v[2] is None] == [[1, "roshan", None], [9, "mani", None],
                                                         [10, "priyank", None]]
    assert rows[0] == ([1, "roshan", None], [("users", 0)])  # a row without a match: its one tuple
    assert values(rows)[-1] == [10, "priyank", None]


def test_users_and_stores_on_city_with_stream_prefixed_fields() -> None:
    p = plan("users", "city", (INNER, "stores", "city", "users"),
             select="user_id, name, store_name, users:city, stores:city")
    names = [f.output_name for f in p.fields()]
    assert names == ["user_id", "name", "store_name", "users_city", "stores_city"]
    rows = values(p.rows(stores() + users()))
    assert len(rows) == 6
    assert all(len(r) == 5 and None not in r for r in rows)
    assert [r[0] for r in rows] == [1, 2, 3, 4, 7, 9]
    assert all(r[3] == r[4] for r in rows)


def test_three_streams_inner() -> None:
    p = plan("users", "city", (INNER, "stores", "city", "users"), (INNER, "cities", "city_name", "stores"),
             select="name, store_name, city, country")
    rows = values(p.rows(users() + stores() + cities()))
    assert len(rows) == 6
    assert rows[-1] == ["mani", "store5", "bengaluru", "India"]


def test_three_streams_left_joined_both_on_users() -> None:
    p = plan("users", "city", (LEFT, "stores", "city", "users"), (LEFT, "cities", "city_name", "users"),
             select="name, store_name, city, country")
    rows = values(p.rows(users() + cities() + stores()))
    assert len(rows) == 10
    assert rows[4] == ["suresh", None, "sunnyvale", "US"]  # no store in sunnyvale, its city still joined
    assert rows[9] == ["priyank", None, "seattle", None]  # seattle: neither


def test_three_streams_cities_joined_on_stores_drops_rows_without_a_store() -> None:
    # A row without the prior stream's tuple is dropped, by left_join too (TestJoinBolt expects 6)
    p = plan("users", "city", (LEFT, "stores", "city", "users"), (LEFT, "cities", "city_name", "stores"),
             select="name, store_name, city, country")
    rows = values(p.rows(users() + cities() + stores()))
    assert len(rows) == 6
    assert all(r[1] is not None for r in rows)


def test_three_streams_mixed() -> None:
    p = plan("users", "city", (INNER, "stores", "city", "users"), (LEFT, "cities", "city_name", "users"),
             select="name, store_name, city, country")
    assert len(p.rows(users() + cities() + stores())) == 6


# -- keys --------------------------------------------------------------------------------


def test_nested_keys_and_fields() -> None:
    nested = [("users", {"outer": dict(v)}, ref) for _s, v, ref in users()]
    p = plan("users", "outer.user_id", select="outer.name, outer.city")
    assert [f.output_name for f in p.fields()] == ["outer_name", "outer_city"]
    assert values(p.rows(nested))[0] == ["roshan", "san jose"]
    assert len(p.rows(nested)) == 10
    buys = [("orders", {"o": {"who": {"id": 2}}, "price": 5}, "o1")]
    p = plan("users", "outer.user_id", (INNER, "orders", "o.who.id", "users"),
             select="outer.name, orders:o.who.id, price")
    assert p.rows(nested + buys) == [(["harsha", 2, 5], [("users", 1), "o1"])]


def test_a_path_through_a_non_mapping_is_missing() -> None:
    assert lookup({"outer": 5}, ("outer", "x")) is MISSING
    assert lookup({"outer": {"x": None}}, ("outer", "x")) is None
    assert lookup({}, ("a",)) is MISSING


def test_keys_are_equal_as_dict_keys() -> None:
    left = [("a", {"k": 1}, "a1")]
    right = [("b", {"k": v}, f"b{i}") for i, v in enumerate([1.0, True, "1", 2])]
    p = plan("a", "k", (INNER, "b", "k", "a"), select="a:k, b:k")
    assert p.rows(left + right) == [([1, 1.0], ["a1", "b0"]), ([1, True], ["a1", "b1"])]


def test_container_keys_compare_by_content() -> None:
    p = plan("a", "k", (INNER, "b", "k", "a"), select="b:k")
    rows = p.rows([("a", {"k": [1, [2]]}, "a1"), ("b", {"k": (1, (2,))}, "b1"), ("b", {"k": {"x": 1}}, "b2")])
    assert rows == [([(1, (2,))], ["a1", "b1"])]
    assert hashable_key({"x": [1]}) == hashable_key({"x": (1,)})
    assert hashable_key([{1, 2}, object]) is not MISSING
    assert hashable_key(None) is MISSING


@pytest.mark.parametrize("kind", [INNER, LEFT])
def test_missing_and_none_keys_are_dropped(kind: str) -> None:
    window = [("a", {"k": None}, "a-none"), ("a", {"other": 1}, "a-missing"), ("a", {"k": 1}, "a1"),
              ("b", {"k": None}, "b-none"), ("b", {}, "b-missing"), ("b", {"k": 1}, "b1")]
    p = plan("a", "k", (kind, "b", "k", "a"), select="a:k, b:k")
    # A first-stream row without its key is dropped even by a left join; b's keyless tuples join nothing
    assert p.rows(window) == [([1, 1], ["a1", "b1"])]


def test_a_tuple_of_a_stream_not_in_the_join_is_an_error() -> None:
    p = plan("a", "k", select="k")
    with pytest.raises(ValueError, match="'z' reached the join"):
        p.rows([("z", {"k": 1}, "z1")])


# -- fields and row order ------------------------------------------------------------------


def test_an_unprefixed_field_comes_from_the_first_tuple_in_join_order_that_has_it_set() -> None:
    window = [("c", {"k": 1, "x": "from c"}, "c1"), ("b", {"k": 1, "x": None}, "b1"),
              ("a", {"k": 1}, "a1")]
    p = plan("a", "k", (INNER, "b", "k", "a"), (INNER, "c", "k", "b"), select="x, a:x, b:x, y")
    # a lacks x, b has it None, c has it: unprefixed reads c's; prefixed reads its stream only; y: nowhere
    assert values(p.rows(window)) == [["from c", None, None, None]]


def test_values_records_are_read_by_their_fields_not_their_methods() -> None:
    record = namedtuple("Values", ["k", "n"])
    p = plan("a", "k", select="k, count, n")
    assert values(p.rows([("a", record(1, 2), "a1")])) == [[1, None, 2]]


def test_rows_follow_the_first_stream_then_each_join_in_window_order() -> None:
    window = [("b", {"k": 2, "v": "b2-first"}, "b2a"), ("a", {"k": 1}, "a1"),
              ("b", {"k": 1, "v": "x"}, "b1a"), ("a", {"k": 2}, "a2"),
              ("b", {"k": 2, "v": "b2-second"}, "b2b"), ("b", {"k": 1, "v": "y"}, "b1b")]
    p = plan("a", "k", (INNER, "b", "k", "a"), select="a:k, v")
    assert values(p.rows(window)) == [[1, "x"], [1, "y"], [2, "b2-first"], [2, "b2-second"]]


def test_the_plan_travels_as_json() -> None:
    p = plan("users", "city", (INNER, "stores", "city", "users"), (LEFT, "cities", "city_name", "stores"),
             select="name, stores:store_name")
    p.set_output_stream("joined")
    again = JoinPlan.from_options(json.loads(json.dumps(p.to_options())))
    assert again.to_options() == p.to_options()
    assert again.rows(users() + stores() + cities()) == p.rows(users() + stores() + cities())
    source = JoinPlan.from_options({**p.to_options(), "selector": "source"})
    assert source.selector is Selector.SOURCE


# -- the plan's checks -----------------------------------------------------------------------


@pytest.mark.parametrize(("build", "fragment"), [
    (lambda: JoinPlan(STREAM, "a", "k").add_join("b", "k", "z", INNER),
     "prior stream 'z' was not introduced"),
    (lambda: plan("a", "k", (INNER, "c", "k", "b")), "prior stream 'b' was not introduced"),
    (lambda: plan("a", "k", (INNER, "b", "k", "a"), (LEFT, "b", "k", "a")), "'b' is already in the join"),
    (lambda: plan("a", "k", (INNER, "a", "k", "a")), "'a' is already in the join"),
    (lambda: JoinPlan(STREAM, "a", "a:k"), "key 'a:k' of stream 'a' names a stream"),
    (lambda: plan("a", "k", (INNER, "b", "a:k", "a")), "key 'a:k' of stream 'b' names a stream"),
    (lambda: JoinPlan(STREAM, "a", "x..y"), "empty segment"),
    (lambda: JoinPlan(STREAM, "a", ""), "must be a field name"),
    (lambda: JoinPlan(STREAM, "", "k"), "first stream must be a stream or component name"),
    (lambda: JoinPlan("stream", "a", "k"), "JoinBolt.Selector.STREAM or .SOURCE"),  # type: ignore[arg-type]
    (lambda: JoinPlan(STREAM, "a", "k").set_select(["k"]), "as one string"),
])
def test_refused_at_the_call(build: Any, fragment: str) -> None:
    with pytest.raises(TopologyValidationError) as err:
        build()
    assert fragment in str(err.value)


@pytest.mark.parametrize(("select", "fragment"), [
    (None, "no select(...)"),
    ("k, :x", "':x' has an empty stream or field name"),
    ("k, a:", "'a:' has an empty stream or field name"),
    ("k, , v", "is empty"),
    ("a.", "empty segment"),
    ("z:k", "names stream 'z', which is not in the join"),
    ("k, user id", "'user id', which is not an identifier"),
    ("class", "'class', which is not an identifier (or is a keyword"),
    ("_k", "starts with '_'"),
    ("a:b_c, a_b:c", "'a:b_c' and 'a_b:c' both give the output field 'a_b_c'"),
    ("k, k", "'k' and 'k' both give"),
])
def test_refused_when_placed(select: str | None, fragment: str) -> None:
    p = plan("a", "k", (INNER, "a_b", "k", "a"))
    if select is not None:
        p.set_select(select)
    with pytest.raises(TopologyValidationError) as err:
        p.check("JoinBolt 'j'", tasks=1)
    assert fragment in str(err.value) and "JoinBolt 'j'" in str(err.value)


def test_a_nested_key_needs_one_task() -> None:
    p = plan("a", "outer.k", select="k")
    p.check("j", tasks=1)
    with pytest.raises(TopologyValidationError, match="nested key needs par=1"):
        p.check("j", tasks=2)


def test_inputs_against_the_join() -> None:
    p = plan("a", "k", (INNER, "b", "id", "a"), select="a:k, v")
    fields_k, fields_id = Grouping.fields("k"), Grouping.fields("id")
    p.check_inputs("j", 2, [("a", fields_k, ("k",)), ("b", fields_id, ("id", "v"))])
    p.check_inputs("j", 1, [("a", Grouping.SHUFFLE, None), ("b", Grouping.SHUFFLE, None)])
    cases = [
        ([("a", fields_k, None), ("b", fields_id, None), ("c", fields_k, None)],
         "input stream 'c' is not in"),
        ([("a", fields_k, None)], "'b' in the join but no input provides it"),
        ([("a", Grouping.SHUFFLE, None), ("b", fields_id, None)],
         "'a' needs Grouping.fields('k'), got shuffle"),
        ([("a", fields_k, None), ("b", Grouping.fields("id", "v"), None)], "got fields('id', 'v')"),
        ([("a", fields_k, ("k",)), ("b", fields_id, ("ident", "v"))], "'id' is not a field of it"),
        ([("a", fields_k, ("k",)), ("b", fields_id, ("id",))], "'v' is not a field of any input stream"),
    ]
    for inputs, fragment in cases:
        with pytest.raises(TopologyValidationError) as err:
            p.check_inputs("j", 2, inputs)
        assert fragment in str(err.value), (fragment, str(err.value))
    p.set_select("b:w")
    with pytest.raises(TopologyValidationError, match="'w' is not a field of stream 'b'"):
        p.check_inputs("j", 1, [("a", fields_k, ("k",)), ("b", fields_id, ("id", "v"))])
    source = JoinPlan(Selector.SOURCE, "users", "k")
    source.set_select("k")
    with pytest.raises(TopologyValidationError, match="input component 'orders' is not in the join"):
        source.check_inputs("j", 1, [("users", fields_k, None), ("orders", fields_k, None)])

