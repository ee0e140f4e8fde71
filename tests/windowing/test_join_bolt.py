"""JoinBolt in real topologies in local mode: both selectors, count and time
windows, sliding and tumbling, at two tasks, its anchoring and acking, and
what it refuses when placed and when the topology is defined."""

from __future__ import annotations

import json
import queue
import threading
from typing import Any

import pytest

from squall import Bolt, FakeClock, LocalCluster, Spout, Topology, TopologyValidationError
from squall.testing import complete_topology, poll_for
from squall.topology.component import Stream, StreamRef
from squall.topology.grouping import Grouping
from squall.windowing import Count, Duration, JoinBolt
from tests.helpers import Journal, stay
from tests.windowing.join_data import ORDER_FIELDS, ORDERS, USER_FIELDS, USERS

pytestmark = pytest.mark.timeout(90)

STREAM, SOURCE = JoinBolt.Selector.STREAM, JoinBolt.Selector.SOURCE
INNER_ROWS = [[2, "harsha", 7], [2, "harsha", 3], [3, "siva", 4], [4, "hugo", 5], [5, "suresh", 2],
              [6, "guru", 7], [6, "guru", 4], [7, "arun", 2], [8, "satish", 9]]


class Shop(Spout):
    """One spout, two streams (Selector.STREAM tells them apart); complete_topology mocks it."""

    outputs = [Stream(USER_FIELDS, name="users"), Stream(ORDER_FIELDS, name="orders"),
               Stream(["order_id"], name="returns")]


class FedSpout(Spout):
    """Emits what the test puts in ``feed`` as (tup_id, stream, values), reliably; a
    failed tuple goes back into the feed when ``replay``."""

    feed: queue.Queue
    journal: Journal
    replay = False
    sent: dict[Any, tuple[str, list[Any]]]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.sent = {}

    def next_tuple(self) -> None:
        try:
            tup_id, stream, values = self.feed.get_nowait()
        except queue.Empty:
            return
        self.sent[tup_id] = (stream, values)
        self.emit(list(values), tup_id=tup_id, stream=stream)

    def ack(self, tup_id: Any) -> None:
        self.journal.add("acked", tup_id)

    def fail(self, tup_id: Any) -> None:
        self.journal.add("failed", tup_id)
        if self.replay:
            stream, values = self.sent[tup_id]
            self.feed.put((tup_id, stream, values))


def fed(journal: Journal, outputs: Any, replay: bool = False) -> tuple[type[Spout], queue.Queue]:
    feed: queue.Queue = queue.Queue()
    cls = type("Fed", (FedSpout,), {"feed": feed, "journal": journal, "outputs": outputs, "replay": replay})
    return cls, feed


def recorder(journal: Journal, hold: Any = None, release: threading.Event | None = None,
             fail_once: Any = None) -> type[Bolt]:
    """Journals each row; holds the rows ``hold(values)`` picks unacked until ``release``,
    and fails the first row ``fail_once(values)`` picks."""

    class Record(Bolt):
        auto_ack = False

        def initialize(self, conf: dict[str, Any], context: Any) -> None:
            self.held: list[Any] = []
            self.failed_one = False

        def process(self, tup: Any) -> None:
            row = list(tup.values)
            journal.add("seen", row)
            if fail_once is not None and fail_once(row) and not self.failed_one:
                self.failed_one = True
                self.fail(tup)
            elif hold is not None and hold(row):
                self.held.append(tup)
            else:
                self.ack(tup)

        def process_tick(self, tup: Any) -> None:
            if release is not None and release.is_set():
                for held in self.held:
                    self.ack(held)
                self.held.clear()

    return Record


def shop_join(kind: str = "join") -> JoinBolt:
    bolt = JoinBolt(STREAM, "users", "user_id")
    getattr(bolt, kind)("orders", "user_id", "users")
    return bolt.select("user_id, name, price")


# -- results -------------------------------------------------------------------------------


