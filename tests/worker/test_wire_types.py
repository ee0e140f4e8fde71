"""The registry of wire extension types: what a feature registers crosses, anything else is refused."""

from __future__ import annotations

import msgpack
import pytest

from squall.errors import SerializationError
from squall.topology.tuple import Tuple, record_type
from squall.transactional.attempt import EXT_CODE, TransactionAttempt
from squall.worker.executors import emit as collector
from squall.worker.executors import routing
from squall.worker.wire import codec as serialization
from squall.worker.wire import value_types as wire_types
from squall.worker.wire.value_types import PLAIN_TYPES, ext_hook, pack_ext, register
from tests.worker.wire_topology import ATTEMPT_BOLTS, ATTEMPT_PLAN, ATTEMPT_SPOUT, decode


def test_a_registered_type_is_plain_for_the_emit_check_and_the_serializer() -> None:
    # The very set check_values holds, with TransactionAttempt in it
    assert serialization._SCALARS is PLAIN_TYPES and TransactionAttempt in PLAIN_TYPES
    serialization.check_values([TransactionAttempt(1, 2, 3), "w"], ("attempt", "word"), "c", "s")

    # and the emitters: an emit of one is not even sent to the deep check
    def deep_check(*args: object) -> None:
        raise AssertionError(f"checked {args}")

    record = record_type(("attempt", "word"))
    stream = collector.StreamOut("default", record, record._fields, routing.all_tasks([1]), False)
    out: list[Tuple] = []
    emit = collector.bolt_emitter("c", 2, {"default": stream}, {1: out.append}, False, collector.random_ids(),
                                  deep_check, False, None, True, collector.TaskState())
    emit([TransactionAttempt(1, 2, 3), "w"])
    assert [tuple(t.values) for t in out] == [(TransactionAttempt(1, 2, 3), "w")]


def test_a_registered_type_round_trips_one_object_per_frame() -> None:
    a = TransactionAttempt(5, 77, 2)
    record = record_type(("tx", "word"))
    rows = [Tuple(None, "spout", "default", ATTEMPT_SPOUT, record(a, str(i)), None) for i in range(3)]
    frame = serialization.encode([("data", ATTEMPT_BOLTS[0], rows)])
    [(_kind, _task, payload)] = decode(ATTEMPT_PLAN, frame)
    got = [t.values[0] for t in payload]
    assert got == [a, a, a] and got[0] is got[1] is got[2]


def test_an_unregistered_class_is_refused_and_an_unknown_code_raises_only_when_strict() -> None:
    class Unknown:
        pass

    with pytest.raises(TypeError, match="cannot serialize Unknown"):
        pack_ext(Unknown())
    with pytest.raises(SerializationError, match="and a TransactionAttempt can be emitted"):
        serialization.check_values([Unknown()], ("x",), "c", "s")
    data = msgpack.packb(msgpack.ExtType(99, b"?"))
    assert msgpack.unpackb(data, ext_hook=ext_hook(strict=False)) == msgpack.ExtType(99, b"?")
    with pytest.raises(ValueError, match="unknown msgpack extension type 99"):
        msgpack.unpackb(data, ext_hook=ext_hook(strict=True))


def test_a_taken_code_cannot_go_to_another_class_and_codes_stay_in_the_application_range() -> None:
    class Other:
        pass

    with pytest.raises(ValueError, match=f"code {EXT_CODE} is taken by squall.transactional.attempt"):
        register(EXT_CODE, Other, bytes, lambda: bytes)
    with pytest.raises(ValueError, match="0 to 127"):
        register(128, Other, bytes, lambda: bytes)
    assert Other not in PLAIN_TYPES
    assert [entry.cls for entry in wire_types.registered()] == [TransactionAttempt]
