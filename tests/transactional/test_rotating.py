"""Per-transaction values kept until committed (squall.transactional.rotating), and
the TransactionAttempt every tuple of a transactional topology carries
(squall.transactional.attempt, and its trip through squall.worker.wire.codec)."""

from __future__ import annotations

import math
import pickle
from typing import Any

import pytest

from squall.cluster.fenced_state import MemoryBackend
from squall.errors import SerializationError
from squall.topology.tuple import Tuple, record_type
from squall.transactional.attempt import TransactionAttempt, pack, unpacker
from squall.transactional.rotating import MetadataConflict, MissingPredecessor, RotatingState
from squall.worker.wire.codec import encode
from tests.worker.wire_topology import ATTEMPT_BOLTS, ATTEMPT_PLAN, ATTEMPT_SPOUT, decode


class Maker:
    """A ``make`` callback that records the previous values it was given."""

    def __init__(self, value: Any = None) -> None:
        self.calls: list[Any] = []
        self.value = value

    def __call__(self, prev: Any) -> Any:
        self.calls.append(prev)
        if self.value is not None:
            return self.value
        return {"n": 1} if prev is None else {"n": prev["n"] + 1}


def rotating(backend: MemoryBackend | None = None, subdir: str = "meta") -> tuple[Any, RotatingState]:
    backend = backend or MemoryBackend()
    return backend, RotatingState(backend.open("tid", "sub"), subdir, "test metadata")


# -- RotatingState -----------------------------------------------------------------------


def test_a_fresh_state_is_empty() -> None:
    _, rs = rotating()
    assert 1 not in rs
    assert rs.latest() is None
    with pytest.raises(KeyError):
        rs.get(1)


def test_put_and_get_round_trip_normalises_as_json() -> None:
    backend, rs = rotating()

    stored = rs.put(3, {"range": (1, 50), "parts": [("a", 1)], 7: None})

    expected = {"range": [1, 50], "parts": [["a", 1]], "7": None}
    assert stored == expected
    assert rs.get(3) == expected
    assert isinstance(rs.get(3)["range"], list)
    assert 3 in rs
    assert rs.latest() == 3
    assert backend.paths() == ["/transactional/tid/sub/meta/3"]


def test_a_txids_value_is_written_once_and_a_different_second_one_is_a_conflict() -> None:
    # Two instances of one task (a worker whose slot moved, beside its replacement)
    backend = MemoryBackend()
    _, first = rotating(backend)
    _, second = rotating(backend)
    # When both make txid 1's metadata, from a partition read at different times
    first.put(1, {"lo": 0, "hi": 40})
    # Then the second learns it lost, and both keep the first value for good
    with pytest.raises(MetadataConflict):
        second.put(1, {"lo": 0, "hi": 55})
    assert second.get(1) == first.get(1) == {"lo": 0, "hi": 40}
    # and the same value again is no conflict (a retried write)
    assert second.put(1, {"lo": 0, "hi": 40}) == {"lo": 0, "hi": 40}


def test_get_or_make_finds_what_another_instance_stored_instead_of_making_it_again() -> None:
    # Given an instance loaded before another one stored txids 1 and 2
    backend = MemoryBackend()
    _, early = rotating(backend)
    _, other = rotating(backend)
    other.get_or_make(1, Maker(), committed=0)
    other.get_or_make(2, Maker(), committed=0)

    def make(prev: Any) -> Any:
        raise AssertionError("a stored txid must be replayed, not made again")

    # Then the early one replays txid 2 as stored and makes txid 3 from it
    assert early.get_or_make(2, make, committed=0) == ({"n": 2}, True)
    assert early.get_or_make(3, Maker(), committed=0) == ({"n": 3}, False)


def test_a_stored_null_is_a_value_not_an_absence() -> None:
    # A TransactionalSpout's initialize_transaction returns None by default
    backend, rs = rotating()
    assert rs.get_or_make(1, lambda prev: None, committed=0) == (None, False)
    # When another instance, which never loaded txid 1, is asked for txid 2
    _, other = rotating(backend)
    other.entries.clear()
    # Then txid 1's stored null is its predecessor (not "in flight but unknown here")
    assert other.get_or_make(2, lambda prev: "after null" if prev is None else prev, committed=0) \
        == ("after null", False)


def test_get_or_make_makes_the_first_value_from_none_and_the_next_from_the_previous() -> None:
    # Given an empty rotating state
    _, rs = rotating()
    make = Maker()

    # When txid 1, then 2, then 3 are asked for
    assert rs.get_or_make(1, make, committed=0) == ({"n": 1}, False)
    assert rs.get_or_make(2, make, committed=0) == ({"n": 2}, False)
    assert rs.get_or_make(3, make, committed=0) == ({"n": 3}, False)

    # Then the first was made from None, each next from its predecessor's value
    assert make.calls == [None, {"n": 1}, {"n": 2}]
    assert rs.latest() == 3


