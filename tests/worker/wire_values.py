"""Values, tuples and messages as the wire carries them: the hypothesis strategies the
encoder's and the reader's tests share."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from squall import compiled
from squall.topology.tuple import Tuple, record_type


def examples(n: int) -> int:
    """``n`` examples against the build, a third of them under SQUALL_PURE_PYTHON=1: CI runs
    these files against the build with all ``n``, then again interpreted
    (tests/test_compiled.py), the same source, where fewer find what differs between
    the two (a C type's range, an unchecked cast) in less time."""
    return n if compiled.enabled() else max(n // 3, 1)


SETTINGS = settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
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
