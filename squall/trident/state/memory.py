"""MemoryMapState: a map state in this process's memory, for tests and local mode (Storm's).

    counts = stream.group_by(["word"]).persistent_aggregate(MemoryMapState.factory(), Count(), ["count"])

Each factory gets an id when it is made; every state it makes for partition
``i`` in this process reads and writes the same table (Storm's static map of
dbs), so a ``state_query`` and the ``persistent_aggregate`` it reads share
their values whichever task made them.  A worker process keeps its own
tables: values are lost when it dies, as in Storm.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterable
from typing import Any, ClassVar

from squall.trident.state.base import StateFactory, StateType, batch_of, check_keys
from squall.trident.state.map import IBackingMap, Key, MapState, SnapshottableMap, build_map_state

GLOBAL_KEY = "$MEMORY-MAP-STATE-GLOBAL$"


class MemoryBackingMap(IBackingMap):
    """A backing map in a dict of its own (Storm's testing ``MemoryBackingMap``), thread-safe."""

    def __init__(self) -> None:
        self.values: dict[Key, Any] = {}
        # Whole calls are atomic: a reader in another task sees all of a batch's writes or none.
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self.values)} keys)"

    def multi_get(self, keys: list[Key]) -> list[Any]:
        with self._lock:
            return [self.values.get(key) for key in keys]

    def multi_put(self, keys: list[Key], values: list[Any]) -> None:
        with self._lock:
            self.values.update(zip(keys, values, strict=True))

    def multi_remove(self, keys: list[Key]) -> None:
        with self._lock:
            for key in keys:
                self.values.pop(key, None)

    def items(self) -> list[tuple[Key, Any]]:
        with self._lock:
            return list(self.values.items())


class MemoryMapState(SnapshottableMap):
    """A map state (opaque unless ``state_type`` says otherwise) over the table named ``table_id``.

    Also :class:`~squall.trident.state.base.Snapshottable` (under
    ``$MEMORY-MAP-STATE-GLOBAL$``), a tuple collection (``get_tuples()``: each
    key's values then its current value) and removable: ``multi_remove(keys)``
    sets the keys to None now and drops them at the start of the next txid,
    once no replay can need their earlier value (Storm's ``RemovableMapState``).
    """

    _tables: ClassVar[dict[Any, MemoryBackingMap]] = {}
    _tables_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, table_id: Any, state_type: Any = StateType.OPAQUE) -> None:
        self.state_type = StateType.of(state_type)
        self.table_id = table_id
        with MemoryMapState._tables_lock:
            self.backing = MemoryMapState._tables.setdefault(table_id, MemoryBackingMap())
        super().__init__(build_map_state(self.state_type, self.backing), GLOBAL_KEY)
        self._removed: list[Key] = []
        self._txid: int | None = None

    def __repr__(self) -> str:
        return f"MemoryMapState({self.table_id!r}, {self.state_type.name})"

    @classmethod
    def factory(cls, state_type: Any = StateType.OPAQUE) -> MemoryMapStateFactory:
        """A factory of memory map states of ``state_type`` (opaque: Storm's ``MemoryMapState.Factory``)."""
        return MemoryMapStateFactory(state_type)

    @classmethod
    def clear_all(cls) -> None:
        """Forget every table in this process (Storm's ``clearAll``; for tests)."""
        with cls._tables_lock:
            cls._tables.clear()

    def begin_commit(self, txid: Any) -> None:
        self.delegate.begin_commit(txid)
        batch, _ = batch_of(txid)
        # A new txid: the batch that removed these keys has committed, nothing will replay it.
        if batch is None or batch != self._txid:
            self.backing.multi_remove(self._removed)
        self._removed = []
        self._txid = batch

    def multi_remove(self, keys: Iterable[Any]) -> None:
        keys = check_keys(keys)
        self.multi_put(keys, [None] * len(keys))
        self._removed.extend(keys)

    def get_tuples(self) -> list[list[Any]]:
        removed = set(self._removed)
        return [row for row in super().get_tuples() if tuple(row[:-1]) not in removed]


class MemoryMapStateFactory(StateFactory):
    """Makes the :class:`MemoryMapState` of each partition; its id names its tables."""

    def __init__(self, state_type: Any = StateType.OPAQUE, factory_id: str | None = None) -> None:
        self.state_type = StateType.of(state_type)
        self.id = factory_id or uuid.uuid4().hex

    def __repr__(self) -> str:
        return f"MemoryMapState.factory({self.state_type.name}, id={self.id!r})"

    def make_state(self, conf: dict[str, Any], context: Any, partition_index: int,
                   num_partitions: int) -> MapState:
        return MemoryMapState((self.id, partition_index), self.state_type)
