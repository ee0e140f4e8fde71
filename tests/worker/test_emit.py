"""The emitters and a bolt's acks (squall/worker/executors/emit.py and acks.py, one
source each) do what Storm's anchoring and acking say, checked against the rules
themselves: every (child, anchor) pair its own edge, XOR-ed into the anchor's ack
value and into the child's map for each of the anchor's roots; a tree's init the
XOR of its first edges; acks summed per root.

CI runs this file against the build, and again under SQUALL_PURE_PYTHON=1
(tests/test_compiled.py): the same lines, C-typed and interpreted."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import msgpack
import pytest

from squall.acker.ledger import PACKED_ACK
from squall.errors import SerializationError
from squall.topology.tuple import Tuple, record_type
from squall.worker.executors import routing
from squall.worker.executors.acks import AckTable, run_batch
from squall.worker.executors.emit import (
    RandomIds,
    SpoutTracker,
    StreamOut,
    TaskState,
    bolt_emitter,
    spout_emitter,
)
from squall.worker.executors.emit_errors import bad_emit
from squall.worker.wire.codec import check_values

WORD = record_type(("word",))
PAIR = record_type(("word", "n"))
TOP = (1 << 64) - 1


def streams() -> dict[str, StreamOut]:
    return {
        "default": StreamOut("default", WORD, ("word",), routing.fields([5, 6], [0]), False),
        "pairs": StreamOut("pairs", PAIR, ("word", "n"), routing.all_tasks([5, 6]), False),
        "direct": StreamOut("direct", WORD, ("word",), routing.direct([5, 6]), True),
        "nowhere": StreamOut("nowhere", WORD, ("word",), routing.combine([]), False),
    }


class Drawn:
    """Ids from a seeded sequence, remembered in the order they were drawn."""

    def __init__(self, seed: int = 3) -> None:
        self.rng = random.Random(seed)
        self.ids: list[int] = []

    def __call__(self) -> int:
        self.ids.append(self.rng.getrandbits(64))
        return self.ids[-1]


def fields(t: Any) -> tuple[Any, ...]:
    return (t.id, t.component, t.stream, t.task, type(t.values), tuple(t.values), t.anchors, t.ackval)


class Bolt:
    """A bolt task's emit, its target batches and state."""

    def __init__(self, tracking: bool = True, auto_anchor: bool = True) -> None:
        self.state = TaskState()
        self.batches: dict[int, list[Any]] = {5: [], 6: []}
        self.streams = streams()
        self.ids = Drawn()
        self.emit = bolt_emitter("split", 3, self.streams, {t: b.append for t, b in self.batches.items()},
                                 tracking, self.ids, check_values, False, None, auto_anchor, self.state)

    def sent(self) -> list[Any]:
        return [t for batch in self.batches.values() for t in batch]

    def counts(self) -> dict[str, list[int]]:
        return {name: list(so.counts) for name, so in self.streams.items()}


def test_an_auto_anchored_emit_puts_each_child_in_the_anchors_tree_with_its_own_edge() -> None:
    bolt = Bolt()
    anchor = Tuple(7, "spout", "default", 1, ("a b",), {TOP - 4: 7})
    bolt.state.current = anchor
    tasks = [bolt.emit([w]) for w in ("cow", "moon", "over")]
    tasks.append(bolt.emit(["jumps", 2], stream="pairs"))
    assert all(type(t) is tuple for t in tasks) and tasks[-1] == (5, 6)
    children = bolt.sent()
    # one child per target task, each with a fresh edge that is also its id
    assert sorted(c.id for c in children) == sorted(bolt.ids.ids) and len(children) == 5
    assert all(c.anchors == {TOP - 4: c.id} and c.component == "split" and c.task == 3 for c in children)
    x = 0
    for e in bolt.ids.ids:
        x ^= e
    assert anchor.ackval == x
    assert bolt.state.emitted == 4 and bolt.counts()["pairs"] == [1, 2] and bolt.counts()["default"] == [3, 3]
    assert [c.values for c in children if c.stream == "pairs"] == [PAIR("jumps", 2)] * 2


