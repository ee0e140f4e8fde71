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

    def get_or_make(self, txid: int, make: Callable[[Any], Any]) -> tuple[Any, bool]:
        """(value, True) when stored; else (``make(previous value)`` stored, False).

        The previous value is txid - 1's; with no entries at all it is None
        (nothing before: the first transaction, or one after everything was
        cleaned).  Raises MissingPredecessor when entries exist but not t - 1's.
        """
        if txid in self.entries:
            return self.entries[txid], True
        prev: Any = None
        if self.entries:
            if txid - 1 not in self.entries:
                msg = f"{self.what}: no state for txid {txid - 1}, so txid {txid} cannot start from it"
                raise MissingPredecessor(msg)
            prev = self.entries[txid - 1]
        return self.put(txid, make(prev)), False

    def cleanup_before(self, txid: int) -> None:
        """Forget every txid below ``txid`` (committed: never replayed again)."""
        for old in sorted(t for t in self.entries if t < txid):
            self.state.delete(f"{self.subdir}/{old}")
            del self.entries[old]
