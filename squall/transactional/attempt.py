"""TransactionAttempt: which transaction a tuple belongs to, and which try of it.

Every tuple of a transactional topology carries one as its first value.  It
crosses workers as a msgpack extension type, registered with the worker's wire
types below when this module is imported (see squall.worker.wire.value_types),
and a decoded frame hands every tuple of a batch the *same* object, so the
batch bolts' per-tuple lookup is an identity test, not a hash.
"""

from __future__ import annotations

from typing import Any

from squall.worker.wire.value_types import register

# msgpack extension type code on the wire (0-127 are the application's).
EXT_CODE = 17


class TransactionAttempt:
    """``txid``: 1, 2, 3, ... for the life of a transactional id; ``attempt_id``:
    unique for each emission of that transaction's batch; ``epoch``: the
    coordinator that emitted it (each coordinator claims a new, higher one in
    the transactional state when it starts, see squall.cluster.fence),
    so that emitters and committers can refuse a superseded coordinator's
    batches.  Equal and hashed by all three."""

    __slots__ = ("_hash", "attempt_id", "epoch", "txid")

    def __init__(self, txid: int, attempt_id: int, epoch: int = 0) -> None:
        self.txid = txid
        self.attempt_id = attempt_id
        self.epoch = epoch
        self._hash = hash((txid, attempt_id))

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        if type(other) is not TransactionAttempt:
            return NotImplemented
        return (self.txid == other.txid and self.attempt_id == other.attempt_id  # type: ignore[attr-defined]
                and self.epoch == other.epoch)  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"TransactionAttempt(txid={self.txid}, attempt_id={self.attempt_id}, epoch={self.epoch})"

    def __reduce__(self) -> tuple[Any, tuple[int, int, int]]:
        return (TransactionAttempt, (self.txid, self.attempt_id, self.epoch))


SIZE = 24  # bytes of the extension payload


def pack(attempt: TransactionAttempt) -> bytes:
    """The extension payload: txid, attempt id and epoch, 8 bytes each, big-endian."""
    return (attempt.txid.to_bytes(8, "big") + attempt.attempt_id.to_bytes(8, "big")
            + attempt.epoch.to_bytes(8, "big"))


def unpacker() -> Any:
    """An ext_hook for one decode: equal payloads give the same object."""
    seen: dict[bytes, TransactionAttempt] = {}

    def unpack(data: bytes) -> TransactionAttempt:
        attempt = seen.get(data)
        if attempt is None:
            if len(data) != SIZE:
                msg = f"a TransactionAttempt on the wire is {SIZE} bytes, got {len(data)}"
                raise ValueError(msg)
            attempt = seen[data] = TransactionAttempt(int.from_bytes(data[:8], "big"),
                                                      int.from_bytes(data[8:16], "big"),
                                                      int.from_bytes(data[16:], "big"))
        return attempt

    return unpack


register(EXT_CODE, TransactionAttempt, pack, unpacker)
