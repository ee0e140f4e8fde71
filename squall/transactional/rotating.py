"""Per-transaction values kept until committed: Storm's RotatingTransactionalState.

A sorted map txid -> JSON value mirrored at ``<subdir>/<txid>`` in a
:class:`~squall.cluster.fenced_state.TransactionalState`, reloaded on start.
A new txid's value is made from the previous txid's, and only from it:
where Storm would build txid t on whatever entry precedes it (so a batch
whose predecessor never reached this task overlaps it), Squall refuses and
the batch fails, to be replayed once t - 1 is here.

Each value is **written once**: the first value stored for a txid is its
value for good.  Two instances of one task may run at once for a moment (a
worker whose slot moved, beside its replacement); if both made txid t's
metadata, from a partition read at different times, two batches with
different content would share one txid, and a committer skipping "a txid
already stored" would drop one and count the next one's overlap twice.
So the loser of the race learns it (:class:`MetadataConflict`) and fails
its batch, whose replay is the winner's.  A value missing in memory is
looked up in the store before it is made, for the same reason.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from squall.cluster.fence import Fence
from squall.cluster.fenced_state import TransactionalState, decode_value, encode_value

_ABSENT = object()


class MissingPredecessor(Exception):  # noqa: N818 - a signal, caught and turned into a failed batch
    """Txid t was asked for before t - 1 existed here."""


class MetadataConflict(Exception):  # noqa: N818 - a signal, caught and turned into a failed batch
    """Another instance stored a different value for this txid first."""


class RotatingState:
    def __init__(self, state: TransactionalState, subdir: str, what: str) -> None:
        self.state = state
        self.subdir = subdir
        self.what = what  # names the owner in errors: "coordinator metadata", "partition 3"
        self.entries: dict[int, Any] = {}
        for name in state.list(subdir):
            if name.isdigit():
                self.entries[int(name)] = state.get_data(f"{subdir}/{name}")

    def __contains__(self, txid: int) -> bool:
        return txid in self.entries

    def get(self, txid: int) -> Any:
        return self.entries[txid]

    def latest(self) -> int | None:
        return max(self.entries) if self.entries else None

    def _lookup(self, txid: int) -> Any:
        """Txid's value, from memory or else the store; _ABSENT when neither has it."""
        if txid in self.entries:
            return self.entries[txid]
        value = self.state.get_data(f"{self.subdir}/{txid}", _ABSENT)
        if value is not _ABSENT:
            self.entries[txid] = value
        return value

    def put(self, txid: int, value: Any, fence: Fence | None = None) -> Any:
        """Store ``value`` for ``txid`` unless a value is stored already (write-once);
        the value stored, as JSON gives it back.  MetadataConflict when it is another."""
        normalized = decode_value(encode_value(value, f"{self.what} for txid {txid}"))
        stored = self.state.create(f"{self.subdir}/{txid}", normalized, fence)
        self.entries[txid] = stored
        if stored != normalized:
            msg = f"{self.what}: txid {txid} was made by another instance first; its batch is replayed"
            raise MetadataConflict(msg)
        return stored

    def get_or_make(self, txid: int, make: Callable[[Any], Any], committed: int,
                    fence: Fence | None = None) -> tuple[Any, bool]:
        """(value, True) when stored; else (``make(previous value)`` stored, False).

        The previous value is txid - 1's.  When txid - 1 is the last committed
        transaction (``committed``; 0 before the first) and has no entry here,
        it is None: nothing came before (the first transaction, a partition
        that is new).  When txid - 1 is still in flight and has no entry here,
        its batch never reached this task (lost, or the task restarted):
        MissingPredecessor, and the caller fails txid's batch until t - 1's
        replay has made the entry.
        """
        stored = self._lookup(txid)
        if stored is not _ABSENT:
            return stored, True
        prev = self._lookup(txid - 1)
        if prev is _ABSENT:
            if txid - 1 > committed:
                msg = (f"{self.what}: txid {txid - 1} is in flight but unknown here, "
                       f"so txid {txid} cannot follow it")
                raise MissingPredecessor(msg)
            prev = None
        return self.put(txid, make(prev), fence), False

    def cleanup_before(self, txid: int, fence: Fence | None = None) -> None:
        """Forget every txid below ``txid`` (committed: never replayed again)."""
        for old in sorted(t for t in self.entries if t < txid):
            self.state.delete(f"{self.subdir}/{old}", fence)
            del self.entries[old]