def test_anchors_of_several_trees_and_several_anchors_follow_storms_rules() -> None:
    bolt = Bolt()
    two_trees = Tuple(8, "spout", "default", 1, ("x",), {11: 8, 12: 9})
    other = Tuple(9, "spout", "default", 1, ("y",), {11: 4})
    untracked = Tuple(None, "spout", "default", 1, ("z",), None)
    bolt.state.current = two_trees
    expected: list[tuple[str, dict[int, int] | None]] = []
    xor = {id(two_trees): 0, id(other): 0}

    def emit(word: str, *anchors: Any, **kw: Any) -> None:
        before = len(bolt.ids.ids)
        bolt.emit([word], **kw)
        edges = iter(bolt.ids.ids[before:])
        for _task in bolt.sent()[-1:]:  # (fields grouping: one task)
            amap: dict[int, int] | None = None
            for a in anchors:
                if a.anchors:
                    e = next(edges)
                    xor[id(a)] ^= e
                    amap = amap or {}
                    for root in a.anchors:
                        amap[root] = amap.get(root, 0) ^ e
            expected.append((word, amap))

    emit("auto", two_trees)
    emit("one", other, anchors=other)
    emit("one in a list", other, anchors=[other])
    emit("two trees in a tuple", two_trees, anchors=(two_trees,))
    emit("many", two_trees, other, untracked, anchors=[two_trees, other, untracked])
    emit("none of them tracked", anchors=[untracked])
    emit("empty list", anchors=[])
    got = sorted((c.values.word, c.anchors) for c in bolt.sent())
    assert got == sorted(expected)
    many = next(c for c in bolt.sent() if c.values.word == "many")
    assert set(many.anchors) == {11, 12} and many.id in bolt.ids.ids
    assert (two_trees.ackval, other.ackval, untracked.ackval) == (xor[id(two_trees)], xor[id(other)], 0)


def test_untracked_and_unanchored_emits_share_one_tuple_without_ids() -> None:
    bolt = Bolt(tracking=False)
    bolt.state.current = Tuple(7, "spout", "default", 1, ("a",), {1: 7})
    bolt.emit(["x", 1], stream="pairs")
    bolt.emit(["y"], direct_task=6, stream="direct")
    bolt.emit(["z"], stream="nowhere")
    assert bolt.batches[5][0] is bolt.batches[6][0]
    assert fields(bolt.batches[6][-1])[:7] == (None, "split", "direct", 3, WORD, ("y",), None)
    assert bolt.counts()["nowhere"] == [1, 0] and bolt.counts()["direct"] == [1, 1]
    assert bolt.ids.ids == [] and bolt.state.current.ackval == 0


def test_a_bolt_that_does_not_auto_anchor_emits_untracked_tuples() -> None:
    bolt = Bolt(auto_anchor=False)
    bolt.state.current = Tuple(1, "spout", "default", 1, ("a",), {1: 1})
    bolt.emit(["x"])
    assert bolt.state.current.ackval == 0 and [c.id for c in bolt.sent()] == [None]


@pytest.mark.parametrize(("args", "kwargs"), [
    ((["a"],), {"stream": "undeclared"}),
    (("a",), {}),
    ((["a", "b"],), {}),
    ((["a"],), {"stream": "direct"}),
    ((["a"],), {"direct_task": 5}),
])
def test_a_bad_emit_raises_the_error_naming_it_and_sends_nothing(args: tuple[Any, ...],
                                                                 kwargs: dict[str, Any]) -> None:
    bolt = Bolt()
    with pytest.raises((ValueError, TypeError)) as e:
        bolt.emit(*args, **kwargs)
    stream = kwargs.get("stream", "default")
    expected = bad_emit("split", stream, bolt.streams, args[0], kwargs.get("direct_task"))
    assert (type(e.value), str(e.value)) == (type(expected), str(expected))
    assert bolt.sent() == [] and bolt.state.emitted == 0


@pytest.mark.parametrize("value", [1 << 70, object(), [1, {2: object()}]])
def test_a_value_that_cannot_cross_the_wire_is_refused_where_it_is_emitted(value: Any) -> None:
    bolt = Bolt()
    with pytest.raises(SerializationError, match=r"component 'split' emitted .* in field 'word'"):
        bolt.emit([value])
    assert bolt.sent() == [] and bolt.state.emitted == 0


