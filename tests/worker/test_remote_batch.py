"""Rows for another worker packed as they are emitted (fastwire.RemoteBatch).

What the peer receives must not depend on where the rows were packed: the
frame holds the same rows, in the order they were emitted, as if the send
thread had packed the Tuples itself; a row the packer does not handle keeps
its Tuple (and so does every row after it, for the order); and a value nobody
can pack still fails with the error that names its emitter.
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
from squall.worker.wire import codec as serialization
from squall.worker.wire.frames import WireValidator
from tests.worker.test_fastwire import RECORD, SETTINGS, needs_build, tuples
from tests.worker.wire_topology import PLAN

if serialization.PackedRows is not None:
    from squall.worker.wire.fastwire import PackedRows, RemoteBatch

# Now and then a row only the generic path packs (an extension type, a bytearray),
# or one nobody packs (a lone surrogate), among rows the packer handles.
odd_values = st.sampled_from([TransactionAttempt(4, 17), bytearray(b"ab"), "lone \udc80"])
odd_tuples = st.builds(lambda tid, v: Tuple(tid, "split", "default", 7, RECORD._make([1, v, "z"]), {5: tid}),
                       st.integers(0, (1 << 64) - 1), odd_values)
batches = st.lists(st.one_of(tuples, tuples, tuples, odd_tuples), max_size=30)


def unpack(frame: bytes) -> Any:
    return msgpack.unpackb(frame, raw=False, strict_map_key=False, ext_hook=lambda c, d: (c, d))


def packs(t: Tuple) -> bool:
    """Whether the packer writes this row itself."""
    return serialization.fast_encode([("data", 1, [t])]) is not None


@needs_build
@SETTINGS
@given(batches)
def test_the_peer_gets_the_rows_it_would_get_from_the_send_thread(batch: list[Tuple]) -> None:
    # Given a turn's tuples for task 4 of another worker, appended as they are emitted
    remote = RemoteBatch()
    for t in batch:
        remote.append(t)
    assert len(remote) == len(batch)
    # When the executor flushes them and the send thread frames them
    payloads = remote.take()
    assert len(remote) == 0
    sent = [("data", 4, p) for p in payloads]
    try:
        expected = serialization.generic_encode([("data", 4, batch)])
    except SerializationError as e:
        # Then a value nobody can pack fails as it did, naming the emitter
        with pytest.raises(SerializationError) as got:
            serialization.encode(sent)
        assert str(got.value) == str(e)
        return
    frame = serialization.encode(sent)
    # Then the peer reads the same rows, in the same order, as from the Tuples themselves
    assert [row for _, _, rows in unpack(frame) for row in rows] == unpack(expected)[0][2]
    # And both encoders write that frame byte for byte alike
    assert frame == serialization.generic_encode(sent)
    # And the rows up to the first one the packer does not handle were packed; that
    # one and every one after it kept their Tuples, so the order holds
    first_odd = next((i for i, t in enumerate(batch) if not packs(t)), len(batch))
    packed = [p for p in payloads if type(p) is PackedRows]
    kept = [p for p in payloads if type(p) is list]
    assert sum(p.count for p in packed) == first_odd
    assert [t for p in kept for t in p] == batch[first_odd:]


@needs_build
def test_a_frame_of_packed_rows_and_other_messages_decodes_at_the_peer() -> None:
    # Given words from the split (task 3) packed for the count (task 2) of another worker
    record = record_type(("word",))
    word = [Tuple(1000 + i, "words", "default", 3, record._make([w]), {(1 << 64) - 1 - i: 1000 + i})
            for i, w in enumerate(["the", "cow", "é" * 40])]
    remote = RemoteBatch()
    for t in word:
        remote.append(t)
    (packed,) = remote.take()
    # When they share a frame with an ack, and with a message only the generic path packs
    attempt = [Tuple(9, "words", "default", 3, record._make([TransactionAttempt(1, 2)]), None)]
    for messages in ([("data", 2, packed), ("ack", 1, [[(1 << 63) + 5, 77]])],
                     [("data", 2, packed), ("data", 2, attempt)]):
        frame = serialization.encode(messages)
        assert frame == serialization.generic_encode(messages)
        # Then the count's worker decodes every row of it, checked as any other frame
        got = WireValidator(PLAN, [1, 2]).decode(frame)
        kind, task, tups = got[0]
        assert (kind, task) == ("data", 2)
        assert [(t.id, t.task, t.component, t.stream, tuple(t.values), t.anchors) for t in tups] == [
            (t.id, t.task, t.component, t.stream, tuple(t.values), t.anchors) for t in word]


@needs_build
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
