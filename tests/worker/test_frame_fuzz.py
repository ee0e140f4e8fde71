"""Property: whatever bytes arrive, WireValidator.decode returns checked messages
or raises FrameRejected, nothing else, and what it returns is what executors expect."""

from __future__ import annotations

from typing import Any

import msgpack
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from squall.acker import AckLedger
from squall.acker.ledger import PACKED_ACK
from squall.topology.tuple import Tuple
from squall.transactional.attempt import EXT_CODE
from squall.worker.wire.frames import WIRE_KINDS, FrameRejected, WireValidator
from tests.worker.wire_topology import PLAN
from tests.worker.wire_values import examples

VALIDATOR = WireValidator(PLAN, PLAN.task_component)
TASKS = [-1, 0, 1, 2, 3, 4, 999, *PLAN.task_component]
SETTINGS = settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = st.one_of(st.none(), st.booleans(), st.integers(-(1 << 63), (1 << 64) - 1), st.floats(),
                    st.text(max_size=8), st.binary(max_size=8), st.sampled_from(["default", "word", "bp"]),
                    st.sampled_from(TASKS))
ext = st.builds(msgpack.ExtType, st.sampled_from([EXT_CODE, 1, 99]), st.binary(max_size=20))
keys = st.one_of(st.integers(0, 99), st.text(max_size=3))
anything = st.recursive(st.one_of(scalars, ext),
                        lambda inner: st.one_of(st.lists(inner, max_size=5),
                                                st.dictionaries(keys, inner, max_size=3)),
                        max_leaves=25)
# Rows and messages close to real ones, so that the deeper checks are reached too.
row = st.tuples(anything, st.sampled_from(TASKS), st.sampled_from(["default", "x"]),
                st.lists(anything, max_size=3),
                st.one_of(st.none(), st.dictionaries(keys, anything, max_size=2))).map(list)
rows = st.lists(st.one_of(anything, row), max_size=4)
kinds = st.sampled_from([*sorted(WIRE_KINDS), "tick", "call", "x"])
messages = st.lists(st.one_of(anything, st.tuples(kinds, st.sampled_from(TASKS),
                                                  st.one_of(rows, anything)).map(list)), max_size=4)


def check(frame: bytes) -> None:
    try:
        out = VALIDATOR.decode(frame)
    except FrameRejected as e:
        assert e.reason in VALIDATOR.rejected
        return
    for kind, task, payload in out:
        assert kind in WIRE_KINDS and type(task) is int
        if kind == "data":
            assert task in VALIDATOR.data_inputs
            assert all(type(t) is Tuple and type(t.task) is int and len(t.values) == 1 for t in payload)
            for t in payload:
                anchors = t.anchors or {}
                assert all(type(k) is int and type(v) is int for k, v in anchors.items())
        elif kind == "bp":
            assert task == -1 and type(payload[1]) is bool
        elif kind == "ack" and type(payload) is bytes:  # a bolt's acks, packed: whole pairs, to an acker
            assert task in VALIDATOR.acker_tasks and len(payload) % PACKED_ACK.size == 0
            AckLedger().ack_many(payload)  # which the acker's ledger takes
        else:
            assert type(payload) is list


@SETTINGS
@given(st.binary(max_size=200))
def test_arbitrary_bytes_are_decoded_or_rejected(frame: bytes) -> None:
    check(frame)


@SETTINGS
@given(messages)
def test_arbitrary_msgpack_structures_are_decoded_or_rejected(frame: list[Any]) -> None:
    try:
        packed = msgpack.packb(frame, use_bin_type=True)
    except (TypeError, ValueError, OverflowError):
        return  # not packable (keys msgpack refuses): nothing a peer could send either
    check(packed)
    check(packed[: len(packed) // 2])  # truncated


def test_deep_nesting_is_rejected_not_a_crash() -> None:
    deep: Any = ["data"]
    for _ in range(5000):
        deep = [deep]
    try:
        frame = msgpack.packb(deep)
    except ValueError:  # msgpack refuses to pack that deep: build the bytes by hand
        frame = b"\x91" * 5000 + b"\xc0"
    check(frame)