class Spout:
    def __init__(self, ackers: list[int], local: list[int], ids: Callable[[], int] | None = None) -> None:
        self.state = TaskState()
        self.batches: dict[int, list[Any]] = {5: [], 6: []}
        self.tracker = SpoutTracker(ackers, local)
        self.ids = ids or Drawn(9)
        self.emit = spout_emitter("words", 2, streams(), {t: b.append for t, b in self.batches.items()},
                                  self.ids, check_values, False, None, self.tracker, lambda: 42.0, self.state)


@pytest.mark.parametrize(("ackers", "local"), [([10], [10]), ([10, 11, 12, 13], [11, 13]), ([10, 11], [])])
def test_a_spout_emit_starts_a_tree_inits_its_acker_and_keeps_it_pending(ackers: list[int],
                                                                        local: list[int]) -> None:
    spout = Spout(ackers, local)
    for i in range(50):
        spout.emit([f"w{i}"], tup_id=i)
    spout.emit(["both", 1], tup_id="b", stream="pairs")
    spout.emit(["untracked"])
    spout.emit(["to no task"], tup_id="gone", stream="nowhere")
    tracker = spout.tracker
    assert tracker.count == len(tracker.pending) == 51 and spout.state.emitted == 53
    assert tracker.immediate == [(2, "gone")]
    inits = [(task, item) for task, items in tracker.inits.items() for item in items]
    assert len(inits) == 51
    pending = dict(tracker.pending.items())
    sent = [t for batch in spout.batches.values() for t in batch if t.id is not None]
    for task, (root, val, spout_task) in inits:
        # its acker is the one its root names, a local one when there is one
        assert root % len(ackers) == ackers.index(task) and spout_task == 2
        assert task in local or not local
        # the init is the XOR of the tree's first edges, one per target task
        children = [t for t in sent if t.anchors == {root: t.id}]
        x = 0
        for c in children:
            x ^= c.id
        assert children and val == x
        assert pending[root][0] == 2 and pending[root][2] == 42.0
    assert sorted(str(p[1]) for p in pending.values()) == sorted([*map(str, range(50)), "b"])
    assert [t.id for t in spout.batches[5] + spout.batches[6] if t.values[0] == "untracked"] == [None]


def test_without_ackers_a_spout_acks_its_ids_at_once() -> None:
    spout = Spout([], [])
    spout.emit(["w"], tup_id="m")
    assert spout.tracker.immediate == [(2, "m")] and len(spout.tracker.pending) == 0
    assert [t.anchors for t in spout.batches[5] + spout.batches[6]] == [None]


def test_roots_pick_a_local_acker_and_stay_random_64_bit_ids() -> None:
    # Ackers at indices 1 and 3 of 4 live in this worker
    spout = Spout([10, 11, 12, 13], [11, 13], Drawn(7))
    for i in range(5_000):
        spout.emit([f"w{i}"], tup_id=i)
    roots = [root for items in spout.tracker.inits.values() for root, _v, _t in items]
    assert {r % 4 for r in roots} == {1, 3} and len(set(roots)) == len(roots) == 5_000
    assert all(0 <= r < 1 << 64 for r in roots) and max(roots).bit_length() == 64  # high bits untouched


@pytest.mark.parametrize(("ackers", "local"), [([1, 2, 3, 4, 5], [5]), ([1, 2, 3], [1])])
def test_roots_near_the_top_of_the_range_pick_their_acker_and_stay_in_range(ackers: list[int],
                                                                            local: list[int]) -> None:
    draws = iter([TOP, TOP - 1, 0, 3] * 8)
    spout = Spout(ackers, local, lambda: next(draws))
    for i in range(5):
        spout.emit([f"w{i}"], tup_id=i)
    roots = [root for items in spout.tracker.inits.values() for root, _v, _t in items]
    assert len(roots) == 5
    assert all(0 <= r < 1 << 64 and r % len(ackers) == ackers.index(local[0]) for r in roots)


def test_without_a_local_acker_or_with_all_of_them_the_root_is_the_draw() -> None:
    for local in ([], [10, 11]):
        draws = Drawn(4)
        spout = Spout([10, 11], local, draws)
        spout.emit(["w"], tup_id=1)
        [(root, _v, _t)] = [item for items in spout.tracker.inits.values() for item in items]
        assert root == draws.ids[0]


