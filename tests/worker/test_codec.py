"""The wire's one encoder (squall/worker/wire/codec.py) against msgpack itself.

A frame must be exactly the bytes ``msgpack.packb(..., use_bin_type=True,
default=pack_ext)`` writes for the same messages, a data message's Tuples as
rows ``[id, src_task, stream, values, anchors]``: the receiving side and its
checks must not know who packed it.  What msgpack refuses fails with the error
that names the emitter.

CI runs this file against the build, and again under SQUALL_PURE_PYTHON=1
(tests/test_compiled.py): the same source, C-typed and interpreted."""

from __future__ import annotations

import collections
import enum
from typing import Any

import msgpack
import pytest
from hypothesis import given

from squall import compiled
from squall.errors import SerializationError
from squall.topology.tuple import Tuple, record_type
from squall.transactional.attempt import TransactionAttempt
from squall.worker.wire.codec import PackedRows, RemoteBatch, encode
from squall.worker.wire.value_types import pack_ext
from tests.worker.test_emit import TOP, Bolt
from tests.worker.wire_values import EDGES, RECORD, SETTINGS, messages

LENGTHS = [0, 1, 15, 16, 31, 32, 255, 256, 65535, 65536]
# msgpack refuses an object nested deeper than 1024; the interpreter's recursion limit is
# lower than that (the build's C recursion is not counted), so only the build reaches it.
built = pytest.mark.skipif(not compiled.enabled() or not compiled.status().get("squall.worker.wire.codec"),
                           reason="only the build nests as deep as msgpack")


def rows(payload: Any) -> list[tuple[Any, ...]]:
    return [(t.id, t.task, t.stream, t.values, t.anchors) for t in payload]


def oracle(batch: list[tuple[str, int, Any]]) -> bytes:
    """What msgpack writes for ``batch``, its Tuples made into rows first."""
    out = []
    for kind, task, payload in batch:
        if kind == "data":
            payload = rows(payload)
        elif kind == "tick":
            payload = None
        out.append((kind, task, payload))
    return msgpack.packb(out, use_bin_type=True, default=pack_ext)


def one_row(value: Any, anchors: Any = None) -> list[tuple[str, int, Any]]:
    return [("data", 3, [Tuple(7, "split", "default", 1, RECORD._make([1, value, "z"]), anchors)])]


def nested(depth: int, leaf: Any = 1) -> Any:
    for _ in range(depth):
        leaf = [leaf]
    return leaf


@SETTINGS
@given(messages)
def test_it_writes_exactly_the_bytes_msgpack_writes(batch: list[tuple[str, int, Any]]) -> None:
    assert encode(batch) == oracle(batch)


@pytest.mark.parametrize("n", LENGTHS)
def test_every_length_takes_the_header_msgpack_gives_it(n: int) -> None:
    kinds = ["x" * n, "é" * n, b"\x00" * n, bytearray(b"\x01" * n), [0] * n, tuple([1] * n),
             dict.fromkeys(range(n), 0), msgpack.ExtType(5, b"e" * n)]
    for value in kinds:
        for batch in (one_row(value), [("ack", 1, value)]):
            assert encode(batch) == oracle(batch), (type(value), n)


def test_every_int_takes_the_form_msgpack_gives_it() -> None:
    ints = [*EDGES, *(e + d for e in EDGES for d in (-1, 1) if -(1 << 63) <= e + d < 1 << 64)]
    for v in ints:
        for batch in (one_row(v), [("ack", v, [v, {v: v}])],
                      [("data", 3, [Tuple(v, "split", "default", v, RECORD._make([v, v, v]), {v: v})])]):
            assert encode(batch) == oracle(batch), v


def test_floats_bools_and_none_are_msgpacks() -> None:
    for v in (0.0, -0.0, 1.5, float("inf"), float("-inf"), float("nan"), 1e308, 5e-324, True, False, None):
        assert encode(one_row(v)) == oracle(one_row(v)), v


def test_extension_types_are_written_as_msgpack_writes_them() -> None:
    # A registered type (a TransactionAttempt, the first value of a transactional tuple),
    # an ExtType of every fixext and ext length, and msgpack's own Timestamp
    values: list[Any] = [TransactionAttempt(3, 99), TransactionAttempt((1 << 64) - 1, 1 << 40)]
    values += [msgpack.ExtType(code, b"d" * n) for code in (0, 127)
               for n in (0, 1, 2, 3, 4, 8, 16, 17, 255, 256, 65535, 65536)]
    values += [msgpack.Timestamp(1, 0), msgpack.Timestamp(1 << 33, 5), msgpack.Timestamp(-1, 7)]
    for v in values:
        for batch in (one_row(v), [("ack", 2, [v, {"k": v}])]):
            assert encode(batch) == oracle(batch), v


def test_subclasses_and_buffers_are_written_as_their_base_as_msgpack_does() -> None:
    class Colour(enum.IntEnum):
        RED = 300

    class Word(str):
        pass

    class Ratio(float):
        pass

    class Blob(bytes):
        pass

    class Items(list):  # type: ignore[type-arg]
        pass

    class Pair(RECORD):  # type: ignore[misc,valid-type]
        pass

    values = [Colour.RED, Word("cow"), Ratio(0.5), Blob(b"xy"), Items([1, "a"]), Pair(1, 2, 3),
              collections.OrderedDict(a=1), collections.Counter("aab"), memoryview(b"abc"),
              bytearray(b"ab"), (1, (2, [3]))]
    for v in values:
        assert encode(one_row(v)) == oracle(one_row(v)), v


