"""Map states: Storm's ``MapState`` and the three kinds of it over any :class:`IBackingMap`.

A backing map only reads and writes many keys at once (one round trip to its
store per call); :class:`NonTransactionalMap`, :class:`TransactionalMap` and
:class:`OpaqueMap` add what makes ``persistent_aggregate`` exactly once under
replays (Trident-state.md):

* keys are sequences of a group's values, one sequence per key (they reach the
  backing map as tuples);
* ``multi_update`` takes one updater per key, a callable from the old value
  (None when absent) to the new one, and returns the new values; an updater
  sees the updates made before it in the same batch, including those of the
  same call for a key given twice;
* when a txid comes again, a transactional map leaves a key that txid
  already updated as it is, and an opaque map starts again from the value
  the key had before that txid.

The transactional and opaque maps remember what they wrote in the current
batch (Storm's ``CachedBatchReadsMap``): that is how a second update of a key
in one batch tells "this batch wrote it" from "an earlier try of this txid
wrote it".  So ``begin_commit`` must come before the batch's first read or
update, and ``commit`` after its last.  Reads outside a batch (queries) go
past a :class:`CachedMap` to the store, so they see what the writer wrote
even when it is another state object.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

from squall.trident.state.base import (
    ITupleCollection,
    Snapshottable,
    StaleBatchError,
    State,
    StateType,
    batch_of,
    check_keys,
    check_same_length,
)
from squall.trident.state.values import OpaqueValue, TransactionalValue

Key = tuple[Any, ...]


class IBackingMap:
    """Where a map state's values live: many keys read or written per call (Storm's ``IBackingMap``).

    ``multi_get`` answers None for an absent key.  A backing map that can list
    its entries defines ``items()``: the map states' ``get_tuples()`` reads it.
    """

    def multi_get(self, keys: list[Key]) -> list[Any]:
        raise NotImplementedError

    def multi_put(self, keys: list[Key], values: list[Any]) -> None:
        raise NotImplementedError

    def items(self) -> Iterable[tuple[Key, Any]]:
        """Every ``(key, stored value)`` the backing map holds."""
        msg = f"{type(self).__name__} cannot list its entries: get_tuples() needs a backing map with items()"
        raise NotImplementedError(msg)

    def close(self) -> None:
        """Release the connection or file the backing map holds."""


class MapState(State, ITupleCollection):
    """Values by key, updated batch by batch (Storm's ``MapState``)."""

    def multi_get(self, keys: Iterable[Any]) -> list[Any]:
        raise NotImplementedError

    def multi_update(self, keys: Iterable[Any], updaters: Iterable[Callable[[Any], Any]]) -> list[Any]:
        raise NotImplementedError

    def multi_put(self, keys: Iterable[Any], values: Iterable[Any]) -> None:
        raise NotImplementedError

    def get_tuples(self) -> list[list[Any]]:
        msg = f"{type(self).__name__} cannot list its entries"
        raise NotImplementedError(msg)


def _updaters(keys: list[Key], updaters: Iterable[Any]) -> list[Callable[[Any], Any]]:
    updaters = check_same_length("multi_update", "updater", keys, updaters)
    for updater in updaters:
        if not callable(updater):
            msg = f"a map state updater is a callable from the old value to the new one, not {updater!r}"
            raise TypeError(msg)
    return updaters


def _one_per_key(method: str, backing: Any, keys: list[Key], got: Any) -> list[Any]:
    values = list(got)
    if len(values) != len(keys):
        msg = f"{backing!r}.{method} returned {len(values)} values for {len(keys)} keys"
        raise ValueError(msg)
    return values


def _get(backing: Any, keys: list[Key], in_batch: bool) -> list[Any]:
    """``backing.multi_get(keys)``; outside a batch (a ``state_query``, a DRPC read) past any
    :class:`CachedMap`: another state object of the same factory -- the writer, in another
    task -- may have changed the keys since this one cached them."""
    read = backing.multi_get if in_batch else getattr(backing, "multi_get_fresh", backing.multi_get)
    return _one_per_key("multi_get", backing, keys, read(keys))


class NonTransactionalMap(MapState):
    """Every update lands, replayed or not: at least once (or at most once) counts."""

    def __init__(self, backing: IBackingMap) -> None:
        self.backing = backing
        self.in_batch = False

    @classmethod
    def build(cls, backing: IBackingMap) -> NonTransactionalMap:
        return cls(backing)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.backing!r})"

    def begin_commit(self, txid: Any) -> None:
        batch_of(txid)  # a bad txid is the caller's bug, whatever the kind of state
        self.in_batch = True

    def commit(self, txid: Any) -> None:
        self.in_batch = False

    def multi_get(self, keys: Iterable[Any]) -> list[Any]:
        keys = check_keys(keys)
        return _get(self.backing, keys, self.in_batch) if keys else []

    def multi_update(self, keys: Iterable[Any], updaters: Iterable[Callable[[Any], Any]]) -> list[Any]:
        keys = check_keys(keys)
        updaters = _updaters(keys, updaters)
        unique = list(dict.fromkeys(keys))
        latest = dict(zip(unique, self.multi_get(unique), strict=True))
        results = []
        for key, updater in zip(keys, updaters, strict=True):
            latest[key] = updater(latest[key])
            results.append(latest[key])
        if unique:
            self.backing.multi_put(unique, [latest[key] for key in unique])
        return results

    def multi_put(self, keys: Iterable[Any], values: Iterable[Any]) -> None:
        keys = check_keys(keys)
        values = check_same_length("multi_put", "value", keys, values)
        if keys:
            self.backing.multi_put(keys, values)

    def get_tuples(self) -> list[list[Any]]:
        return [[*key, value] for key, value in self.backing.items()]

    def close(self) -> None:
        self.backing.close()


