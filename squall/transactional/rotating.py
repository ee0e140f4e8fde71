"""Per-transaction values kept until committed: Storm's RotatingTransactionalState.

A sorted map txid -> JSON value mirrored at ``<subdir>/<txid>`` in a
:class:`~squall.transactional.state.TransactionalState`, reloaded on start.
A new txid's value is made from the previous txid's, and only from it:
where Storm would build txid t on whatever entry precedes it (so a batch
whose predecessor never reached this task overlaps it), Squall refuses and
the batch fails, to be replayed once t - 1 is here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from squall.transactional.state import TransactionalState, decode_value, encode_value


class MissingPredecessor(Exception):  # noqa: N818 - a signal, caught and turned into a failed batch
    """Txid t was asked for before t - 1 existed here."""


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

    def put(self, txid: int, value: Any) -> Any:
        """Store ``value`` for ``txid`` (written through); the value as JSON gives it back."""
        normalized = decode_value(encode_value(value, f"{self.what} for txid {txid}"))
        self.state.set_data(f"{self.subdir}/{txid}", normalized)
        self.entries[txid] = normalized
        return normalized

    def get_or_make(self, txid: int, make: Callable[[Any], Any], committed: int) -> tuple[Any, bool]:
        """(value, True) when stored; else (``make(previous value)`` stored, False).

        The previous value is txid - 1's.  When txid - 1 is the last committed
        transaction (``committed``; 0 before the first) and has no entry here,
        it is None: nothing came before (the first transaction, a partition
        that is new).  When txid - 1 is still in flight and has no entry here,
        its batch never reached this task (lost, or the task restarted):
        MissingPredecessor, and the caller fails txid's batch until t - 1's
        replay has made the entry.
        """
        if txid in self.entries:
            return self.entries[txid], True
        if txid - 1 in self.entries:
            prev = self.entries[txid - 1]
        elif txid - 1 <= committed:
            prev = None
        else:
            msg = (f"{self.what}: txid {txid - 1} is in flight but unknown here, "
                   f"so txid {txid} cannot follow it")
            raise MissingPredecessor(msg)
        return self.put(txid, make(prev)), False

    def cleanup_before(self, txid: int) -> None:
        """Forget every txid below ``txid`` (committed: never replayed again)."""
        for old in sorted(t for t in self.entries if t < txid):
            self.state.delete(f"{self.subdir}/{old}")
            del self.entries[old]