def refused_reason(value: Any) -> str:
    try:
        msgpack.packb([1, value, "z"], use_bin_type=True, default=pack_ext)
    except Exception as e:  # noqa: BLE001 - what msgpack says is what is expected
        return str(e)
    raise AssertionError(f"msgpack packs {value!r}")


@pytest.mark.parametrize("value", [
    1 << 64,  # past 64 bits: msgpack's default hook refuses an int
    -(1 << 63) - 1,
    "lone \udc80 surrogate",
    object(),  # of no registered type
    {"k": {1, 2}},
    nested(1100),
], ids=["u64+1", "i64-1", "surrogate", "object", "set", "deep"])
def test_a_value_msgpack_refuses_fails_naming_its_emitter(value: Any) -> None:
    batch = [("ack", 1, [5, 6]), *one_row(value)]
    with pytest.raises(SerializationError) as got:
        encode(batch)
    prefix = "component 'split' emitted values on stream 'default' that msgpack cannot pack: "
    assert str(got.value).startswith(prefix)
    assert (got.value.component, got.value.task) == ("split", 1)
    reason = str(got.value)[len(prefix):]
    if type(value) is list and reason != refused_reason(value):
        # (in the interpreter its own recursion limit comes first)
        assert not compiled.status().get("squall.worker.wire.codec") and "recursion" in reason
    else:
        assert reason == refused_reason(value)


def test_a_value_msgpack_refuses_outside_the_rows_fails_for_the_batch() -> None:
    refused = r"^cannot serialize a batch for the wire: cannot serialize object"
    with pytest.raises(SerializationError, match=refused):
        encode([("ack", 1, [object()])])


@built
def test_it_nests_exactly_as_deep_as_msgpack() -> None:
    # The payload is at depth 2 (the frame, the message): its leaf at 2 + 1022 is the deepest allowed
    assert encode([("ack", 1, nested(1022))]) == oracle([("ack", 1, nested(1022))])
    with pytest.raises(ValueError, match="recursion limit exceeded"):
        oracle([("ack", 1, nested(1023))])
    with pytest.raises(SerializationError, match="recursion limit exceeded"):
        encode([("ack", 1, nested(1023))])


def test_rows_of_any_tuple_and_of_every_anchoring_are_msgpacks() -> None:
    class Sub(Tuple):  # type: ignore[misc]
        __slots__ = ()

    class Row:  # any object with a tuple's fields (a feature's own tuple)
        def __init__(self, id: int, anchors: Any) -> None:  # noqa: A002
            self.id, self.task, self.stream, self.values, self.anchors = id, 4, "s", ("v",), anchors

    payload = [
        Sub(7, "split", "default", 1, RECORD._make([1, 2, 3]), None),
        Sub(8, "split", "default", 1, RECORD._make([1, 2, 3]), {9: 8}),
        Tuple(None, "split", "default", 1, RECORD._make([1, 2, 3]), None),
        Tuple(5, "split", "default", 1, RECORD._make([1, 2, 3]), {TOP: 5}),  # one tree, its id given
        Tuple(5, "split", "default", 1, RECORD._make([1, 2, 3]), {TOP: 6, 3: 4}),  # two trees
        Tuple(-5, "split", "default", 1, RECORD._make([1, 2, 3]), {-1: "x"}),  # ids msgpack still packs
        Tuple(5, "split", "default", 1, RECORD._make([1, 2, 3]), {}),
        Row(3, {1: 2}),
    ]
    for batch in ([("data", 6, payload)], [("data", 6, tuple(payload))]):
        assert encode(batch) == oracle([("data", 6, payload)])


def test_an_emits_tuples_of_one_tree_are_written_from_their_fields_as_msgpack_would() -> None:
    # Given a bolt's children of one tree (built, their id is only their edge, in C)
    bolt = Bolt()
    bolt.state.current = Tuple(7, "spout", "default", 1, ("a b",), {TOP - 4: 7})
    for w in ("cow", "moon", "é" * 40, "over"):
        bolt.emit([w])
    bolt.emit(["jumps", 2], stream="pairs")
    # Then the frame of each target task's batch is msgpack's for the same Tuples
    for task, batch in bolt.batches.items():
        assert batch and encode([("data", task, batch)]) == oracle([("data", task, batch)])


def test_packed_rows_are_copied_among_the_other_messages() -> None:
    record = record_type(("word",))
    words = [Tuple(1000 + i, "words", "default", 3, record._make([w]), {TOP - i: 1000 + i})
             for i, w in enumerate(["the", "cow", "é" * 40])]
    remote = RemoteBatch()
    for t in words:
        remote.append(t)
    (packed,) = remote.take()
    assert type(packed) is PackedRows and len(packed) == packed.count == 3
    attempt = [Tuple(9, "words", "default", 3, record._make([TransactionAttempt(1, 2)]), None)]
    batch = [("data", 2, packed), ("ack", 1, [[(1 << 63) + 5, 77]]), ("tick", 2, "ignored"),
             ("data", 2, attempt), ("data", 4, packed)]
    expected = oracle([("data", 2, words), *batch[1:4], ("data", 4, words)])
    assert encode(batch) == expected