def xoshiro(state: list[int], n: int) -> list[int]:
    """xoshiro256** as Blackman and Vigna define it: the reference the generator is held to."""
    m = TOP
    s = list(state)
    out = []

    def rotl(x: int, k: int) -> int:
        return ((x << k) | (x >> (64 - k))) & m

    for _ in range(n):
        out.append(rotl(s[1] * 5 & m, 7) * 9 & m)
        t = s[1] << 17 & m
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = rotl(s[3], 45)
    return out


def test_the_generator_is_xoshiro256_and_gives_random_64_bit_ids() -> None:
    seeded = RandomIds(b"\x01\x02")
    state = [int.from_bytes((b"\x01\x02" * 32)[8 * i:8 * i + 8], "little") for i in range(4)]
    assert [seeded() for _ in range(1000)] == xoshiro(state, 1000)
    assert RandomIds(b"\x00")() == xoshiro([1, 0, 0, 0], 1)[0]  # the all-zero state is left
    ids = RandomIds()
    drawn = [ids() for _ in range(20_000)]
    assert len(set(drawn)) == len(drawn) and all(0 <= i < 1 << 64 for i in drawn)
    for bit in range(64):  # every bit is set about half the time
        ones = sum((i >> bit) & 1 for i in drawn)
        assert 9_000 < ones < 11_000, bit
    # and two generators (two executors) do not repeat each other
    assert not set(drawn) & {RandomIds()() for _ in range(5_000)}


def expected_sums(events: list[tuple[int, int]]) -> list[tuple[int, int]]:
    sums: dict[int, int] = {}
    for root, val in events:
        sums[root] = sums.get(root, 0) ^ val
    return list(sums.items())