def test_get_or_make_of_the_first_txid_after_a_restored_current_starts_from_none() -> None:
    # txid 6 is committed and left nothing here (a partition that is new): 7 starts from None
    _, rs = rotating()
    make = Maker()
    assert rs.get_or_make(7, make, committed=6) == ({"n": 1}, False)
    assert make.calls == [None]


def test_get_or_make_refuses_to_start_after_an_in_flight_txid_it_never_saw() -> None:
    # Given txid 1 in flight (nothing committed) whose batch never reached this task
    backend, rs = rotating()
    # When txid 2 arrives first, it cannot start from nothing: it would overlap txid 1
    with pytest.raises(MissingPredecessor):
        rs.get_or_make(2, Maker(), committed=0)
    assert backend.paths() == []
    # and once txid 1 is made, txid 2 follows it
    rs.get_or_make(1, Maker(), committed=0)
    assert rs.get_or_make(2, lambda prev: prev["n"] + 1, committed=0) == (2, False)


def test_get_or_make_returns_an_existing_value_without_calling_make() -> None:
    _, rs = rotating()
    rs.put(1, {"n": 41})

    def make(prev: Any) -> Any:
        raise AssertionError("make must not be called for a stored txid")

    assert rs.get_or_make(1, make, committed=0) == ({"n": 41}, True)


def test_get_or_make_gives_make_the_normalised_previous_value_and_stores_the_normalised_result() -> None:
    _, rs = rotating()
    rs.put(1, (1, 2))
    seen = []

    def make(prev: Any) -> Any:
        seen.append(prev)
        return (prev[1] + 1, prev[1] + 10)

    assert rs.get_or_make(2, make, committed=0) == ([3, 12], False)
    assert seen == [[1, 2]]


def test_get_or_make_refuses_a_txid_whose_predecessor_is_missing() -> None:
    # Given entries for 1 and 2
    backend, rs = rotating()
    rs.put(1, "a")
    rs.put(2, "b")
    make = Maker()

    # When 4 is asked for while 3 is in flight and missing here
    with pytest.raises(MissingPredecessor, match="test metadata"):
        rs.get_or_make(4, make, committed=1)

    # Then make was not called and nothing was stored
    assert make.calls == []
    assert 4 not in rs
    assert backend.paths() == ["/transactional/tid/sub/meta/1", "/transactional/tid/sub/meta/2"]


def test_a_failing_make_stores_nothing() -> None:
    backend, rs = rotating()

    def make(prev: Any) -> Any:
        raise RuntimeError("spout not ready")

    with pytest.raises(RuntimeError):
        rs.get_or_make(1, make, committed=0)
    assert 1 not in rs
    assert backend.paths() == []


def test_cleanup_before_deletes_older_entries_from_the_state_too() -> None:
    # Given entries 1..4
    backend, rs = rotating()
    for txid in range(1, 5):
        rs.put(txid, txid * 10)

    # When everything before 3 is cleaned up
    rs.cleanup_before(3)

    # Then 1 and 2 are gone, in memory and in the backend; 3 and 4 stay
    assert 1 not in rs and 2 not in rs
    assert rs.get(3) == 30 and rs.get(4) == 40
    assert backend.paths() == ["/transactional/tid/sub/meta/3", "/transactional/tid/sub/meta/4"]
    # and 5 is still made from 4
    assert rs.get_or_make(5, lambda prev: prev + 1, committed=2) == (41, False)


def test_cleanup_before_everything_and_nothing() -> None:
    backend, rs = rotating()
    rs.put(1, "a")
    rs.cleanup_before(1)
    assert 1 in rs
    rs.cleanup_before(10)
    assert rs.latest() is None
    assert backend.paths() == []


def test_a_new_rotating_state_on_the_same_backend_reloads_what_was_stored() -> None:
    # Given values stored for 2 and 3 (1 cleaned up), and None stored for 4
    backend, rs = rotating()
    rs.put(1, {"first": (0, 9)})
    rs.put(2, {"first": (10, 19)})
    rs.put(3, {"first": (20, 29)})
    rs.put(4, None)
    rs.cleanup_before(2)

    # When the process restarts and opens the same subdir afresh
    _, again = rotating(backend)

    # Then it sees exactly what was stored
    assert 1 not in again
    assert again.get(2) == {"first": [10, 19]}
    assert again.get(3) == {"first": [20, 29]}
    assert 4 in again and again.get(4) is None
    assert again.latest() == 4
    assert again.get_or_make(3, Maker(), committed=1) == ({"first": [20, 29]}, True)
    assert again.get_or_make(5, lambda prev: "after none", committed=1) == ("after none", False)


def test_rotating_states_in_different_subdirs_are_separate() -> None:
    backend, a = rotating(subdir="a")
    _, b = rotating(backend, subdir="b")
    a.put(1, "x")
    assert 1 not in b
    assert 1 not in rotating(backend, subdir="b")[1]
    assert 1 in rotating(backend, subdir="a")[1]


@pytest.mark.parametrize("value", [object(), {"s": {1, 2}}, {(1, 2): "tuple key"}, math.nan, b"bytes"])
def test_an_unserializable_value_raises_and_stores_nothing(value: Any) -> None:
    backend, rs = rotating()

    with pytest.raises(SerializationError, match="test metadata for txid 1"):
        rs.put(1, value)

    assert 1 not in rs
    assert backend.paths() == []


