"""Rows for another worker packed as they are emitted (codec.RemoteBatch).

What the peer receives must not depend on where the rows were packed: the
frame holds the same rows, in the order they were emitted, as msgpack would
write for the Tuples themselves; a row msgpack refuses keeps its Tuple (and so
does every row after it, for the order), and fails when the frame is encoded
with the error that names its emitter.

Run against the build and under SQUALL_PURE_PYTHON=1 alike (tests/test_compiled.py).
"""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from squall.errors import SerializationError
from squall.topology.tuple import Tuple, record_type
from squall.transactional.attempt import TransactionAttempt
from squall.worker.wire.codec import PackedRows, RemoteBatch, encode
from squall.worker.wire.frames import WireValidator
from squall.worker.wire.value_types import pack_ext
from tests.worker.test_codec import oracle, rows
from tests.worker.wire_topology import PLAN
from tests.worker.wire_values import RECORD, SETTINGS, tuples

# Now and then a row of an extension type or a bytearray (packed like any other), or one
# msgpack refuses (a lone surrogate, an object of no registered type), among the others.
odd_values = st.sampled_from([TransactionAttempt(4, 17), bytearray(b"ab"), "lone \udc80", object()])
odd_tuples = st.builds(lambda tid, v: Tuple(tid, "split", "default", 7, RECORD._make([1, v, "z"]), {5: tid}),
                       st.integers(0, (1 << 64) - 1), odd_values)
batches = st.lists(st.one_of(tuples, tuples, tuples, odd_tuples), max_size=30)


def unpack(frame: bytes) -> Any:
    return msgpack.unpackb(frame, raw=False, strict_map_key=False, ext_hook=lambda c, d: (c, d))


def packs(t: Tuple) -> bool:
    """Whether msgpack writes this tuple's row."""
    try:
        msgpack.packb(rows([t]), use_bin_type=True, default=pack_ext)
    except Exception:  # noqa: BLE001 - any refusal
        return False
    return True


@SETTINGS
@given(batches)
def test_the_peer_gets_the_rows_msgpack_would_write_for_the_tuples(batch: list[Tuple]) -> None:
    # Given a turn's tuples for task 4 of another worker, appended as they are emitted
    remote = RemoteBatch()
    for t in batch:
        remote.append(t)
    assert len(remote) == len(batch)
    # When the executor flushes them
    payloads = remote.take()
    assert len(remote) == 0
    # Then the rows up to the first one msgpack refuses were packed; that one and every one
    # after it kept their Tuples, so the order holds
    first_odd = next((i for i, t in enumerate(batch) if not packs(t)), len(batch))
    packed = [p for p in payloads if type(p) is PackedRows]
    kept = [p for p in payloads if type(p) is list]
    assert sum(p.count for p in packed) == first_odd
    assert [t for p in kept for t in p] == batch[first_odd:]
    assert [type(p) for p in payloads] == [PackedRows] * bool(packed) + [list] * bool(kept)
    # And the send thread's frame is msgpack's for the same Tuples, split the same way
    sent = [("data", 4, p) for p in payloads]
    if first_odd == len(batch):
        frame = encode(sent)
        assert frame == oracle([("data", 4, batch)] if packed else [])
        return
    # Or, where a row cannot be packed, it fails naming the emitter
    odd = batch[first_odd]
    with pytest.raises(SerializationError) as got:
        encode(sent)
    assert str(got.value).startswith(
        f"component {odd.component!r} emitted values on stream {odd.stream!r} that msgpack cannot pack: ")
    assert (got.value.component, got.value.task) == (odd.component, odd.task)


def test_a_frame_of_packed_rows_and_other_messages_decodes_at_the_peer() -> None:
    # Given words from the split (task 3) packed for the count (task 2) of another worker
    record = record_type(("word",))
    word = [Tuple(1000 + i, "words", "default", 3, record._make([w]), {(1 << 64) - 1 - i: 1000 + i})
            for i, w in enumerate(["the", "cow", "é" * 40])]
    remote = RemoteBatch()
    for t in word:
        remote.append(t)
    (packed,) = remote.take()
    # When they share a frame with an ack, and with a message of an extension type
    attempt = [Tuple(9, "words", "default", 3, record._make([TransactionAttempt(1, 2)]), None)]
    for other in (("ack", 1, [[(1 << 63) + 5, 77]]), ("data", 2, attempt)):
        frame = encode([("data", 2, packed), other])
        assert frame == oracle([("data", 2, word), other])
        # Then the count's worker decodes every row of it, checked as any other frame
        got = WireValidator(PLAN, [1, 2]).decode(frame)
        kind, task, tups = got[0]
        assert (kind, task) == ("data", 2)
        assert [(t.id, t.task, t.component, t.stream, tuple(t.values), t.anchors) for t in tups] == [
            (t.id, t.task, t.component, t.stream, tuple(t.values), t.anchors) for t in word]


def test_a_batch_is_reused_turn_after_turn_and_lets_a_big_buffer_go() -> None:
    remote = RemoteBatch()
    big = Tuple(1, "split", "default", 7, RECORD._make(["x" * 100_000, 0, 0]), None)
    small = Tuple(2, "split", "default", 7, RECORD._make(["y", 1, 2]), {3: 2})
    # Given a turn of rows that grew the buffer past what is kept (20 rows of 100 KB)
    for _ in range(20):
        remote.append(big)
    (first,) = remote.take()
    assert first.count == 20 and len(first.data) > 2_000_000
    # When the next turns emit one small row each
    for _ in range(3):
        remote.append(small)
        (payload,) = remote.take()
        # Then each take has only that turn's row
        assert payload.count == 1
        assert unpack(b"\x91" + payload.data) == [[2, 7, "default", ["y", 1, 2], {3: 2}]]
    # And a turn with nothing emitted has nothing to send
    assert remote.take() == []
    assert not remote


def test_a_refused_row_keeps_its_tuple_and_the_next_turn_packs_again() -> None:
    remote = RemoteBatch()
    ok = Tuple(2, "split", "default", 7, RECORD._make(["y", 1, 2]), {3: 2})
    odd = Tuple(3, "split", "default", 7, RECORD._make(["lone \udc80", 1, 2]), {3: 3})
    for t in (ok, odd, ok):
        remote.append(t)
    packed, kept = remote.take()
    # nothing of the refused row was left among the packed ones
    assert packed.count == 1 and unpack(b"\x91" + packed.data) == [[2, 7, "default", ["y", 1, 2], {3: 2}]]
    assert kept == [odd, ok]
    remote.append(ok)
    (again,) = remote.take()
    assert type(again) is PackedRows and again.data == packed.data
