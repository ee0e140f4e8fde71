"""The typed emitters (squall/worker/executors/typed_core.pyx) against their pure-Python twins
(squall/worker/executors/emit.py): the same inputs give the same tuples, anchors, ack
values, counts, pending trees and errors.

Both draw ids from the same seeded sequence here, so their outputs are equal
field for field; the typed ones' own generator is checked for what acking needs
of it.  CI runs these against the build (ops/bootstrap.sh makes it)."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import msgpack
import pytest

from squall import compiled
from squall.acker.ledger import PACKED_ACK
from squall.errors import SerializationError
from squall.topology.tuple import Tuple, record_type
from squall.worker.executors import emit as collector
from squall.worker.executors import routing
from squall.worker.executors.emit import SpoutTracker, StreamOut
from squall.worker.wire.codec import check_values

needs_build = pytest.mark.skipif(not compiled.accelerated(), reason="SQUALL_PURE_PYTHON=1: nothing is built")

WORD = record_type(("word",))
PAIR = record_type(("word", "n"))


def typed() -> Any:
    from squall.worker.executors import typed_core

    return typed_core


def streams() -> dict[str, StreamOut]:
    return {
        "default": StreamOut("default", WORD, ("word",), routing.fields([5, 6], [0]), False),
        "pairs": StreamOut("pairs", PAIR, ("word", "n"), routing.all_tasks([5, 6]), False),
        "direct": StreamOut("direct", WORD, ("word",), routing.direct([5, 6]), True),
        "nowhere": StreamOut("nowhere", WORD, ("word",), routing.combine([]), False),
    }


def seeded(seed: int = 3) -> Callable[[], int]:
    rng = random.Random(seed)
    return lambda: rng.getrandbits(64)


def fields(t: Any) -> tuple[Any, ...]:
    return (t.id, t.component, t.stream, t.task, type(t.values), tuple(t.values), t.anchors, t.ackval)


class Bolt:
    """One twin's bolt emit, its batches and state."""

    def __init__(self, twin: str, tracking: bool = True, auto_anchor: bool = True) -> None:
        make = collector.pure_bolt_emitter if twin == "pure" else typed().bolt_emitter
        self.state = collector.PureTaskState() if twin == "pure" else typed().TaskState()
        self.batches: dict[int, list[Any]] = {5: [], 6: []}
        self.streams = streams()
        self.emit = make("split", 3, self.streams, {t: b.append for t, b in self.batches.items()}, tracking,
                         seeded(), check_values, False, None, auto_anchor, self.state)

    def sent(self) -> dict[int, list[tuple[Any, ...]]]:
        return {t: [fields(x) for x in b] for t, b in self.batches.items()}

    def counts(self) -> dict[str, list[int]]:
        return {name: list(so.counts) for name, so in self.streams.items()}


def run_bolt(twin: str, script: Callable[[Bolt, Callable[..., Any]], Any], **kw: Any) -> Any:
    # The pure emitter with the typed Tuple, as a process runs it whose typed_core is stale
    # (the pure Tuple with the pure emitter is what SQUALL_PURE_PYTHON=1 runs: test_compiled).
    bolt = Bolt(twin, **kw)
    made = script(bolt, Tuple)
    return made, bolt.sent(), bolt.counts(), bolt.state.emitted


def both(script: Callable[[Bolt, Any], Any], **kw: Any) -> None:
    pure = run_bolt("pure", script, **kw)
    fast = run_bolt("typed", script, **kw)
    assert fast == pure
    return pure


@needs_build
def test_an_auto_anchored_emit_makes_the_same_children_and_anchor_ackval() -> None:
    def script(bolt: Bolt, tuple_cls: Any) -> Any:
        anchor = tuple_cls(7, "spout", "default", 1, ("a b",), {(1 << 64) - 5: 7})
        bolt.state.current = anchor
        tasks = [bolt.emit([w]) for w in ("cow", "moon", "over")]
        tasks.append(bolt.emit(["jumps", 2], stream="pairs"))
        return tasks, fields(anchor)

    (_tasks, anchor), sent, counts, emitted = both(script)
    assert emitted == 4 and counts["pairs"] == [1, 2]
    children = [c for batch in sent.values() for c in batch]
    # every child is in the anchor's tree, its id its edge, and the anchor XOR-ed every edge
    assert all(c[6] == {(1 << 64) - 5: c[0]} for c in children)
    x = 0
    for c in children:
        x ^= c[0]
    assert anchor[7] == x


