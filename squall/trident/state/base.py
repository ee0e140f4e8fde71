"""What Trident knows of state: a State told when a batch's updates begin and end, and its factory.

Storm's ``org.apache.storm.trident.state`` interfaces, in Python.  Trident
assumes nothing else about a state: a :class:`QueryFunction` or
:class:`StateUpdater` calls whatever methods the state has.  The map states
(:mod:`squall.trident.state.map`) are the ones ``persistent_aggregate`` and
``MapGet`` use.

A batch's txid comes to ``begin_commit``/``commit`` as an int, as None (a
batch without a transaction: a DRPC request persisted through
``partition_persist``), or as the :class:`~squall.transactional.attempt.TransactionAttempt`
itself, which also names the coordinator epoch that emitted it:
:func:`batch_of` reads all three.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from typing import Any

from squall.errors import SquallError


class StateType(enum.Enum):
    """What a state does when a txid comes again (Trident-state.md's three kinds).

    * ``NON_TRANSACTIONAL``: nothing; every update lands (at least once, or at most once).
    * ``TRANSACTIONAL``: a key the txid already updated is left as it is; exactly
      once when the spout replays the same batch under a txid.
    * ``OPAQUE``: the key is recomputed from its value before the txid; exactly
      once even when a replayed batch differs.
    """

    NON_TRANSACTIONAL = "non-transactional"
    TRANSACTIONAL = "transactional"
    OPAQUE = "opaque"

    @classmethod
    def of(cls, value: Any) -> StateType:
        """``value`` as a StateType: a member, or its name or value as text ("opaque", "OPAQUE")."""
        if isinstance(value, StateType):
            return value
        if isinstance(value, str):
            for member in cls:
                if value in (member.name, member.value):
                    return member
        msg = f"a state type must be one of {[m.name for m in cls]}, not {value!r}"
        raise ValueError(msg)


class StaleBatchError(SquallError):
    """A batch's update reached a key that a later batch already wrote.

    Commits go in txid order, so this means a superseded coordinator (or a
    worker that lost its slot) is still committing, or the state outlived the
    transactional id's record of its txids; the batch fails rather than count
    twice or write over newer state.
    """


def batch_of(txid: Any) -> tuple[int | None, int | None]:
    """``(txid, epoch)`` of what ``begin_commit`` was given: an int, None, or a
    TransactionAttempt (anything with ``.txid``; its ``.epoch`` when it has one)."""
    epoch = None
    if txid is not None and not isinstance(txid, int) and hasattr(txid, "txid"):
        found = getattr(txid, "epoch", None)
        epoch = found if isinstance(found, int) and not isinstance(found, bool) else None
        txid = txid.txid
    # bool is an int: True would pass as txid 1 and hide a caller's bug.
    if txid is not None and (isinstance(txid, bool) or not isinstance(txid, int) or txid < 0):
        msg = f"a batch txid must be an int >= 0, None or a TransactionAttempt, not {txid!r}"
        raise ValueError(msg)
    return txid, epoch


class State:
    """A source of state Trident updates batch by batch (Storm's ``State``).

    ``begin_commit(txid)`` comes before a batch's updates and ``commit(txid)``
    after them; a batch that fails between the two is replayed under the same
    txid, starting with ``begin_commit`` again.  ``close()`` releases what the
    state holds when its task stops (not in Storm; a no-op unless overridden).
    """

    def begin_commit(self, txid: Any) -> None:
        """A batch's updates begin."""

    def commit(self, txid: Any) -> None:
        """The batch's updates are done."""

    def close(self) -> None:
        """The task that made this state is stopping."""


class ReadOnlyState(State):
    """A state that only answers queries: a batch that tries to update it is a mistake."""

    def begin_commit(self, txid: Any) -> None:
        msg = f"{type(self).__name__} is read-only: it cannot be updated (batch {txid!r})"
        raise TypeError(msg)

    def commit(self, txid: Any) -> None:
        msg = f"{type(self).__name__} is read-only: it cannot be updated (batch {txid!r})"
        raise TypeError(msg)


class StateFactory:
    """Makes one state per partition of the stream that uses it (Storm's ``StateFactory``).

    A factory travels with the topology to every worker, so it holds only what
    describes the state (a path, a URL, a namespace): connections are opened
    in ``make_state``, in the task that uses them.
    """

    def make_state(self, conf: dict[str, Any], context: Any, partition_index: int,
                   num_partitions: int) -> State:
        """The state of partition ``partition_index`` of ``num_partitions``;
        ``conf`` is the topology's configuration, ``context`` the task's
        TopologyContext (None outside a topology)."""
        raise NotImplementedError


class ValueUpdater:
    """A map state update for one key: the new value from the stored one (None when absent).

    Any callable of one argument does; subclass this to write it as Storm's
    ``ValueUpdater.update(stored)``.
    """

    def update(self, stored: Any) -> Any:
        raise NotImplementedError

    def __call__(self, stored: Any) -> Any:
        return self.update(stored)


class CombinerValueUpdater(ValueUpdater):
    """``arg`` combined into the stored value with a CombinerAggregator (``arg`` alone when absent)."""

    def __init__(self, agg: Any, arg: Any) -> None:
        self.agg = agg
        self.arg = arg

    def update(self, stored: Any) -> Any:
        return self.arg if stored is None else self.agg.combine(stored, self.arg)

    def __repr__(self) -> str:
        return f"CombinerValueUpdater({type(self.agg).__name__}, {self.arg!r})"


class ReducerValueUpdater(ValueUpdater):
    """The tuples reduced into the stored value with a ReducerAggregator (from ``init()`` when absent)."""

    def __init__(self, agg: Any, tuples: Iterable[Any]) -> None:
        self.agg = agg
        self.tuples = list(tuples)

    def update(self, stored: Any) -> Any:
        value = self.agg.init() if stored is None else stored
        for tup in self.tuples:
            value = self.agg.reduce(value, tup)
        return value


class Snapshottable(State):
    """One value per partition: what a global ``persistent_aggregate`` keeps (Storm's ``Snapshottable``)."""

    def get(self) -> Any:
        raise NotImplementedError

    def set(self, value: Any) -> None:
        raise NotImplementedError

    def update(self, updater: Any) -> Any:
        """Apply ``updater`` (old value -> new, None when unset) and return the new value."""
        raise NotImplementedError


class ITupleCollection:
    """A state that can list all it holds (Storm's ``ITupleCollection``: ``TupleCollectionGet`` reads it)."""

    def get_tuples(self) -> list[list[Any]]:
        """Every entry as one tuple's values: for a map state, the key's values then the value."""
        raise NotImplementedError


def check_keys(keys: Any) -> list[tuple[Any, ...]]:
    """``keys`` as a list of tuples (what backing maps get), or a TypeError naming the
    first that is not a sequence of hashable values.

    A map state's key is the sequence of a group's field values, even for one
    field: ``[["the"], ["cat"]]``, not ``["the", "cat"]``.
    """
    if isinstance(keys, (str, bytes)) or not isinstance(keys, Iterable):
        msg = f"map state keys must be a list of keys (each a sequence of values), not {keys!r}"
        raise TypeError(msg)
    out = []
    for key in keys:
        if type(key) is not tuple:  # a tuple is the common case: Trident's own updaters pass them
            if isinstance(key, (str, bytes)) or not isinstance(key, Sequence):
                msg = (f"a map state key is a sequence of the group's values, such as [{key!r}], "
                       f"not {type(key).__name__} {key!r}")
                raise TypeError(msg)
            key = tuple(key)
        try:
            hash(key)
        except TypeError as e:
            msg = f"a map state key's values must be hashable (str, numbers, None, tuples), not {key!r}"
            raise TypeError(msg) from e
        out.append(key)
    return out


def check_same_length(method: str, noun: str, keys: list[Any], values: Any) -> list[Any]:
    """``values`` as a list, or a ValueError when it does not hold one entry per key."""
    values = list(values)
    if len(values) != len(keys):
        msg = f"{method} takes one {noun} per key: got {len(keys)} keys and {len(values)} {noun}s"
        raise ValueError(msg)
    return values


def check_map_options(namespace: Any, cache_size: Any) -> None:
    """A map state factory's ``namespace`` and ``cache_size``, or ValueError naming the bad one."""
    if not isinstance(namespace, str) or not namespace:
        msg = f"a map state's namespace must be a non-empty str, not {namespace!r}"
        raise ValueError(msg)
    if isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 0:
        msg = f"a map state's cache_size must be an int >= 0 (0: no cache), not {cache_size!r}"
        raise ValueError(msg)