class _TxidMap(MapState):
    """What the transactional and opaque maps share: the current batch and what it wrote."""

    _stored_type: type

    def __init__(self, backing: IBackingMap) -> None:
        self.backing = backing
        self.txid: int | None = None
        self.epoch: int | None = None
        self.in_batch = False  # between begin_commit and commit
        self._written: dict[Key, Any] = {}  # this batch's writes, stored form

    @classmethod
    def build(cls, backing: IBackingMap) -> Any:
        return cls(backing)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.backing!r})"

    def begin_commit(self, txid: Any) -> None:
        # Before reading anything: a bad txid fails the batch, not the next one.
        self.txid, self.epoch = batch_of(txid)
        self.in_batch = True
        self._written.clear()

    def commit(self, txid: Any) -> None:
        self.txid = self.epoch = None
        self.in_batch = False
        self._written.clear()

    def _stored(self, key: Key, value: Any) -> Any:
        if value is not None and not isinstance(value, self._stored_type):
            msg = (f"{self.backing!r} returned {value!r} for key {key!r}: a {type(self).__name__} "
                   f"keeps {self._stored_type.__name__}s in its backing map")
            raise TypeError(msg)
        return value

    def _read(self, keys: list[Key]) -> dict[Key, tuple[Any, bool]]:
        """Each key's stored value and whether this batch wrote it; one backing read for the rest."""
        written = self._written
        found = {key: (written[key], True) for key in keys if key in written} if written else {}
        missing = [key for key in dict.fromkeys(keys) if key not in found]
        if missing:
            got = _get(self.backing, missing, self.in_batch)
            stored_type = self._stored_type
            for key, value in zip(missing, got, strict=True):
                if value is not None and not isinstance(value, stored_type):
                    self._stored(key, value)  # raises, naming the key
                found[key] = (value, False)
        return found

    def _write(self, writes: dict[Key, Any]) -> None:
        if writes:
            keys = list(writes)
            self.backing.multi_put(keys, [writes[key] for key in keys])
            self._written.update(writes)  # only once they landed: a failed write is not "this batch's"

    def get_tuples(self) -> list[list[Any]]:
        return [[*key, self._current(self._stored(key, value))] for key, value in self.backing.items()]

    @staticmethod
    def _current(stored: Any) -> Any:
        raise NotImplementedError

    def close(self) -> None:
        self.backing.close()


