"""TransactionAttempt: which transaction a tuple belongs to, and which try of it.

Every tuple of a transactional topology carries one as its first value.  It
crosses workers as a msgpack extension type (see squall.worker.serialization),
and a decoded frame hands every tuple of a batch the *same* object, so the
batch bolts' per-tuple lookup is an identity test, not a hash.
"""

from __future__ import annotations

from typing import Any

# msgpack extension type code on the wire (0-127 are the application's).
EXT_CODE = 17


class TransactionAttempt:
    """``txid``: 1, 2, 3, ... for the life of a transactional id; ``attempt_id``:
    unique for each emission of that transaction's batch.  Equal and hashed by both."""

    __slots__ = ("_hash", "attempt_id", "txid")

    def __init__(self, txid: int, attempt_id: int) -> None:
        self.txid = txid
        self.attempt_id = attempt_id
        self._hash = hash((txid, attempt_id))

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        if type(other) is not TransactionAttempt:
            return NotImplemented
        return self.txid == other.txid and self.attempt_id == other.attempt_id  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"TransactionAttempt(txid={self.txid}, attempt_id={self.attempt_id})"

    def __reduce__(self) -> tuple[Any, tuple[int, int]]:
        return (TransactionAttempt, (self.txid, self.attempt_id))


def pack(attempt: TransactionAttempt) -> bytes:
    """The extension payload: txid and attempt id, 8 bytes each, big-endian."""
    return attempt.txid.to_bytes(8, "big") + attempt.attempt_id.to_bytes(8, "big")


def unpacker() -> Any:
    """An ext_hook for one decode: equal payloads give the same object."""
    seen: dict[bytes, TransactionAttempt] = {}

    def unpack(data: bytes) -> TransactionAttempt:
        attempt = seen.get(data)
        if attempt is None:
            if len(data) != 16:
                msg = f"a TransactionAttempt on the wire is 16 bytes, got {len(data)}"
                raise ValueError(msg)
            attempt = seen[data] = TransactionAttempt(int.from_bytes(data[:8], "big"),
                                                      int.from_bytes(data[8:], "big"))
        return attempt

    return unpack
