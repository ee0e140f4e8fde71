"""Frames in C (squall/worker/wire/fastwire.pyx): the encoder writes the bytes msgpack
writes and leaves to the generic encoder everything it does not handle; the
decoder reads and refuses exactly what msgpack and WireValidator's checks do,
leaving them every frame it does not read itself.

`ops/bootstrap.sh` builds it, so CI runs these against the build; the
receiving side never knows which encoder ran, which is what makes it safe."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from squall import compiled
from squall.errors import SerializationError
from squall.topology.tuple import Tuple, record_type
from squall.transactional.attempt import TransactionAttempt
from squall.worker.executors import emit as collector
from squall.worker.wire import codec as serialization
from squall.worker.wire import frames as wire
from squall.worker.wire.frames import WireValidator
from tests.worker.test_frame_fuzz import anything
from tests.worker.test_frame_fuzz import messages as structures
from tests.worker.wire_topology import PLAN

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
RECORD = record_type(("a", "b", "c"))
# Every length and magnitude where msgpack changes its header or int form.
EDGES = [0, 1, 127, 128, 255, 256, 65535, 65536, (1 << 32) - 1, 1 << 32, (1 << 63) - 1, 1 << 63,
         (1 << 64) - 1, -1, -32, -33, -128, -129, -32768, -32769, -(1 << 31), -(1 << 31) - 1, -(1 << 63)]
LENGTHS = st.sampled_from([0, 1, 15, 16, 31, 32, 255, 256, 65535, 65536])

scalars = st.one_of(st.none(), st.booleans(), st.sampled_from(EDGES), st.integers(-(1 << 63), (1 << 64) - 1),
                    st.floats(allow_nan=False), st.text(max_size=40), st.binary(max_size=40),
                    LENGTHS.map(lambda n: "é" * n), LENGTHS.map(lambda n: b"\x00" * n))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=18), st.lists(inner, max_size=3).map(tuple),
    st.dictionaries(st.one_of(st.integers(-5, 5), st.text(max_size=3)), inner, max_size=17)), max_leaves=30)
tuples = st.builds(lambda tid, task, stream, vals, anchors: Tuple(tid, "split", stream, task,
                                                                  RECORD._make(vals), anchors),
                   st.one_of(st.none(), st.integers(0, (1 << 64) - 1)), st.integers(0, 99),
                   st.sampled_from(["default", "words"]), st.tuples(values, values, values),
                   st.one_of(st.none(), st.dictionaries(st.integers(0, (1 << 64) - 1),
                                                        st.integers(0, (1 << 64) - 1), max_size=3)))
messages = st.lists(st.one_of(
    st.tuples(st.just("data"), st.integers(0, 99), st.lists(tuples, max_size=20)),
    st.tuples(st.sampled_from(["ack", "init", "fail", "acked", "failed", "bp"]), st.integers(-1, 99), values),
    st.tuples(st.just("tick"), st.integers(0, 99), st.none())), max_size=17)

def fields(t: Tuple) -> tuple[Any, ...]:
    return t.id, t.component, t.stream, t.task, type(t.values), tuple(t.values), t.anchors, t.ackval


needs_build = pytest.mark.skipif(not compiled.accelerated(), reason="SQUALL_PURE_PYTHON=1: nothing is built")


def test_the_bootstrap_built_the_encoder_and_frames_go_through_it() -> None:
    # Given the checkout ops/bootstrap.sh set up (CI runs it before the tests)
    assert compiled.enabled(), "these tests check the build: run them without SQUALL_PURE_PYTHON"
    # Then the encoder is built, and encode uses it
    assert compiled.accelerated(), "run: python -m squall.compiled build"
    assert serialization.fast_encode is not None
    assert wire.fast_tuples is not None
    assert wire.fast_decode is not None
    # and so are the typed Tuple and emitters (tuple.py with tuple.pxd, emit.py with emit.pxd)
    from squall.topology import tuple as tuple_module

    assert tuple_module.__file__.endswith(compiled.SUFFIX) and Tuple is tuple_module.Tuple
    assert collector.__file__.endswith(compiled.SUFFIX)


@needs_build
@SETTINGS
@given(messages)
def test_it_writes_exactly_the_bytes_msgpack_writes(batch: list[tuple[str, int, Any]]) -> None:
    frame = serialization.fast_encode(batch)
    assert frame is not None
    assert frame == serialization.generic_encode(batch)


@needs_build
def test_a_frame_it_wrote_decodes_into_the_tuples_sent() -> None:
    # Given a batch of words from the spout (task 3) to the count (task 2), anchored in trees
    word = record_type(("word",))
    sent = [Tuple(1000 + i, "words", "default", 3, word._make([w]), {(1 << 64) - 1 - i: 1000 + i})
            for i, w in enumerate(["the", "cow", "jumped", "é" * 40])]
    frame = serialization.fast_encode([("data", 2, sent), ("ack", 1, [[(1 << 63) + 5, 77]])])
    # When the worker of the count and the acker (task 1) decodes it
    messages = WireValidator(PLAN, [1, 2]).decode(frame)
    # Then it gets every tuple as sent, and the ack
    (kind, task, got), ack = messages
    assert (kind, task) == ("data", 2)
    assert [(t.id, t.task, t.component, t.stream, t.values.word, t.anchors) for t in got] == [
        (t.id, t.task, t.component, t.stream, t.values.word, t.anchors) for t in sent]
    assert ack == ("ack", 1, [[(1 << 63) + 5, 77]])


@needs_build
@pytest.mark.parametrize("value", [
    TransactionAttempt(3, 99),  # a msgpack extension type: only the generic path writes it
    bytearray(b"xy"),
    1 << 64,  # msgpack refuses these three; the generic path names who emitted them
    -(1 << 63) - 1,
    "lone \udc80 surrogate",
    [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]],
])
def test_what_it_does_not_handle_goes_the_generic_way(value: Any) -> None:
    batch = [("data", 3, [Tuple(7, "split", "default", 1, RECORD._make([1, value, "z"]), {9: 7})])]
    # The C encoder declines ...
    assert serialization.fast_encode(batch) is None
    # ... and encode gives what the generic path gives: the frame, or the error naming the emitter
    try:
        expected: Any = serialization.generic_encode(batch)
    except SerializationError as e:
        with pytest.raises(SerializationError, match="component 'split'") as got:
            serialization.encode(batch)
        assert str(got.value) == str(e)
    else:
        assert serialization.encode(batch) == expected


@needs_build
def test_a_row_that_is_not_a_tuple_object_goes_the_generic_way() -> None:
    class Sub(Tuple):
        __slots__ = ()

    batch = [("data", 3, [Sub(7, "split", "default", 1, RECORD._make([1, 2, 3]), None)])]
    assert serialization.fast_encode(batch) is None
    assert serialization.encode(batch) == serialization.generic_encode(batch)


# Rows as a peer might send them to the count (task 2, subscribed to the spout, task 3):
# mostly well formed, with every field now and then of another type, sign or length.
u64 = st.integers(0, (1 << 64) - 1)
rows = st.lists(st.one_of(
    st.tuples(st.one_of(st.none(), u64, anything), st.sampled_from([3, 3, 3, 1, 2, 99, "3", True]),
              st.sampled_from(["default", "default", "other", b"default"]),
              st.one_of(st.lists(anything, min_size=1, max_size=1), st.lists(anything, max_size=3), anything),
              st.one_of(st.none(), st.dictionaries(u64, u64, max_size=2),
                        st.dictionaries(st.integers(-3, 3), st.integers(-3, 3), max_size=2), anything),
              ).map(list),
    anything), max_size=8)
# Rows the count accepts: with no tree, with trees, with a long word, and as an emit writes
# them, the id being the one edge (the decoder reads that int once).
valid_row = st.one_of(
    st.tuples(st.one_of(st.none(), u64), st.just(3), st.just("default"), st.tuples(values),
              st.one_of(st.none(), st.dictionaries(u64, u64, max_size=2))).map(list),
    st.tuples(u64, st.just(3), st.just("default"), st.tuples(st.text(max_size=300)),
              st.dictionaries(u64, u64, min_size=1, max_size=1)).map(list),
    st.tuples(u64, u64, st.tuples(values)).map(lambda rev: [rev[1], 3, "default", rev[2], {rev[0]: rev[1]}]))
valid_rows = st.lists(valid_row, max_size=12)
# And among them one that may be refused (a negative id, root or edge), alone: with two the
# first refused would hide a check the decoder forgot on the second.
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


@needs_build
@SETTINGS
@given(st.one_of(rows, one_doubtful))
def test_the_rows_step_accepts_and_refuses_what_the_python_step_does(batch: list[Any]) -> None:
    validator = WireValidator(PLAN, [1, 2])
    by_source = validator.data_inputs[2]
    try:
        expected: Any = [fields(t) for t in validator._tuples(by_source, batch)]
    except wire._Bad as bad:
        expected = bad.reason
    got = wire.fast_tuples(validator.task_component, by_source, batch)
    if type(got) is list:
        assert all(type(t) is Tuple for t in got)
        got = [fields(t) for t in got]
    assert got == expected


@needs_build
def test_tuples_built_in_c_behave_as_any_other() -> None:
    # Given a row decoded by the C step
    validator = WireValidator(PLAN, [1, 2])
    (tup,) = wire.fast_tuples(validator.task_component, validator.data_inputs[2],
                              [[5, 3, "default", ["cow"], {11: 5}]])
    # Then it reads, acks and prints like a Tuple made by its constructor
    assert (tup.values.word, tup["word"], tup.values[0], tup.is_tick) == ("cow", "cow", "cow", False)
    tup.ackval ^= 6
    assert tup.ackval == 6
    assert repr(tup) == repr(Tuple(5, "words", "default", 3, tup.values, {11: 5}))
    with pytest.raises(AttributeError):
        tup.other = 1  # type: ignore[attr-defined]


def read(frame: bytes, monkeypatch: pytest.MonkeyPatch, fast: bool) -> Any:
    """What a worker of the count and the acker makes of ``frame``: its messages (Tuples
    as their fields) and what it counted as rejected, or the reason it refused it all."""
    with monkeypatch.context() as m:
        if not fast:
            m.setattr(wire, "fast_decode", None)
            m.setattr(wire, "fast_tuples", None)
        validator = WireValidator(PLAN, [1, 2])
        try:
            messages = validator.decode(frame)
        except wire.FrameRejected as e:
            return e.reason, validator.rejected
    return [(k, t, [fields(x) for x in p] if k == "data" else p) for k, t, p in messages], validator.rejected


good_frames = st.lists(st.one_of(
    st.tuples(st.just("data"), st.just(2), st.one_of(valid_rows, one_doubtful, one_doubtful, rows)),
    st.tuples(st.sampled_from(["ack", "init", "acked", "fail"]), st.sampled_from([1, 2, 3]),
              st.lists(st.one_of(u64, st.lists(u64, min_size=2, max_size=3)), max_size=3))), max_size=4)
frames = st.one_of(
    st.binary(max_size=100),
    structures.map(lambda frame: msgpack.packb(frame, use_bin_type=True)),
    good_frames.map(lambda frame: msgpack.packb(frame, use_bin_type=True)),
    good_frames.map(lambda frame: msgpack.packb(frame, use_bin_type=True)),
)


@needs_build
@SETTINGS
@given(frames, st.integers(0, 100))
def test_the_decoder_reads_and_refuses_what_msgpack_and_the_checks_do(frame: bytes, cut: int) -> None:
    monkeypatch = pytest.MonkeyPatch()
    for candidate in (frame, frame[: len(frame) * cut // 100]):  # whole, and truncated
        assert read(candidate, monkeypatch, fast=True) == read(candidate, monkeypatch, fast=False)



@needs_build
@SETTINGS
@given(one_doubtful)
def test_the_decoder_takes_a_frame_of_rows_or_leaves_it_as_the_checks_say(batch: list[Any]) -> None:
    # One data message whose rows are well formed but for one that may not be
    frame = msgpack.packb([["data", 2, batch]], use_bin_type=True)
    monkeypatch = pytest.MonkeyPatch()
    assert read(frame, monkeypatch, fast=True) == read(frame, monkeypatch, fast=False)

@needs_build
def test_the_decoder_reads_real_frames_itself() -> None:
    # Given a frame as a split's worker sends it: words to the count, and an ack
    word = record_type(("word",))
    top = (1 << 64) - 1
    sent = [Tuple(top - i, "words", "default", 3, word._make([w]), {(1 << 63) + i: top - i})
            for i, w in enumerate(["the", "cow", "€" * 40, "x" * 300])]
    frame = serialization.encode([("data", 2, sent), ("ack", 1, [[5, 6]])])
    # Then the C decoder reads it (it does not decline it to the msgpack path)
    validator = WireValidator(PLAN, [1, 2])
    parsed = wire.fast_decode(frame, validator.task_component, validator.data_inputs)
    assert parsed is not None
    (kind, task, got), ack = parsed
    assert (kind, task, ack) == ("data", 2, ["ack", 1, [[5, 6]]])
    assert [(t.id, t.task, t.stream, t.values, t.anchors) for t in got] == [
        (t.id, t.task, t.stream, t.values, t.anchors) for t in sent]


# The children of one input, one after the other as an executor's batch has them: their
# roots and words repeat, or nearly (a root or word that differs only in its last byte,
# or is written in a longer form), where the decoder shares the int or str it read.
near_roots = st.sampled_from([(1 << 63) + 1, (1 << 63) + 2, (1 << 63) + 257, 5, 6, 300, 301])
near_words = st.sampled_from(["cow", "cox", "co", "cow ", "cöw", "", "w" * 24, "w" * 25, "w" * 23 + "v"])
children = st.lists(st.tuples(u64, near_roots, near_words).map(
    lambda erw: [erw[0], 3, "default", [erw[2]], {erw[1]: erw[0]}]), max_size=12)


@needs_build
@SETTINGS
@given(children, st.lists(st.tuples(near_roots, near_roots), max_size=3))
def test_roots_and_words_the_decoder_shares_are_the_ones_sent(batch: list[Any], trees: list[Any]) -> None:
    # Rows whose roots and words repeat or nearly repeat, and now and then a row of two trees
    for roots in trees:
        batch.append([7, 3, "default", ["cow"], dict.fromkeys(roots, 7)])
    frame = msgpack.packb([["data", 2, batch]], use_bin_type=True)
    monkeypatch = pytest.MonkeyPatch()
    assert read(frame, monkeypatch, fast=True) == read(frame, monkeypatch, fast=False)


@needs_build
def test_the_decoder_shares_a_repeated_root_and_word_and_never_mixes_them_up() -> None:
    validator = WireValidator(PLAN, [1, 2])
    root = (1 << 63) + 11
    # Given many more distinct words than the decoder keeps (every slot of it taken, some twice)
    words = [f"w{i}" for i in range(20_000)]
    rows = [[i + 1, 3, "default", [w], {root: i + 1}] for i, w in enumerate(words)]
    frame = msgpack.packb([["data", 2, rows]], use_bin_type=True)
    for _ in range(2):  # and again, with what the first decode kept
        (_, _, got), = wire.fast_decode(frame, validator.task_component, validator.data_inputs)
        # Then every word and tree is the one sent
        assert [t.values.word for t in got] == words
        assert [t.anchors for t in got] == [{root: i + 1} for i in range(len(words))]
    # And a word seen before is the same str
    again = msgpack.packb([["data", 2, [[1, 3, "default", ["cow"], None], [2, 3, "default", ["cow"], None]]]],
                          use_bin_type=True)
    (_, _, (a, b)), = wire.fast_decode(again, validator.task_component, validator.data_inputs)
    assert a.values.word is b.values.word == "cow"