def test_stream_selector_in_a_count_window_and_the_trees_complete_on_eviction() -> None:
    # Given users then orders on two streams of one spout (the mock emits stream by stream),
    # and then 19 orders without a user that fill a second Count(19) window, evicting the first
    class T(Topology):
        config = {"topology.message.timeout.secs": 3}  # the padding's window is never evicted
        shop = Shop.spec()
        joined = shop_join().with_tumbling_window(Count(19)).spec(inputs=[shop["users"], shop["orders"]])

    padding = [[100 + i, None, 0, 1] for i in range(19)]
    result = complete_topology(T, mock_sources={"shop": {"users": [list(u) for u in USERS],
                                                         "orders": [list(o) for o in ORDERS] + padding}})
    # Then the first window gives TestJoinBolt's 9 rows (users in window order, each with its orders)
    assert result["joined"] == INNER_ROWS
    # And its 19 trees completed when it was evicted; the padding, never evicted, timed out
    assert sorted(i for _c, i in result.acked) == list(range(19))
    assert len(result.failed) == 19


def test_source_selector_at_two_tasks_in_a_time_window_anchors_each_row_to_its_tuples(
        fake_clock: FakeClock) -> None:
    # Given users and orders from two spouts, fields-grouped on the key into two join tasks,
    # and a sink that holds the rows of user 2
    journal, out, release = Journal(), Journal(), threading.Event()
    users_spout, users_feed = fed(journal, list(USER_FIELDS))
    orders_spout, orders_feed = fed(journal, list(ORDER_FIELDS))
    join = (JoinBolt("users", "user_id").join("orders", "user_id", "users")
            .select("user_id, name, orders:price").with_tumbling_window(Duration.seconds(1)))

    class T(Topology):
        config = {"topology.tick.tuple.freq.secs": 0.05}  # the sink's ticks; the window sets its own
        users = users_spout.spec()
        orders = orders_spout.spec()
        joined = join.spec(inputs={users: Grouping.fields("user_id"), orders: Grouping.fields("user_id")},
                           par=2)
        sink = recorder(out, hold=lambda row: row[0] == 2, release=release).spec(inputs=[joined])

    with LocalCluster(clock=fake_clock) as cluster:
        runner = cluster.submit("source", T)
        fields = runner.plan.components["joined"].streams["default"].fields
        assert fields == ("user_id", "name", "orders_price")
        for i, u in enumerate(USERS):
            users_feed.put((("u", i), "default", u))
        for i, o in enumerate(ORDERS):
            orders_feed.put((("o", i), "default", o))
        poll_for(lambda: runner.stats()["joined"]["executed"] == 19, message="19 tuples buffered")
        # When the clock passes the window's end, each task joins its keys
        fake_clock.advance(1.0)
        poll_for(lambda: out.count("seen") == 9, message="9 rows")
        assert sorted(out.seen) == sorted(INNER_ROWS)
        # And when the next slide evicts them, every tree completes but those of user 2's
        # rows, held at the sink: a row is anchored to its own tuples, not the window's
        fake_clock.advance(1.0)
        poll_for(lambda: journal.count("acked") == 16, message="16 trees complete")
        assert stay(lambda: journal.count("acked") == 16)
        assert sorted(set(journal.acked) ^ {("u", i) for i in range(10)} ^ {("o", i) for i in range(9)}) == \
            [("o", 0), ("o", 1), ("u", 1)]
        # When the sink acks them, they complete too
        release.set()
        fake_clock.advance(0.05)
        poll_for(lambda: journal.count("acked") == 19, message="all 19 trees complete")
        assert journal.failed == []
        poll_for(lambda: runner.stats()["__acker"]["pending"] == 0, message="acker empty")