def test_an_unserializable_made_value_raises_and_stores_nothing() -> None:
    backend, rs = rotating()
    rs.put(1, "ok")
    with pytest.raises(SerializationError):
        rs.get_or_make(2, lambda prev: object(), committed=1)
    assert 2 not in rs
    assert backend.paths() == ["/transactional/tid/sub/meta/1"]


# -- TransactionAttempt ---------------------------------------------------------------


def test_attempts_are_equal_and_hashed_by_their_fields() -> None:
    a = TransactionAttempt(3, 77)
    b = TransactionAttempt(3, 77)

    assert a == b
    assert hash(a) == hash(b)
    assert {a: "x"}[b] == "x"
    assert len({a, b}) == 1


def test_attempts_differ_by_attempt_id_and_by_txid() -> None:
    a = TransactionAttempt(3, 77)
    assert a != TransactionAttempt(3, 78)
    assert a != TransactionAttempt(4, 77)
    assert len({a, TransactionAttempt(3, 78), TransactionAttempt(4, 77)}) == 3


def test_attempts_differ_by_epoch() -> None:
    # The same txid and attempt id from another coordinator is another attempt
    assert TransactionAttempt(3, 77, epoch=2) != TransactionAttempt(3, 77, epoch=3)
    assert TransactionAttempt(3, 77).epoch == 0


def test_an_attempt_is_not_equal_to_a_plain_pair() -> None:
    a = TransactionAttempt(3, 77)
    assert a != (3, 77)
    assert a.__eq__((3, 77)) is NotImplemented


def test_an_attempt_pickles() -> None:
    a = TransactionAttempt(3, (1 << 63) - 1, epoch=9)
    assert pickle.loads(pickle.dumps(a)) == a
    assert pickle.loads(pickle.dumps(a)).epoch == 9


def test_pack_and_unpacker_round_trip_to_the_same_object_for_equal_payloads() -> None:
    # Given one unpacker (one decoded frame)
    unpack = unpacker()
    a = TransactionAttempt(5, (1 << 63) - 1, epoch=12)

    # When the same attempt is unpacked twice, from two equal payloads
    first = unpack(pack(a))
    second = unpack(pack(TransactionAttempt(5, (1 << 63) - 1, epoch=12)))

    # Then it is equal to the original and the very same object both times
    assert first == a
    assert first.txid == 5 and first.attempt_id == (1 << 63) - 1 and first.epoch == 12
    assert second is first
    # a different attempt is a different object
    assert unpack(pack(TransactionAttempt(5, 1))) is not first
    # another unpacker (another frame) makes its own object
    assert unpacker()(pack(a)) is not first


def test_pack_is_24_bytes_big_endian() -> None:
    assert pack(TransactionAttempt(1, 2, 3)) == b"".join(n.to_bytes(8, "big") for n in (1, 2, 3))


@pytest.mark.parametrize("size", [0, 16, 23, 25])
def test_a_wrong_length_payload_is_refused(size: int) -> None:
    with pytest.raises(ValueError, match="24 bytes"):
        unpacker()(b"\x00" * size)


# -- over the wire ---------------------------------------------------------------------


def test_a_data_batch_carrying_attempts_decodes_to_shared_attempt_objects() -> None:
    # Given a frame of two data messages whose tuples carry attempts of two txids
    fields = ("tx", "word")
    record = record_type(fields)
    a1, a2 = TransactionAttempt(1, 1001), TransactionAttempt(2, 2002)
    src, (b1, b2) = ATTEMPT_SPOUT, ATTEMPT_BOLTS
    frame = encode([
        ("data", b1, [Tuple(None, "spout", "default", src, record(a1, "x")),
                      Tuple(None, "spout", "default", src, record(a1, "y")),
                      Tuple(None, "spout", "default", src, record(a2, "z"))]),
        ("data", b2, [Tuple(None, "spout", "default", src, record(a1, "w"))]),
    ])

    # When a worker decodes it
    out = decode(ATTEMPT_PLAN, frame)

    # Then every tuple's first value is a TransactionAttempt equal to what was sent,
    # and the tuples of one attempt share one object across the whole frame
    (_, task7, tuples7), (_, task8, tuples8) = out
    assert (task7, task8) == (b1, b2)
    txs = [t.values[0] for t in tuples7 + tuples8]
    assert all(type(tx) is TransactionAttempt for tx in txs)
    assert txs == [a1, a1, a2, a1]
    assert txs[0] is txs[1] is txs[3]
    assert txs[2] is not txs[0]
    assert [t.values.word for t in tuples7 + tuples8] == ["x", "y", "z", "w"]
    assert tuples7[0]["tx"] is txs[0]
    assert tuples7[0].component == "spout" and tuples7[0].task == src

    # and another frame gives equal but new objects
    (_, _, again), _ = decode(ATTEMPT_PLAN, frame)
    assert again[0].values[0] == a1
    assert again[0].values[0] is not txs[0]
