"""Frames in C (squall/worker/wire/fastwire.pyx): the encoder writes the bytes msgpack
writes and leaves to the generic encoder everything it does not handle; the
decoder reads and refuses exactly what msgpack and WireValidator's checks do,
leaving them every frame it does not read itself.

`ops/bootstrap.sh` builds it, so CI runs these against the build; the
receiving side never knows which encoder ran, which is what makes it safe."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from squall import compiled
from squall.errors import SerializationError
from squall.topology.tuple import Tuple, record_type
from squall.transactional.attempt import TransactionAttempt
from squall.worker.executors import emit as collector
from squall.worker.wire import codec as serialization

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