@needs_build
def test_anchors_of_several_trees_and_several_anchors_give_the_same_maps() -> None:
    def script(bolt: Bolt, tuple_cls: Any) -> Any:
        two_trees = tuple_cls(8, "spout", "default", 1, ("x",), {11: 8, 12: 9})
        other = tuple_cls(9, "spout", "default", 1, ("y",), {11: 4})
        untracked = tuple_cls(None, "spout", "default", 1, ("z",), None)
        bolt.state.current = two_trees
        bolt.emit(["auto"])
        bolt.emit(["one"], anchors=other)
        bolt.emit(["one in a list"], anchors=[other])
        bolt.emit(["two trees in a tuple"], anchors=(two_trees,))
        bolt.emit(["many"], anchors=[two_trees, other, untracked])
        bolt.emit(["none of them tracked"], anchors=[untracked])
        bolt.emit(["empty list"], anchors=[])
        return [fields(t) for t in (two_trees, other, untracked)]

    made, sent, *_ = both(script)
    many = next(c for batch in sent.values() for c in batch if c[5] == ("many",))
    assert set(many[6]) == {11, 12}
    assert made[2][7] == 0  # nothing anchored to an untracked tuple changed it


@needs_build
def test_untracked_and_unanchored_emits_share_one_tuple_without_ids() -> None:
    def script(bolt: Bolt, tuple_cls: Any) -> Any:
        bolt.state.current = tuple_cls(7, "spout", "default", 1, ("a",), {1: 7})
        bolt.emit(["x", 1], stream="pairs")
        bolt.emit(["y"], direct_task=6, stream="direct")
        bolt.emit(["z"], stream="nowhere")
        return bolt.batches[5][0] is bolt.batches[6][0]

    shared, sent, counts, _ = both(script, tracking=False)
    assert shared and sent[6][-1][0] is None and sent[6][-1][6] is None
    assert counts["nowhere"] == [1, 0] and counts["direct"] == [1, 1]


@needs_build
def test_a_bolt_that_does_not_auto_anchor_emits_untracked_tuples() -> None:
    def script(bolt: Bolt, tuple_cls: Any) -> Any:
        bolt.state.current = tuple_cls(1, "spout", "default", 1, ("a",), {1: 1})
        bolt.emit(["x"])
        return fields(bolt.state.current)

    anchor, sent, *_ = both(script, auto_anchor=False)
    assert anchor[7] == 0 and [c[0] for batch in sent.values() for c in batch] == [None]


@needs_build
@pytest.mark.parametrize(("args", "kwargs"), [
    ((["a"],), {"stream": "undeclared"}),
    (("a",), {}),
    ((["a", "b"],), {}),
    ((["a"],), {"stream": "direct"}),
    ((["a"],), {"direct_task": 5}),
    (([1 << 70],), {}),
    (([object()],), {}),
])
def test_a_bad_emit_raises_the_same_error_and_sends_nothing(args: tuple[Any, ...],
                                                            kwargs: dict[str, Any]) -> None:
    errors = []
    for twin in ("pure", "typed"):
        bolt = Bolt(twin)
        with pytest.raises((ValueError, TypeError, SerializationError)) as e:
            bolt.emit(*args, **kwargs)
        errors.append((type(e.value), str(e.value), bolt.sent(), bolt.state.emitted))
    assert errors[0] == errors[1]


class Spout:
    def __init__(self, twin: str, ackers: list[int], local: list[int]) -> None:
        make = collector.pure_spout_emitter if twin == "pure" else typed().spout_emitter
        self.state = collector.PureTaskState() if twin == "pure" else typed().TaskState()
        self.batches: dict[int, list[Any]] = {5: [], 6: []}
        self.tracker = SpoutTracker(ackers, local)
        self.emit = make("words", 2, streams(), {t: b.append for t, b in self.batches.items()}, seeded(9),
                         check_values, False, None, self.tracker, lambda: 42.0, self.state)

    def seen(self) -> tuple[Any, ...]:
        table = self.tracker.pending
        pending = (dict(table.items()) if hasattr(table, "items") else
                   {k: v for bucket in table.buckets for k, v in bucket.items()})
        return ({t: [fields(x) for x in b] for t, b in self.batches.items()}, self.tracker.inits,
                self.tracker.immediate, pending, self.tracker.count, self.state.emitted)