def test_the_ack_table_sums_per_root_in_the_order_roots_came() -> None:
    rng = random.Random(5)
    roots = [rng.getrandbits(64) for _ in range(300)] + [0, TOP]
    table = AckTable()
    for turn in range(4):
        # more roots in one turn than the table starts with, each acked several times
        events = [(rng.choice(roots), rng.getrandbits(64)) for _ in range(2_000 * (turn + 1) // 4)]
        for root, val in events:
            table.xor(root, val)
        anchor = Tuple(1, "s", "default", 1, ("a",), {roots[0]: 7, roots[1]: 8})
        anchor.ackval = 3
        table.add(anchor)
        table.add(Tuple(2, "s", "default", 1, ("b",), {roots[2]: 9}))
        table.add(Tuple(None, "s", "default", 1, ("c",), None))
        events += [(roots[0], 7 ^ 3), (roots[1], 8 ^ 3), (roots[2], 9)]
        assert len(table) == len(expected_sums(events))
        assert table.drain() == expected_sums(events)
        assert len(table) == 0 and table.drain() == []


class Acking:
    """What run_batch asks of its executor: the stop flag and the error path."""

    def __init__(self, stop_after: int | None = None) -> None:
        self.stop_after = stop_after
        self.seen: list[Any] = []
        self.errors: list[tuple[Any, str]] = []

    @property
    def running(self) -> bool:
        return self.stop_after is None or len(self.seen) < self.stop_after

    def process(self, tup: Any) -> None:
        self.seen.append(tup.values[0])
        if tup.values[0] % 7 == 0:
            raise RuntimeError(f"bad {tup.values[0]}")

    def on_process_error(self, bt: Any, tup: Any, exc: Exception) -> None:
        self.errors.append((bt, str(exc)))


def test_the_bolt_loop_acks_what_was_processed_and_stops_when_told() -> None:
    rng = random.Random(8)
    tuples = [Tuple(i, "split", "default", 1, (i,), {rng.getrandbits(2): rng.getrandbits(64)})
              for i in range(600)]
    for t in tuples[::3]:
        t.ackval = rng.getrandbits(64)
    # Given a bolt whose every seventh tuple raises
    ex, acks, state = Acking(), AckTable(), TaskState()
    errors = run_batch(ex, "bt", tuples, ex.process, state, acks, True, 256)
    # Then every tuple ran, those that raised went to the error path unacked, the rest were acked
    assert errors == len(ex.errors) == 86 and ex.errors[0] == ("bt", "bad 0")
    assert ex.seen == list(range(600)) and state.current is tuples[-1]
    acked = [(root, edge ^ t.ackval) for t in tuples if t.values[0] % 7 for root, edge in t.anchors.items()]
    assert acks.drain() == expected_sums(acked)
    # And an executor told to stop runs no further than the next check
    ex = Acking(stop_after=300)
    run_batch(ex, "bt", tuples, ex.process, state, acks, True, 256)
    assert ex.seen == list(range(512))
    # And without acks (acked by hand, or untracked) it only runs them, the current tuple as asked
    for current in (True, False):
        ex, state = Acking(), TaskState()
        assert run_batch(ex, "bt", tuples, ex.process, state, None, current, 256) == 86
        assert ex.seen == list(range(600)) and (state.current is tuples[-1]) is current


def test_acks_grouped_by_acker_are_the_sums_each_at_its_roots_acker() -> None:
    rng = random.Random(9)
    roots = [rng.getrandbits(64) for _ in range(200)] + [0, TOP]
    for ackers in (1, 2, 3, 7):
        table = AckTable()
        events = [(rng.choice(roots), rng.getrandbits(64)) for _ in range(1_000)]
        for root, val in events:
            table.xor(root, val)
        groups = table.drain_by(ackers)
        assert len(groups) == ackers
        # every pair once, packed, at the acker its root belongs to, in the order the roots came
        for i, group in enumerate(groups):
            assert type(group) is bytes
            assert list(PACKED_ACK.iter_unpack(group)) == [(r, v) for r, v in expected_sums(events)
                                                          if r % ackers == i]
        assert len(table) == 0 and table.drain() == []
    with pytest.raises(ValueError, match="ackers must be at least 1"):
        AckTable().drain_by(0)


def test_an_emit_to_another_worker_packs_the_rows_its_tuples_would_give() -> None:
    from squall.transactional.attempt import TransactionAttempt
    from squall.worker.wire.codec import PackedRows, RemoteBatch, encode
    from squall.worker.wire.value_types import pack_ext

    def run(bolt: Bolt) -> None:
        bolt.state.current = Tuple(7, "spout", "default", 1, ("a b",), {TOP - 4: 7})
        for w in ("cow", "moon", "over", "jumps", "high", "low"):
            bolt.emit([w])  # fields grouped over tasks 5 and 6
        # an extension type, packed as any value; then a value msgpack refuses (the emit's
        # check lets a lone surrogate through), and one after it
        for w in ("x", TransactionAttempt(4, 17), "y", "lone \udc80", "z"):
            bolt.emit([w], stream="direct", direct_task=6)

    local = Bolt()
    run(local)
    # The same emits, task 6 in another worker: its rows packed as they are emitted
    remote = RemoteBatch()
    packing = Bolt()
    packing.emit = bolt_emitter("split", 3, packing.streams, {5: packing.batches[5].append, 6: remote.append},
                                True, packing.ids, check_values, False, None, True, packing.state)
    run(packing)
    assert [fields(t) for t in packing.batches[5]] == [fields(t) for t in local.batches[5]]
    assert fields(packing.state.current) == fields(local.state.current)  # every edge XOR-ed in
    assert packing.counts() == local.counts() and packing.state.emitted == local.state.emitted == 11
    # The rows before the one msgpack refuses were packed with no Tuple made; that one and
    # the one after it kept their Tuples, in order
    payloads = remote.take()
    to_six = local.batches[6]
    assert [type(p) for p in payloads] == [PackedRows, list]
    assert payloads[0].count == len(to_six) - 2
    assert [fields(t) for t in payloads[1]] == [fields(t) for t in to_six[-2:]]
    # The peer gets the rows the Tuples themselves would have given, bit for bit
    rows = [(t.id, t.task, t.stream, t.values, t.anchors) for t in to_six[:-2]]
    assert encode([("data", 6, payloads[0])]) == msgpack.packb([("data", 6, rows)], use_bin_type=True,
                                                              default=pack_ext)
    # and the refused one fails the frame, naming who emitted it
    with pytest.raises(SerializationError, match=r"^component 'split' emitted values on stream 'direct'"):
        encode([("data", 6, p) for p in payloads])
