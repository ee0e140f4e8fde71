"""KeyValueState: a stateful bolt task's state, checkpointed into a Store.

The bolt reads and writes a dict in memory; the checkpoint phases move it
through two records of the task in the topology's
:class:`~squall.state.store.Store` (the same stores transactional committers
use), each one JSON value:

- ``<component>/<task>/prepared``: ``{"txid": k, "data": {...}}``, written at
  ``prepare k``;
- ``<component>/<task>/committed``: the same, made from the prepared record at
  ``commit k`` in one atomic store update.

A reset reloads the committed record into the same object, so a bolt that
kept the state object from ``init_state`` sees the rolled-back values.  Each
checkpoint writes the whole state of the task: fine for the counts and
aggregates stateful bolts usually keep, costly for very large states.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from squall.errors import SerializationError
from squall.state.store import Store, encode


class KeyValueState:
    """``get(k, default)``, ``put(k, v)``, ``delete(k)``, ``keys()``: str keys, JSON values."""

    def __init__(self, store: Store, prefix: str) -> None:
        self._store = store
        self._prefix = prefix
        self._prepared_key = f"{prefix}/prepared"
        self._committed_key = f"{prefix}/committed"
        self._data: dict[str, Any] = {}
        self.committed_txid = 0

    def __repr__(self) -> str:
        return f"KeyValueState({self._prefix!r}, {len(self._data)} keys)"

    # -- what the bolt uses --------------------------------------------------

    def get(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    def put(self, key: str, value: Any) -> None:
        if type(key) is not str:
            msg = f"state keys must be str, not {type(key).__name__}: {key!r}"
            raise TypeError(msg)
        self._data[key] = value

    def delete(self, key: str) -> None:
        self._data.pop(key, None)

    def keys(self) -> Iterator[str]:
        return iter(list(self._data))

    def __iter__(self) -> Iterator[str]:
        return self.keys()

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    # -- what the checkpoint phases do -----------------------------------------

    def load(self) -> int:
        """Replace the contents with the committed record's; returns its txid (0: none)."""
        committed = self._store.get_many([self._committed_key])[0]
        self._data.clear()
        if committed is not None:
            self._data.update(committed["data"])
            self.committed_txid = committed["txid"]
        else:
            self.committed_txid = 0
        return self.committed_txid

    def prepare(self, txid: int) -> None:
        record = {"txid": txid, "data": self._data}
        try:
            self._store.update([self._prepared_key], lambda _cur: {self._prepared_key: record})
        except SerializationError as e:
            raise self._which(e) from e

    def _which(self, error: SerializationError) -> SerializationError:
        for key, value in self._data.items():
            try:
                encode(key, value)
            except SerializationError as e:
                return e
        return error

    def commit(self, txid: int) -> None:
        """Make prepared ``txid`` the committed state (again, after a restart: idempotent)."""
        prep, com = self._prepared_key, self._committed_key

        def move(current: dict[str, Any]) -> dict[str, Any]:
            prepared, committed = current[prep], current[com]
            if prepared is not None and prepared["txid"] == txid:
                return {com: prepared, prep: None}
            if committed is not None and committed["txid"] >= txid:
                return {}  # committed already (a commit retried after a failure)
            have = None if prepared is None else prepared["txid"]
            msg = f"{self._prefix}: commit {txid}, but the prepared state is of txid {have}"
            raise ValueError(msg)

        self._store.update([prep, com], move)
        self.committed_txid = txid