@needs_build
@pytest.mark.parametrize(("ackers", "local"), [([10], [10]), ([10, 11, 12, 13], [11, 13]), ([], [])])
def test_a_spout_emit_makes_the_same_trees_inits_and_pending(ackers: list[int], local: list[int]) -> None:
    seen = []
    for twin in ("pure", "typed"):
        spout = Spout(twin, ackers, local)
        for i in range(50):
            spout.emit([f"w{i}"], tup_id=i)
        spout.emit(["both", 1], tup_id="b", stream="pairs")
        spout.emit(["untracked"])
        spout.emit(["to no task"], tup_id="gone", stream="nowhere")
        seen.append(spout.seen())
    assert seen[0] == seen[1]
    if ackers:
        _sent, inits, immediate, pending, count, emitted = seen[1]
        assert count == len(pending) == 51 and emitted == 53 and immediate == [(2, "gone")]
        # each tree's acker is a local one, chosen by its root
        used = {task for task, items in inits.items() if items}
        assert used <= set(local)
        assert all(root % len(ackers) == ackers.index(task)
                   for task, items in inits.items() for root, _v, _t in items)


@needs_build
def test_the_typed_generator_gives_random_64_bit_ids() -> None:
    ids = typed().RandomIds()
    drawn = [ids() for _ in range(100_000)]
    assert len(set(drawn)) == len(drawn)
    assert all(0 <= i < 1 << 64 for i in drawn)
    # every bit is set about half the time
    for bit in range(64):
        ones = sum((i >> bit) & 1 for i in drawn[:20_000])
        assert 9_000 < ones < 11_000, bit
    # and two generators (two executors) do not repeat each other
    assert not set(drawn) & {typed().RandomIds()() for _ in range(10_000)}


@needs_build
def test_typed_roots_near_the_top_of_the_range_pick_their_acker_and_stay_in_range() -> None:
    for ackers, local in (([1, 2, 3, 4, 5], [5]), ([1, 2, 3], [1])):
        seen = []
        for twin in ("pure", "typed"):
            make = collector.pure_spout_emitter if twin == "pure" else typed().spout_emitter
            tracker = SpoutTracker(ackers, local)
            batches: dict[int, list[Any]] = {5: [], 6: []}
            top = iter([(1 << 64) - 1, (1 << 64) - 2, 0, 3] * 4)
            state = collector.PureTaskState() if twin == "pure" else typed().TaskState()
            emit = make("w", 2, streams(), {t: b.append for t, b in batches.items()},
                        lambda top=top: next(top), check_values, False, None, tracker, lambda: 0.0, state)
            for i in range(5):
                emit([f"w{i}"], tup_id=i)
            seen.append(tracker.inits)
        assert seen[0] == seen[1]
        roots = [root for items in seen[1].values() for root, _v, _t in items]
        assert all(0 <= r < 1 << 64 and r % len(ackers) == ackers.index(local[0]) for r in roots)


