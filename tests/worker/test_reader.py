"""The wire's one decoder (squall/worker/wire/reader.py) reads what msgpack reads and
refuses what msgpack refuses, and reads a data message's rows into the Tuples the
rows' checks allow, refusing a message at its first failing row for that row's reason.

The oracle is msgpack itself and the checks written out plainly below (as the
validator made them before the reader read rows itself).  CI runs this file built and
again under SQUALL_PURE_PYTHON=1 (tests/test_compiled.py): one source, both ways."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from squall import compiled
from squall.topology.tuple import Tuple, record_type
from squall.transactional.attempt import TransactionAttempt
from squall.worker.wire import codec
from squall.worker.wire.frames import WireValidator
from squall.worker.wire.reader import NESTING_BOUND, NotAFrame, RowsRefused, Undecodable, read_frame
from squall.worker.wire.value_types import ext_hook
from tests.worker.test_frame_fuzz import anything
from tests.worker.test_frame_fuzz import messages as structures
from tests.worker.wire_topology import PLAN
from tests.worker.wire_values import SETTINGS, fields, values

BUILT = compiled.enabled() and compiled.build_path("squall.worker.wire.reader").is_file()
VALIDATOR = WireValidator(PLAN, [1, 2])  # the worker of the acker (task 1) and the count (task 2)
TOP = (1 << 64) - 1


def nesting(v: Any, level: int = 0) -> int:
    """The level of the deepest array or map in ``v`` (0: ``v`` itself), or -1."""
    if type(v) is list or type(v) is dict:
        inner = v if type(v) is list else [*v.keys(), *v.values()]
        return max([level, *(nesting(x, level + 1) for x in inner)])
    return -1


def model_rows(by_source: dict[str, Any], rows: list[Any]) -> Any:
    """The rows' checks, in their order: the rows as Tuple fields, or the first failing reason."""
    out = []
    for row in rows:
        if type(row) is not list or len(row) != 5:
            return "shape"
        tid, src, stream, vals, anchors = row
        if type(src) is not int or type(stream) is not str:
            return "shape"
        component = VALIDATOR.task_component.get(src)
        entry = by_source.get(component, {}).get(stream) if component is not None else None
        if entry is None:
            return "source"
        record, nfields = entry
        if type(vals) is not list or len(vals) != nfields:
            return "shape"
        if tid is not None and (type(tid) is not int or tid < 0):
            return "shape"
        if anchors is not None and (type(anchors) is not dict or any(
                type(k) is not int or type(v) is not int or k < 0 or v < 0 for k, v in anchors.items())):
            return "shape"
        out.append((tid, component, stream, src, record, tuple(vals), anchors, 0))
    return out


def model(frame: bytes) -> Any:
    """What msgpack and the checks make of ``frame``."""
    try:
        top = msgpack.unpackb(frame, raw=False, strict_map_key=False, use_list=True,
                              ext_hook=ext_hook(strict=True))
    except Exception:  # noqa: BLE001 - whatever msgpack refuses
        return "undecodable"
    if nesting(top) >= NESTING_BOUND:
        return "undecodable"
    if type(top) is not list:
        return "frame"
    out = []
    for m in top:
        if (type(m) is list and len(m) == 3 and type(m[0]) is str and m[0] == "data" and type(m[1]) is int
                and m[1] in VALIDATOR.data_inputs and type(m[2]) is list):
            rows = model_rows(VALIDATOR.data_inputs[m[1]], m[2])
            out.append(("refused", rows) if type(rows) is str else ("data", m[1], rows))
        else:
            out.append(repr(m))
    return out


def ours(frame: bytes) -> Any:
    try:
        messages = read_frame(frame, VALIDATOR.task_component, VALIDATOR.data_inputs)
    except Undecodable:
        return "undecodable"
    except NotAFrame:
        return "frame"
    out: list[Any] = []
    for m in messages:
        if type(m) is RowsRefused:
            out.append(("refused", m.reason))
        elif type(m) is tuple:
            assert all(type(t) is Tuple for t in m[2])
            out.append(("data", m[1], [fields(t) for t in m[2]]))
        else:
            out.append(repr(m))
    return out


# Rows as a peer might send them to the count (task 2, subscribed to the spout, task 3):
# mostly well formed, with every field now and then of another type, sign or length.
u64 = st.integers(0, TOP)
rows = st.lists(st.one_of(
    st.tuples(st.one_of(st.none(), u64, anything), st.sampled_from([3, 3, 3, 1, 2, 99, "3", True]),
              st.sampled_from(["default", "default", "other", b"default"]),
              st.one_of(st.lists(anything, min_size=1, max_size=1), st.lists(anything, max_size=3), anything),
              st.one_of(st.none(), st.dictionaries(u64, u64, max_size=2),
                        st.dictionaries(st.integers(-3, 3), st.integers(-3, 3), max_size=2), anything),
              ).map(list),
    anything), max_size=8)