def test_left_join_in_a_sliding_count_window_joins_overlaps_again(cluster: LocalCluster) -> None:
    # Given u1, o1a, u2, o2b, u3, o2c on two streams into a Count(4) window sliding by 2
    journal, out = Journal(), Journal()
    spout, feed = fed(journal, [Stream(USER_FIELDS, name="users"), Stream(ORDER_FIELDS, name="orders")])
    join = shop_join("left_join").with_window(Count(4), Count(2)).with_output_stream("rows")

    class T(Topology):
        shop = spout.spec()
        joined = join.spec(inputs=[shop["users"], shop["orders"]])
        sink = recorder(out).spec(inputs=[joined["rows"]])

    sequence = [("u1", "users", [1, "ann", "x"]), ("o1a", "orders", [100, 1, 5, "a"]),
                ("u2", "users", [2, "bob", "y"]), ("o2b", "orders", [101, 2, 6, "b"]),
                ("u3", "users", [3, "cy", "z"]), ("o2c", "orders", [102, 2, 7, "c"])]
    cluster.submit("sliding", T)
    for item in sequence:
        feed.put(item)
    # Then windows [u1 o1a], [u1 o1a u2 o2b], [u2 o2b u3 o2c] give, in order:
    expected = [[1, "ann", "a"], [1, "ann", "a"], [2, "bob", "b"], [2, "bob", "b"], [2, "bob", "c"],
                [3, "cy", None]]
    poll_for(lambda: out.count("seen") == 6, message="6 rows")
    assert out.seen == expected
    # And only what left the windows, u1 and o1a, is acked; the rest is still in the window
    poll_for(lambda: sorted(journal.acked) == ["o1a", "u1"], message="u1 and o1a acked")
    assert stay(lambda: journal.count("acked") == 2 and not journal.failed)


def test_a_row_failed_downstream_replays_its_tuples(fake_clock: FakeClock) -> None:
    # Given a 1 s tumbling join whose sink fails the first row it sees, and a spout that replays
    journal, out = Journal(), Journal()
    spout, feed = fed(journal, [Stream(USER_FIELDS, name="users"), Stream(ORDER_FIELDS, name="orders")],
                      replay=True)
    join = shop_join().with_tumbling_window(Duration.seconds(1))

    class T(Topology):
        shop = spout.spec()
        joined = join.spec(inputs=[shop["users"], shop["orders"]])
        sink = recorder(out, fail_once=lambda row: True).spec(inputs=[joined])

    with LocalCluster(clock=fake_clock) as cluster:
        runner = cluster.submit("replay", T)
        feed.put(("u2", "users", list(USERS[1])))
        feed.put(("o11", "orders", list(ORDERS[0])))
        feed.put(("u3", "users", list(USERS[2])))  # no order: in no row, acked on eviction
        poll_for(lambda: runner.stats()["joined"]["executed"] == 3, message="3 tuples in")
        # When the window is joined, its one row is failed at the sink: both its trees fail
        fake_clock.advance(1.0)
        poll_for(lambda: sorted(journal.failed) == ["o11", "u2"], message="the row's two trees failed")
        # And replayed into the next window, joined again, acked at the sink
        poll_for(lambda: runner.stats()["joined"]["executed"] == 5, message="the replay in")
        fake_clock.advance(1.0)
        poll_for(lambda: out.count("seen") == 2, message="the row again")
        assert out.seen == [[2, "harsha", 7], [2, "harsha", 7]]
        assert journal.acked == ["u3"]  # evicted with the first window; the failed ones stay failed
        # When the replays leave their window, their trees complete
        fake_clock.advance(1.0)
        poll_for(lambda: sorted(journal.acked) == ["o11", "u2", "u3"], message="the replays complete")
        assert sorted(journal.failed) == ["o11", "u2"]


# -- refused ----------------------------------------------------------------------------------


class Users(Spout):
    outputs = list(USER_FIELDS)


class Orders(Spout):
    outputs = list(ORDER_FIELDS)


def test_the_settings_travel_in_the_specs_options() -> None:
    class T(Topology):
        shop = Shop.spec()
        joined = (shop_join().with_window(Duration.seconds(4), Duration.seconds(2)).with_timestamp_field("ts")
                  .spec(inputs=[shop["users"], shop["orders"]], name="join"))

    defn = T.definition()
    options = json.loads(json.dumps(defn.to_dict()))["components"][1]["options"]
    assert options["join"]["joins"] == [{"stream": "orders", "field": "user_id", "prior": "users",
                                         "kind": "inner"}]
    assert options["join"]["select"] == "user_id, name, price"
    assert options["window"]["length"] == ["ms", 4000] and options["window"]["timestamp_field"] == "ts"