class TransactionalMap(_TxidMap):
    """Keeps :class:`TransactionalValue` s: a txid that comes again leaves what it wrote as it is.

    Exactly once when a replayed txid carries the same batch (a transactional spout).
    """

    _stored_type = TransactionalValue

    @staticmethod
    def _current(stored: Any) -> Any:
        return stored.val

    def multi_get(self, keys: Iterable[Any]) -> list[Any]:
        keys = check_keys(keys)
        found = self._read(keys)
        return [None if found[key][0] is None else found[key][0].val for key in keys]

    def multi_update(self, keys: Iterable[Any], updaters: Iterable[Callable[[Any], Any]]) -> list[Any]:
        keys = check_keys(keys)
        updaters = _updaters(keys, updaters)
        latest = self._read(keys)
        writes: dict[Key, TransactionalValue] = {}
        results = []
        for key, updater in zip(keys, updaters, strict=True):
            stored, written = latest[key]
            if stored is not None and not written and self.txid is not None and stored.txid is not None:
                if stored.txid == self.txid:
                    results.append(stored.val)  # this txid's earlier try already counted here
                    continue
                if stored.txid > self.txid:
                    msg = (f"batch txid {self.txid} is behind the state's {stored!r} for key {key!r}: "
                           "a later batch already wrote it (a superseded coordinator still committing, "
                           "or state kept from an older run of the transactional id)")
                    raise StaleBatchError(msg)
            new = TransactionalValue(self.txid, updater(None if stored is None else stored.val))
            latest[key] = writes[key] = new, True
            results.append(new.val)
        self._write({key: value for key, (value, _) in writes.items()})
        return results

    def multi_put(self, keys: Iterable[Any], values: Iterable[Any]) -> None:
        keys = check_keys(keys)
        values = check_same_length("multi_put", "value", keys, values)
        pairs = zip(keys, values, strict=True)
        self._write({key: TransactionalValue(self.txid, value) for key, value in pairs})


class OpaqueMap(_TxidMap):
    """Keeps :class:`OpaqueValue` s: a txid that comes again starts from the value before it.

    Exactly once even when a replayed txid carries another batch (an opaque spout).
    """

    _stored_type = OpaqueValue

    @staticmethod
    def _current(stored: Any) -> Any:
        return stored.curr

    def _value(self, stored: OpaqueValue | None, written: bool) -> Any:
        if stored is None:
            return None
        # What this batch wrote is current; anything else is read as of this batch.
        return stored.curr if written else stored.get(self.txid, self.epoch)

    def multi_get(self, keys: Iterable[Any]) -> list[Any]:
        keys = check_keys(keys)
        found = self._read(keys)
        return [self._value(*found[key]) for key in keys]

    def multi_update(self, keys: Iterable[Any], updaters: Iterable[Callable[[Any], Any]]) -> list[Any]:
        keys = check_keys(keys)
        updaters = _updaters(keys, updaters)
        latest = self._read(keys)
        txid, epoch = self.txid, self.epoch
        writes: dict[Key, OpaqueValue] = {}
        results = []
        for key, updater in zip(keys, updaters, strict=True):
            stored, written = latest[key]
            if stored is None:
                new_value = updater(None)
                new = OpaqueValue(txid, new_value, None, epoch)
            else:
                new_value, new = stored.updated(txid, epoch, updater, written)
            latest[key] = new, True
            writes[key] = new
            results.append(new_value)
        self._write(writes)
        return results

    def multi_put(self, keys: Iterable[Any], values: Iterable[Any]) -> None:
        keys = check_keys(keys)
        values = check_same_length("multi_put", "value", keys, values)
        self.multi_update(keys, [_Replace(value) for value in values])