# Rows the count accepts: with no tree, with trees, with a long word, and as an emit writes
# them, the id being the one edge.
valid_row = st.one_of(
    st.tuples(st.one_of(st.none(), u64), st.just(3), st.just("default"), st.tuples(values),
              st.one_of(st.none(), st.dictionaries(u64, u64, max_size=2))).map(list),
    st.tuples(u64, st.just(3), st.just("default"), st.tuples(st.text(max_size=300)),
              st.dictionaries(u64, u64, min_size=1, max_size=1)).map(list),
    st.tuples(u64, u64, st.tuples(values)).map(lambda rev: [rev[1], 3, "default", rev[2], {rev[0]: rev[1]}]))
valid_rows = st.lists(valid_row, max_size=12)
# And among them one that may be refused (a negative id, root or edge), alone: with two the
# first refused would hide a check the reader forgot on the second.
small = st.integers(-3, 3)
doubtful_row = st.one_of(
    st.tuples(st.one_of(st.none(), u64, small), st.just(3), st.just("default"), st.tuples(values),
              st.dictionaries(small, small, max_size=2)).map(list),
    st.tuples(u64, u64, small, st.booleans()).map(
        lambda ires: [ires[0], 3, "default", ["w"], {ires[1]: ires[2]} if ires[3] else {ires[2]: ires[1]}]),
    st.tuples(st.one_of(u64, small), st.one_of(u64, small), st.tuples(values)).map(
        lambda rev: [rev[1], 3, "default", rev[2], {rev[0]: rev[1]}]))
one_doubtful = st.tuples(valid_rows, doubtful_row, st.integers(0, 12)).map(
    lambda rows_row_at: [*rows_row_at[0][:rows_row_at[2]], rows_row_at[1], *rows_row_at[0][rows_row_at[2]:]])
good_frames = st.lists(st.one_of(
    st.tuples(st.just("data"), st.just(2), st.one_of(valid_rows, one_doubtful, one_doubtful, rows)),
    st.tuples(st.sampled_from(["ack", "init", "acked", "fail", "data"]), st.sampled_from([1, 2, 3]),
              st.lists(st.one_of(u64, st.lists(u64, min_size=2, max_size=3)), max_size=3))),
    max_size=4)
packed = st.one_of(structures, good_frames, good_frames).map(lambda f: msgpack.packb(f, use_bin_type=True))
frames = st.one_of(st.binary(max_size=100), packed, packed)