@pytest.mark.parametrize(("build", "fragment"), [
    (lambda: JoinBolt("users"), "give (JoinBolt.Selector.SOURCE or STREAM, source, key_field)"),
    (lambda: JoinBolt(STREAM, "users", "user_id").join("orders", "user_id", "stores"),
     "prior stream 'stores' was not introduced"),
    (lambda: JoinBolt(STREAM, "users", "user_id").join("users", "user_id", "users"),
     "'users' is already in the join"),
    (lambda: JoinBolt(STREAM, "users", "user_id").join("orders", "users:user_id", "users"),
     "names a stream"),
    (lambda: JoinBolt.spec(inputs=["shop"]), "configure an instance first"),
])
def test_refused_at_the_call(build: Any, fragment: str) -> None:
    with pytest.raises(TopologyValidationError) as err:
        build()
    assert fragment in str(err.value)


def windowed(bolt: JoinBolt) -> JoinBolt:
    return bolt.with_tumbling_window(Count(5))


@pytest.mark.parametrize(("place", "fragment"), [
    (lambda s: windowed(JoinBolt(STREAM, "users", "user_id").join("orders", "user_id", "users"))
     .spec(inputs=[s["users"], s["orders"]]), "no select(...)"),
    (lambda s: shop_join().spec(inputs=[s["users"], s["orders"]]), "no window"),
    (lambda s: shop_join().with_tumbling_window(Count(5)).with_late_tuple_stream("late")
     .spec(inputs=[s["users"], s["orders"]]), "late_stream= needs event time"),
    (lambda s: windowed(shop_join().select("users:name, users_name")).spec(inputs=[s["users"]]),
     "both give the output field 'users_name'"),
    (lambda s: windowed(shop_join().select("orders:")).spec(inputs=[s["users"]]), "empty stream or field"),
    (lambda s: windowed(shop_join().select("a b")).spec(inputs=[s["users"]]), "not an identifier"),
    (lambda s: windowed(shop_join()).spec(inputs=[s["users"], s["orders"], s["returns"]]),
     "input stream 'returns' is not in the join"),
    (lambda s: windowed(shop_join()).spec(inputs=[s["users"]]),
     "'orders' in the join but no input provides it"),
    (lambda s: windowed(shop_join()).spec(inputs=[s["users"], s["orders"]], par=2),
     "'users' needs Grouping.fields('user_id'), got shuffle"),
    (lambda s: windowed(shop_join()).spec(inputs={s["users"]: Grouping.fields("user_id"),
                                                  s["orders"]: Grouping.fields("order_id")}, tasks=2),
     "'orders' needs Grouping.fields('user_id'), got fields('order_id',)"),
    (lambda s: windowed(JoinBolt(STREAM, "users", "outer.user_id").select("name")).spec(inputs=[s["users"]],
                                                                                       par=3),
     "a nested key needs par=1"),
])
def test_refused_at_spec(place: Any, fragment: str) -> None:
    shop = Shop.spec()
    with pytest.raises(TopologyValidationError) as err:
        place(shop)
    assert fragment in str(err.value)


def define(join: JoinBolt, inputs: Any, par: int = 1, config: dict[str, Any] | None = None) -> type[Topology]:
    specs = {"users": Users.spec(), "orders": Orders.spec(), "shop": Shop.spec()}
    specs["joined"] = join.spec(inputs=inputs(specs), par=par)
    return Topology.from_specs("Defined", specs, config)


