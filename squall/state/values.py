"""Exactly-once updates of external state by a transactional topology's committer.

Storm's transactional topologies commit batches in txid order, but a commit
may be replayed (the committer crashed after writing, before the coordinator
learned of it).  Storing the txid that last wrote each value next to it makes
the write idempotent.  Two kinds, as in Storm's transactional-topologies
document and Trident:

* **transactional** -- ``{"value": V, "txid": T}``.  For spouts that replay
  the *same* batch under a txid: a commit whose txid is already stored is a
  replay and is skipped.
* **opaque** -- ``{"curr": V, "prev": P, "txid": T}``, and ``"epoch": E`` when
  the commit named its attempt.  For spouts that may replay a *different*
  batch under a txid: a replay recomputes ``curr`` from ``prev`` (the value
  before that txid), so only its latest batch counts.  Which batch is the
  latest is the coordinator's to say: a commit of the same txid from an
  older coordinator epoch (one that passed its fence, then stalled while a
  newer coordinator replayed the txid with another batch) is skipped, so the
  state keeps the batch whose metadata the newer coordinator stored.

The rules are the pure functions :func:`apply_transactional` and
:func:`apply_opaque`; the maps and values below run them for a set of keys in
one atomic :meth:`Store.update <squall.state.store.Store.update>`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from squall.state.store import Store

Fn = Callable[[Any], Any]


def attempt_epoch(txid: Any) -> int | None:
    """The coordinator epoch of a TransactionAttempt given as the txid (None for a plain int)."""
    epoch = getattr(txid, "epoch", None)
    return epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else None


def check_txid(txid: Any) -> int:
    """``txid`` as an int >= 1; a TransactionAttempt (anything with ``.txid``) gives its txid."""
    if not isinstance(txid, int) and hasattr(txid, "txid"):
        txid = txid.txid
    # bool is an int subclass: True would pass as txid 1 and hide a caller's bug.
    if isinstance(txid, bool) or not isinstance(txid, int) or txid < 1:
        msg = f"a txid must be an int >= 1 (or a TransactionAttempt), not {txid!r}"
        raise ValueError(msg)
    return txid


def apply_transactional(stored: dict[str, Any] | None, txid: int, fn: Fn) -> dict[str, Any] | None:
    """The new ``{"value", "txid"}`` after committing ``txid``, or None to skip.

    Skipped when the stored txid equals ``txid`` (a replay of a batch already
    applied) and also when it is *higher*: txids only grow, so a lower one is a
    stale commit -- from a zombie coordinator or committer that lost its lease
    and has not noticed yet.  Applying it would count a batch the current
    coordinator has already replayed under a later txid, or overwrite newer state.
    """
    if stored is not None and stored["txid"] >= txid:
        return None
    return {"value": fn(None if stored is None else stored["value"]), "txid": txid}


def apply_opaque(stored: dict[str, Any] | None, txid: int, fn: Fn,
                 epoch: int | None = None) -> dict[str, Any] | None:
    """The new ``{"curr", "prev", "txid"[, "epoch"]}`` after committing ``txid``
    (from coordinator ``epoch``, if known), or None to skip.

    * nothing stored, or a higher txid: ``prev = curr``, ``curr = fn(curr)``;
    * the same txid: a replay, possibly of a different batch: ``curr = fn(prev)``,
      which undoes the earlier attempt's contribution -- unless the stored one
      came from a newer epoch than this commit's: then this commit is stale;
    * a lower txid: stale (see :func:`apply_transactional`), skipped.
    """
    if stored is None:
        new = {"curr": fn(None), "prev": None, "txid": txid}
    elif txid < stored["txid"]:
        return None
    elif txid == stored["txid"]:
        if epoch is not None and stored.get("epoch") is not None and epoch < stored["epoch"]:
            return None
        new = {"curr": fn(stored["prev"]), "prev": stored["prev"], "txid": txid}
    else:
        new = {"curr": fn(stored["curr"]), "prev": stored["curr"], "txid": txid}
    if epoch is not None:
        new["epoch"] = epoch
    return new


def _adder(delta: int | float) -> Fn:
    # bool is an int: refuse it as for txids; a str delta would fail later, inside the store's update.
    if isinstance(delta, bool) or not isinstance(delta, (int, float)):
        msg = f"an increment must be an int or float, not {delta!r}"
        raise TypeError(msg)
    return lambda old: (old or 0) + delta


class _StateMap:
    """Keys of a store holding one kind of txid-stamped value; the subclasses pick the kind."""

    _kind: str
    _field: str  # where the current value lives in the stored form
    _fields: frozenset[str]

    def __init__(self, store: Store) -> None:
        self.store = store

    _optional: frozenset[str] = frozenset()  # fields a stored value may also have

    @staticmethod
    def _apply(stored: dict[str, Any] | None, txid: int, fn: Fn, epoch: int | None) -> dict[str, Any] | None:
        raise NotImplementedError

    def _checked(self, key: str, stored: Any) -> dict[str, Any] | None:
        """``stored`` if it has this kind's form; a clear error if the key holds something else."""
        if stored is None or (isinstance(stored, dict) and isinstance(stored.get("txid"), int)
                              and self._fields <= set(stored) <= self._fields | self._optional):
            return stored
        msg = (f"state key {key!r} holds {stored!r}, not {self._kind} state "
               f"(a dict of {sorted(self._fields)}): is another writer using the same key?")
        raise ValueError(msg)

    def update(self, txid: Any, updates: Mapping[str, Fn]) -> dict[str, Any]:
        """Commit ``txid``: apply each key's fn to its current value (None when absent).
        Give the TransactionAttempt itself rather than its txid: an opaque value
        then also knows which coordinator epoch wrote it.

        Atomic over all keys (one store update).  Returns every key's current
        value afterwards, whether its fn was applied or skipped.
        """
        epoch = attempt_epoch(txid)
        txid = check_txid(txid)
        if not updates:
            return {}
        keys = list(updates)
        result: dict[str, Any] = {}

        def commit(current: dict[str, Any]) -> dict[str, Any]:
            writes = {}
            for key in keys:
                stored = self._checked(key, current[key])
                new = self._apply(stored, txid, updates[key], epoch)
                if new is not None:
                    writes[key] = new
                latest = new if new is not None else stored
                result[key] = None if latest is None else latest[self._field]
            return writes

        self.store.update(keys, commit)
        return result

    def increment(self, txid: Any, deltas: Mapping[str, int | float]) -> dict[str, Any]:
        """Commit ``txid`` adding each delta to its key (absent counts as 0); returns the totals."""
        return self.update(txid, {key: _adder(delta) for key, delta in deltas.items()})

    def _stored(self, keys: list[str]) -> list[dict[str, Any] | None]:
        # strict: a store returning fewer values than keys is a broken store, not an absent key.
        values = self.store.get_many(keys)
        return [self._checked(key, stored) for key, stored in zip(keys, values, strict=True)]

    def get(self, key: str) -> Any | None:
        """The current value of ``key``, None when absent."""
        return self.get_many([key])[0]

    def get_many(self, keys: list[str]) -> list[Any | None]:
        """The current values of ``keys``, in order, None for absent ones."""
        keys = list(keys)
        return [None if stored is None else stored[self._field] for stored in self._stored(keys)]

    def txid_of(self, key: str) -> int | None:
        """The txid that last wrote ``key``, None when absent."""
        stored = self._stored([key])[0]
        return None if stored is None else stored["txid"]


