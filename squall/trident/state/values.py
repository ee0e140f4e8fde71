"""The values a transactional and an opaque map keep in their backing map, txid stamped.

Plain value types, as Storm's ``TransactionalValue`` and ``OpaqueValue``: the
map states make them and hand them to an :class:`~squall.trident.state.map.IBackingMap`,
which stores them as it likes.  Stores that keep JSON use ``to_json()`` /
``from_json()``, whose forms are those of :mod:`squall.state.values`
(``{"value", "txid"}`` and ``{"curr", "prev", "txid"}``), so a key written by
a Trident map and one written by a transactional topology's committer look
alike in ``redis-cli`` or ``sqlite3``.

Which value a batch reads, and what it writes, depends only on how its txid
compares with the stored one: :func:`order` says.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from squall.trident.state.base import StaleBatchError

NEWER, SAME, STALE = "newer", "same", "stale"
_OPAQUE_FIELDS = frozenset({"curr", "prev", "txid"})


def order(stored_txid: int | None, stored_epoch: int | None, txid: int | None, epoch: int | None) -> str:
    """How batch ``txid`` (from coordinator ``epoch``) stands to the one that wrote a value.

    ``NEWER``: a later batch, or one without a txid (a DRPC stream's), or the
    value has none; ``SAME``: a replay of the batch that wrote it; ``STALE``:
    an earlier batch -- or the same txid from an older coordinator epoch than
    the one that wrote it, when both are known: a superseded coordinator's.
    """
    if txid is None or stored_txid is None or stored_txid < txid:
        return NEWER
    if stored_txid > txid:
        return STALE
    if epoch is not None and stored_epoch is not None and epoch < stored_epoch:
        return STALE
    return SAME


def _stale(value: Any, txid: int | None, epoch: int | None) -> StaleBatchError:
    batch = f"txid {txid}" + (f" (coordinator epoch {epoch})" if epoch is not None else "")
    msg = (f"batch {batch} is behind the state's {value!r}: a later batch already wrote this key "
           "(a superseded coordinator still committing, or state kept from an older run of "
           "the transactional id)")
    return StaleBatchError(msg)


def _bad_form(kind: str, fields: list[str], data: Any, key: Any) -> ValueError:
    where = f" under key {key!r}" if key is not None else ""
    msg = (f"a {kind} map state found {data!r}{where}, not {kind} state (a dict of {fields}): "
           "is another writer, or a map state of another type, using the same store and namespace?")
    return ValueError(msg)


def _txid_field(data: dict[str, Any], name: str) -> bool:
    value = data.get(name)
    return value is None or (isinstance(value, int) and not isinstance(value, bool))


@dataclass(slots=True)  # not frozen: a frozen init costs 7x, in a map state's inner loop; never mutated
class TransactionalValue:
    """``val`` as batch ``txid`` left it (None: a batch without a txid)."""

    txid: int | None
    val: Any

    def to_json(self) -> dict[str, Any]:
        return {"value": self.val, "txid": self.txid}

    @classmethod
    def from_json(cls, data: Any, key: Any = None) -> TransactionalValue:
        """The value ``to_json`` gave; a ValueError naming ``key`` for anything else."""
        if not (isinstance(data, dict) and set(data) == {"value", "txid"} and _txid_field(data, "txid")):
            raise _bad_form("transactional", ["txid", "value"], data, key)
        return cls(data["txid"], data["value"])


@dataclass(slots=True)  # not frozen: a frozen init costs 7x, in a map state's inner loop; never mutated
class OpaqueValue:
    """``curr`` as batch ``curr_txid`` left it, and ``prev``, the value before that batch.

    ``epoch``: the coordinator epoch of that batch, when it came as a
    TransactionAttempt (not in Storm): a replay of the txid from an older
    epoch than this is refused, so the state keeps the batch the newer
    coordinator recorded.
    """

    curr_txid: int | None
    curr: Any
    prev: Any = None
    epoch: int | None = None

    def get(self, txid: int | None, epoch: int | None = None) -> Any:
        """What batch ``txid`` reads: ``curr`` for a later batch, ``prev`` for a replay of
        ``curr_txid`` (its earlier try may have counted another batch)."""
        found = order(self.curr_txid, self.epoch, txid, epoch)
        if found == STALE:
            raise _stale(self, txid, epoch)
        return self.curr if found == NEWER else self.prev

    def update(self, txid: int | None, value: Any, epoch: int | None = None) -> OpaqueValue:
        """The value after batch ``txid`` set ``value``: ``prev`` moves on only for a later batch."""
        return self.updated(txid, epoch, lambda _read: value, written=False)[1]

    def updated(self, txid: int | None, epoch: int | None, updater: Any,
                written: bool) -> tuple[Any, OpaqueValue]:
        """``get`` then ``update`` in one comparison (a map state's inner loop): the new value
        ``updater`` makes from what batch ``txid`` reads, and the value to store.  ``written``:
        this batch wrote this value already, so it reads ``curr``."""
        found = order(self.curr_txid, self.epoch, txid, epoch)
        if found == STALE:
            raise _stale(self, txid, epoch)
        before = self.curr if found == NEWER else self.prev
        value = updater(self.curr if written else before)
        return value, OpaqueValue(txid, value, before, epoch)

    def to_json(self) -> dict[str, Any]:
        data = {"curr": self.curr, "prev": self.prev, "txid": self.curr_txid}
        if self.epoch is not None:
            data["epoch"] = self.epoch
        return data

    @classmethod
    def from_json(cls, data: Any, key: Any = None) -> OpaqueValue:
        """The value ``to_json`` gave; a ValueError naming ``key`` for anything else."""
        if not (isinstance(data, dict) and _OPAQUE_FIELDS <= set(data) <= {*_OPAQUE_FIELDS, "epoch"}
                and _txid_field(data, "txid") and _txid_field(data, "epoch")):
            raise _bad_form("opaque", ["curr", "prev", "txid"], data, key)
        return cls(data["txid"], data["curr"], data["prev"], data.get("epoch"))