@pytest.mark.parametrize(("join", "inputs", "par", "fragment"), [
    # inputs by name, STREAM
    (shop_join(), lambda s: [("shop", "users"), ("shop", "orders"), ("shop", "returns")], 1,
     "input stream 'returns' is not in the join"),
    (shop_join(), lambda s: [("shop", "users")], 1, "'orders' in the join but no input provides it"),
    (shop_join(), lambda s: {("shop", "users"): Grouping.fields("user_id"),
                             ("shop", "orders"): Grouping.shuffle()}, 2,
     "'orders' needs Grouping.fields('user_id'), got shuffle"),
    # SOURCE: components
    (JoinBolt("users", "user_id").join("orders", "user_id", "users").select("name"),
     lambda s: [s["users"], s["shop"]["orders"]], 1, "input component 'shop' is not in the join"),
    (JoinBolt("users", "user_id").join("orders", "user_id", "users").select("name"),
     lambda s: [s["users"]], 1, "'orders' in the join but no input provides it"),
    (JoinBolt("users", "user_id").join("orders", "user_id", "users").select("name"),
     lambda s: {s["users"]: Grouping.fields("user_id"), s["orders"]: Grouping.fields("price")}, 2,
     "'orders' needs Grouping.fields('user_id'), got fields('price',)"),
    # fields of the streams
    (JoinBolt("users", "user_id").join("orders", "uid", "users").select("name"),
     lambda s: [s["users"], s["orders"]], 1, "key 'uid' of 'orders': 'uid' is not a field of it"),
    (JoinBolt("users", "user_id").join("orders", "user_id", "users").select("name, orders:name"),
     lambda s: [s["users"], s["orders"]], 1, "'name' is not a field of stream 'orders'"),
    (JoinBolt("users", "user_id").join("orders", "user_id", "users").select("name, zip.code"),
     lambda s: [s["users"], s["orders"]], 1, "'zip' is not a field of any input stream"),
])
def test_refused_when_the_topology_is_defined(join: JoinBolt, inputs: Any, par: int, fragment: str) -> None:
    join.with_tumbling_window(Count(5))
    with pytest.raises(TopologyValidationError) as err:
        define(join, lambda s: _by_name(inputs(s)), par)
    assert fragment in str(err.value)
    assert "component 'joined'" in str(err.value)


def _by_name(inputs: Any) -> Any:
    """("shop", "users") pairs as subscriptions by name; anything else as given."""
    def ref(i: Any) -> Any:
        return StreamRef(*i) if isinstance(i, tuple) else i

    if isinstance(inputs, dict):
        return {ref(k): v for k, v in inputs.items()}
    return [ref(i) for i in inputs]


def test_the_window_must_fit_the_topologys_message_timeout() -> None:
    join = shop_join().with_tumbling_window(Duration.seconds(8))
    with pytest.raises(TopologyValidationError, match=r"component 'joined'.*16000 ms"):
        define(join, lambda s: [s["shop"]["users"], s["shop"]["orders"]],
               config={"topology.message.timeout.secs": 10})


def test_checked_inside_a_checkpointed_topology_too() -> None:
    # A stateful bolt elsewhere makes every bolt run in the checkpoint wrapper, which
    # passes the join its inputs without the checkpoint streams
    from squall.state import StatefulBolt

    class Counter(StatefulBolt):
        def init_state(self, state: Any) -> None:
            self.state = state

        def process(self, tup: Any) -> None:
            pass

    def topology(field: str) -> type[Topology]:
        join = (JoinBolt(STREAM, "users", "user_id").join("orders", field, "users")
                .select("name, orders:price").with_tumbling_window(Count(5)))
        # (a join of two spouts in a checkpointed topology runs: tests/windowing/test_checkpointed.py)
        specs = {"shop": Shop.spec()}
        specs["joined"] = join.spec(inputs=[specs["shop"]["users"], specs["shop"]["orders"]])
        specs["count"] = Counter.spec(inputs=[specs["joined"]])
        return Topology.from_specs("Checkpointed", specs)

    assert "$checkpointspout" in topology("user_id").definition().components
    with pytest.raises(TopologyValidationError, match="key 'uid' of 'orders': 'uid' is not a field"):
        topology("uid")