class TransactionalMap(_StateMap):
    """Keys holding ``{"value", "txid"}``: for spouts that replay the same batch per txid."""

    _kind = "transactional"
    _field = "value"
    _fields = frozenset({"value", "txid"})

    @staticmethod
    def _apply(stored: dict[str, Any] | None, txid: int, fn: Fn, epoch: int | None) -> dict[str, Any] | None:
        return apply_transactional(stored, txid, fn)  # a replay is the same batch: no epoch needed


class OpaqueMap(_StateMap):
    """Keys holding ``{"curr", "prev", "txid"}``: for spouts whose replayed batch may differ."""

    _kind = "opaque"
    _field = "curr"
    _fields = frozenset({"curr", "prev", "txid"})
    _optional = frozenset({"epoch"})
    _apply = staticmethod(apply_opaque)


class _StateValue:
    """One key of a state map: a global count, for instance."""

    _map_type: type[_StateMap]

    def __init__(self, store: Store, key: str = "value") -> None:
        self.key = key
        self._map = self._map_type(store)

    @property
    def store(self) -> Store:
        return self._map.store

    def update(self, txid: Any, fn: Fn) -> Any:
        """Commit ``txid`` applying ``fn`` to the current value; returns the value afterwards."""
        return self._map.update(txid, {self.key: fn})[self.key]

    def increment(self, txid: Any, delta: int | float) -> Any:
        return self._map.increment(txid, {self.key: delta})[self.key]

    def get(self) -> Any:
        return self._map.get(self.key)

    @property
    def txid(self) -> int | None:
        """The txid that last wrote the value, None when never written."""
        return self._map.txid_of(self.key)


class TransactionalValue(_StateValue):
    """A single transactional value (see :class:`TransactionalMap`)."""

    _map_type = TransactionalMap


class OpaqueValue(_StateValue):
    """A single opaque value (see :class:`OpaqueMap`)."""

    _map_type = OpaqueMap