class _Replace:
    """An updater that ignores the old value (how an opaque map puts)."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __call__(self, stored: Any) -> Any:
        return self.value


class SnapshottableMap(MapState, Snapshottable):
    """A map state that is also :class:`Snapshottable`: its one value lives under ``global_key``.

    What a global (ungrouped) ``persistent_aggregate`` needs; the map methods
    pass through to ``delegate``.
    """

    def __init__(self, delegate: MapState, global_key: Any) -> None:
        self.delegate = delegate
        self.keys = check_keys([global_key if isinstance(global_key, (list, tuple)) else [global_key]])

    def __repr__(self) -> str:
        return f"SnapshottableMap({self.delegate!r}, {list(self.keys[0])!r})"

    def multi_get(self, keys: Iterable[Any]) -> list[Any]:
        return self.delegate.multi_get(keys)

    def multi_update(self, keys: Iterable[Any], updaters: Iterable[Callable[[Any], Any]]) -> list[Any]:
        return self.delegate.multi_update(keys, updaters)

    def multi_put(self, keys: Iterable[Any], values: Iterable[Any]) -> None:
        self.delegate.multi_put(keys, values)

    def begin_commit(self, txid: Any) -> None:
        self.delegate.begin_commit(txid)

    def commit(self, txid: Any) -> None:
        self.delegate.commit(txid)

    def get(self) -> Any:
        return self.multi_get(self.keys)[0]

    def set(self, value: Any) -> None:
        self.multi_put(self.keys, [value])

    def update(self, updater: Any) -> Any:
        return self.multi_update(self.keys, [updater])[0]

    def get_tuples(self) -> list[list[Any]]:
        return self.delegate.get_tuples()

    def close(self) -> None:
        self.delegate.close()


class CachedMap(IBackingMap):
    """The last ``cache_size`` keys of ``delegate`` kept in memory (Storm's ``CachedMap``).

    Layer it under a map state, over a backing map that talks to a database:
    a key read or written is served from memory until evicted, so a batch
    reads only the keys it has not seen lately.  The map states read past it
    (``multi_get_fresh``) outside a batch: a query's state object is not the
    one that writes the keys, so what it cached may be old.  Writes go to ``delegate``
    first and reach the cache only once they landed: after a failed write the
    cache forgets those keys rather than hold values the store never got.
    Sound while this task is the only writer of its keys, as the partitions of
    a ``group_by`` are.
    """

    def __init__(self, delegate: IBackingMap, cache_size: int = 1000) -> None:
        if isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 1:
            msg = f"a CachedMap's cache_size must be an int >= 1, not {cache_size!r}"
            raise ValueError(msg)
        self.delegate = delegate
        self.cache_size = cache_size
        self._cache: OrderedDict[Key, Any] = OrderedDict()  # least recently used first

    def __repr__(self) -> str:
        return f"CachedMap({self.delegate!r}, {self.cache_size})"

    def _remember(self, key: Key, value: Any) -> None:
        self._cache[key] = value
        self._cache.move_to_end(key)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    def multi_get(self, keys: list[Key]) -> list[Any]:
        found = {}
        for key in keys:
            if key in self._cache:
                found[key] = self._cache[key]
                self._cache.move_to_end(key)
        found.update(self._fetch([key for key in dict.fromkeys(keys) if key not in found]))
        return [found[key] for key in keys]

    def multi_get_fresh(self, keys: list[Key]) -> list[Any]:
        """``keys`` read from ``delegate`` whether cached or not; the cache learns the answers."""
        found = self._fetch(list(dict.fromkeys(keys)))
        return [found[key] for key in keys]

    def _fetch(self, keys: list[Key]) -> dict[Key, Any]:
        """``keys`` (no duplicates) from ``delegate`` in one call, remembered."""
        if not keys:
            return {}
        found = dict(zip(keys, _one_per_key("multi_get", self.delegate, keys, self.delegate.multi_get(keys)),
                         strict=True))
        for key, value in found.items():
            self._remember(key, value)
        return found

    def multi_put(self, keys: list[Key], values: list[Any]) -> None:
        try:
            self.delegate.multi_put(keys, values)
        except BaseException:
            for key in keys:
                self._cache.pop(key, None)
            raise
        for key, value in zip(keys, values, strict=True):
            self._remember(key, value)

    def items(self) -> Iterable[tuple[Key, Any]]:
        return self.delegate.items()  # writes go through, so the delegate holds everything

    def close(self) -> None:
        self._cache.clear()
        self.delegate.close()


def build_map_state(state_type: Any, backing: IBackingMap, cache_size: int = 0,
                    global_key: Any = None) -> MapState:
    """The map state of ``state_type`` over ``backing`` -- behind a :class:`CachedMap` of
    ``cache_size`` keys when above 0, and a :class:`SnapshottableMap` when ``global_key``
    is given -- as Storm's map state factories (RedisMapState, MemcachedState) build it."""
    kinds = {StateType.NON_TRANSACTIONAL: NonTransactionalMap, StateType.TRANSACTIONAL: TransactionalMap,
             StateType.OPAQUE: OpaqueMap}
    if cache_size:
        backing = CachedMap(backing, cache_size)
    state: MapState = kinds[StateType.of(state_type)].build(backing)
    return state if global_key is None else SnapshottableMap(state, global_key)