@needs_build
def test_the_typed_ack_table_sums_as_the_dict_does_in_the_order_roots_came() -> None:
    rng = random.Random(5)
    roots = [rng.getrandbits(64) for _ in range(300)] + [0, (1 << 64) - 1]
    for turn in range(4):
        tables = (collector.PureAckTable(), typed().AckTable())
        # more roots in one turn than the table starts with, each acked several times
        for _ in range(2_000 * (turn + 1) // 4):
            root, val = rng.choice(roots), rng.getrandbits(64)
            for table in tables:
                table.xor(root, val)
        anchor = Tuple(1, "s", "default", 1, ("a",), {roots[0]: 7, roots[1]: 8})
        anchor.ackval = 3
        for table in tables:
            table.add(anchor)
            table.add(Tuple(2, "s", "default", 1, ("b",), {roots[2]: 9}))
            table.add(Tuple(None, "s", "default", 1, ("c",), None))
        assert len(tables[0]) == len(tables[1])
        assert tables[1].drain() == tables[0].drain()
        assert len(tables[1]) == 0 and tables[1].drain() == []


class Acking:
    """What run_acking asks of its executor: the stop flag and the error path."""

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


@needs_build
def test_the_typed_loop_acks_what_was_processed_and_stops_when_told() -> None:
    rng = random.Random(8)
    tuples = [Tuple(i, "split", "default", 1, (i,), {rng.getrandbits(2): rng.getrandbits(64)})
              for i in range(600)]
    for t in tuples[::3]:
        t.ackval = rng.getrandbits(64)
    # Given a bolt whose every seventh tuple raises
    ex = Acking()
    acks = typed().AckTable()
    state = typed().TaskState()
    errors = typed().run_batch(ex, "bt", tuples, ex.process, state, acks, True, 256)
    # Then every tuple ran, those that raised went to the error path unacked, the rest were acked
    expected = collector.PureAckTable()
    for t in tuples:
        if t.values[0] % 7:
            expected.add(t)
    assert errors == len(ex.errors) == 86 and ex.errors[0] == ("bt", "bad 0")
    assert ex.seen == list(range(600)) and state.current is tuples[-1]
    assert acks.drain() == expected.drain()
    # And an executor told to stop runs no further than the next check
    ex = Acking(stop_after=300)
    typed().run_batch(ex, "bt", tuples, ex.process, state, acks, True, 256)
    assert ex.seen == list(range(512))
    # And without acks (acked by hand, or untracked) it only runs them, the current tuple as asked
    for current in (True, False):
        ex, state = Acking(), typed().TaskState()
        assert typed().run_batch(ex, "bt", tuples, ex.process, state, None, current, 256) == 86
        assert ex.seen == list(range(600)) and (state.current is tuples[-1]) is current


@needs_build
def test_acks_grouped_by_acker_are_the_drained_pairs_each_at_its_roots_acker() -> None:
    rng = random.Random(9)
    roots = [rng.getrandbits(64) for _ in range(200)] + [0, (1 << 64) - 1]
    for ackers in (1, 2, 3, 7):
        tables = (collector.PureAckTable(), typed().AckTable())
        for _ in range(1_000):
            root, val = rng.choice(roots), rng.getrandbits(64)
            for table in tables:
                table.xor(root, val)
        pure_pairs = list(tables[0].items())
        groups = [t.drain_by(ackers) for t in tables]
        assert groups[0] == groups[1]
        assert len(groups[1]) == ackers
        # every pair once, packed, at the acker its root belongs to, in the order the roots came
        for i, group in enumerate(groups[1]):
            assert type(group) is bytes
            assert list(PACKED_ACK.iter_unpack(group)) == [(r, v) for r, v in pure_pairs if r % ackers == i]
        assert len(tables[1]) == 0 and tables[1].drain() == []
    for table in (collector.PureAckTable(), typed().AckTable()):
        with pytest.raises(ValueError, match="ackers must be at least 1"):
            table.drain_by(0)


@needs_build
def test_an_emit_to_another_worker_packs_the_rows_its_tuples_would_give() -> None:
    from squall.worker.wire.fastwire import PackedRows, RemoteBatch

    from squall.transactional.attempt import TransactionAttempt
    from squall.worker.wire import codec as serialization

    def unpack(frame: bytes) -> Any:
        return msgpack.unpackb(frame, raw=False, strict_map_key=False, ext_hook=msgpack.ExtType)

    def run(bolt: Bolt) -> None:
        bolt.state.current = Tuple(7, "spout", "default", 1, ("a b",), {(1 << 64) - 5: 7})
        for w in ("cow", "moon", "over", "jumps", "high", "low"):
            bolt.emit([w])  # fields grouped over tasks 5 and 6
        # a value only the generic encoder packs, among rows the packer writes itself
        for w in ("x", TransactionAttempt(4, 17), "y"):
            bolt.emit([w], stream="direct", direct_task=6)

    pure = Bolt("pure")
    run(pure)
    # The typed emit, task 6 in another worker: its rows packed as they are emitted
    fast = Bolt("typed")
    remote = RemoteBatch()
    fast.batches = {5: [], 6: []}
    fast.emit = typed().bolt_emitter("split", 3, fast.streams, {5: fast.batches[5].append, 6: remote.append},
                                     True, seeded(), check_values, False, None, True, fast.state)
    run(fast)
    assert fast.sent()[5] == pure.sent()[5]
    assert fields(fast.state.current) == fields(pure.state.current)  # every edge XOR-ed in
    assert fast.counts() == pure.counts() and fast.state.emitted == pure.state.emitted == 9
    # The peer gets the rows the Tuples themselves would have given, bit for bit
    payloads = remote.take()
    frame = serialization.encode([("data", 6, p) for p in payloads])
    expected = serialization.generic_encode([("data", 6, pure.batches[6])])
    rows = [msgpack.packb(row) for _, _, part in unpack(frame) for row in part]
    assert rows == [msgpack.packb(row) for row in unpack(expected)[0][2]]
    # The rows before the one the packer cannot write were packed with no Tuple made;
    # that one and the one after it kept their Tuples, in order
    to_six = pure.batches[6]
    assert [type(p) for p in payloads] == [PackedRows, list]
    assert payloads[0].count == len(to_six) - 2
    assert [fields(t) for t in payloads[1]] == [fields(t) for t in to_six[-2:]]