@SETTINGS
@given(frames, st.integers(0, 100))
def test_it_reads_and_refuses_what_msgpack_and_the_checks_do(frame: bytes, cut: int) -> None:
    for candidate in (frame, frame[: len(frame) * cut // 100]):  # whole, and truncated
        assert ours(candidate) == model(candidate)


@SETTINGS
@given(one_doubtful)
def test_a_message_is_taken_or_refused_at_its_first_bad_row_as_the_checks_say(batch: list[Any]) -> None:
    frame = msgpack.packb([["data", 2, batch], ["ack", 1, [[5, 6]]]], use_bin_type=True)
    assert ours(frame) == model(frame)


# The children of one input, one after the other as an executor's batch has them: their
# roots and words repeat, or nearly (a root or word that differs only in its last byte,
# or is written in a longer form), where the reader shares the int or str it read.
near_roots = st.sampled_from([(1 << 63) + 1, (1 << 63) + 2, (1 << 63) + 257, 5, 6, 300, 301])
near_words = st.sampled_from(["cow", "cox", "co", "cow ", "cöw", "", "w" * 24, "w" * 25, "w" * 23 + "v"])
children = st.lists(st.tuples(u64, near_roots, near_words).map(
    lambda erw: [erw[0], 3, "default", [erw[2]], {erw[1]: erw[0]}]), max_size=12)


@SETTINGS
@given(children, st.lists(st.tuples(near_roots, near_roots), max_size=3))
def test_roots_and_words_it_shares_are_the_ones_sent(batch: list[Any], trees: list[Any]) -> None:
    for roots in trees:  # now and then a row of two trees
        batch.append([7, 3, "default", ["cow"], dict.fromkeys(roots, 7)])
    frame = msgpack.packb([["data", 2, batch]], use_bin_type=True)
    assert ours(frame) == model(frame)


def test_many_more_words_than_it_keeps_are_never_mixed_up() -> None:
    root = (1 << 63) + 11
    words = [f"w{i}" for i in range(20_000)]
    rows = [[i + 1, 3, "default", [w], {root: i + 1}] for i, w in enumerate(words)]
    frame = msgpack.packb([["data", 2, rows]], use_bin_type=True)
    for _ in range(2):  # and again, with what the first read kept
        ((_, _, got),) = read_frame(frame, VALIDATOR.task_component, VALIDATOR.data_inputs)
        assert [t.values.word for t in got] == words
        assert [t.anchors for t in got] == [{root: i + 1} for i in range(len(words))]
        assert all(t.id == i + 1 for i, t in enumerate(got))


@pytest.mark.skipif(not BUILT, reason="SQUALL_PURE_PYTHON=1: the interpreter keeps no str cache")
def test_a_word_seen_before_is_the_same_str() -> None:
    frame = msgpack.packb([["data", 2, [[1, 3, "default", ["cow"], None], [2, 3, "default", ["cow"], None]]]],
                          use_bin_type=True)
    ((_, _, (a, b)),) = read_frame(frame, VALIDATOR.task_component, VALIDATOR.data_inputs)
    assert a.values.word is b.values.word == "cow"


def test_a_frame_the_encoder_wrote_reads_into_the_tuples_sent() -> None:
    word = record_type(("word",))
    sent = [Tuple(TOP - i, "words", "default", 3, word._make([w]), {(1 << 63) + i: TOP - i})
            for i, w in enumerate(["the", "cow", "€" * 40, "x" * 300])]
    sent.append(Tuple(5, "words", "default", 3, word._make(["id not its edge"]), {7: 8}))
    sent.append(Tuple(None, "words", "default", 3, word._make([TransactionAttempt(1, 2)]), None))
    frame = codec.encode([("data", 2, sent), ("ack", 1, [[5, 6]])])
    messages = VALIDATOR.decode(frame)
    (kind, task, got), ack = messages
    assert (kind, task, ack) == ("data", 2, ("ack", 1, [[5, 6]]))
    assert [fields(t)[:3] + fields(t)[5:] for t in got] == [fields(t)[:3] + fields(t)[5:] for t in sent]
    assert [t.component for t in got] == ["words"] * len(sent)
    # and a tuple read off the wire reads, acks and prints like one made by its constructor
    tup = got[0]
    assert (tup.values.word, tup["word"], tup.values[0], tup.is_tick) == ("the", "the", "the", False)
    tup.ackval ^= 6
    assert tup.ackval == 6
    assert repr(tup) == repr(Tuple(TOP, "words", "default", 3, tup.values, {1 << 63: TOP}))
    with pytest.raises(AttributeError):
        tup.other = 1  # type: ignore[attr-defined]


def test_longer_forms_msgpack_reads_are_read_alike() -> None:
    # A row and its parts written in longer headers than msgpack's own encoder chooses:
    # array 16 for the row, uint 64 for a small id, str 16 for the stream, map 16 for anchors
    row = (b"\xdc\x00\x05" + b"\xcf" + (5).to_bytes(8, "big") + b"\x03" + b"\xda\x00\x07default"
           + b"\x91\xa3cow" + b"\xde\x00\x01\x09\x05")
    frame = b"\x91\x93\xa4data\x02\x91" + row
    assert ours(frame) == model(frame) == [("data", 2, [(5, "words", "default", 3,
                                                        VALIDATOR.data_inputs[2]["words"]["default"][0],
                                                        ("cow",), {9: 5}, 0)])]


def test_nesting_past_its_bound_refuses_the_frame_and_below_it_is_read() -> None:
    def deep(n: int) -> Any:
        v: Any = "w"
        for _ in range(n):
            v = [v]
        return v

    # values nested well past what an emit allows, still under the bound: read
    ok = msgpack.packb([["data", 2, [[None, 3, "default", [deep(100)], None]]]])
    assert ours(ok) == model(ok) and ours(ok)[0][0] == "data"
    # past it: refused whole, not a crash (nor the interpreter's recursion limit)
    for frame in (msgpack.packb([["ack", 1, deep(NESTING_BOUND)]]), b"\x91" * 5000 + b"\xc0"):
        assert ours(frame) == "undecodable"


def test_the_validator_counts_each_refused_message_and_delivers_the_rest() -> None:
    validator = WireValidator(PLAN, [1, 2])
    frame = msgpack.packb([
        ["data", 2, [[1, 3, "default", ["cow"], {5: 1}], [2, 3, "nowhere", ["x"], None]]],  # source
        ["data", 2, [[1, 3, "default", ["a", "b"], None]]],  # shape
        ["data", 3, []],  # to the spout: takes no data
        ["ack", 1, [[5, 6]]],
        ["nope", 1, []],
        "not a message",
        ["data", 2, [[7, 3, "default", ["moon"], {5: 7}]]],
    ])
    out = validator.decode(frame)
    assert [(k, t) for k, t, _ in out] == [("ack", 1), ("data", 2)]
    assert [x.values.word for x in out[1][2]] == ["moon"]
    assert {k: v for k, v in validator.rejected.items() if v} == {
        "source": 1, "shape": 1, "task": 1, "kind": 1, "frame": 1}
    assert validator.total_rejected == 5
    with pytest.raises(Exception, match="undecodable"):
        validator.decode(frame[:-1])
    assert validator.rejected["undecodable"] == 1
