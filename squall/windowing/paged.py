"""A persisted window's tuples in partitions, at most ``bound`` of them in
memory (Storm's WindowState with its WindowPartitionCache): pure, the store
is passed in and only ``get_many``/``update`` are called on it.

The buffer is a list of partitions, oldest first, each ``[pid, version,
count]``.  A partition's tuples live in the store under ``<prefix>/<pid>.<version>``;
a partition is never rewritten in place: a changed one is saved under a new
version, so the metadata of the last committed checkpoint always names
versions that are still there, whatever was spilled since (a rollback just
reloads that metadata).  Versions superseded by a checkpoint are deleted once
it commits.  The cache holds whole partitions, least recently used out first;
a changed (dirty) partition leaving it is saved first.

Indexing is by position in the buffer.  Positions below ``head`` are evicted
tuples kept for ``window.expired`` until the window after them is handed out.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

Codec = tuple[Callable[[Any], Any], Callable[[Any], Any]]


class PagedTuples:
    def __init__(self, store: Any, prefix: str, bound: int, codec: Codec) -> None:
        self.store, self.prefix, self.bound = store, prefix, bound
        self.encode, self.decode = codec
        self.part_size = max(1, bound // 4)  # so several partitions fit the bound
        self.parts: list[list[int]] = []  # [pid, version, count], oldest first
        self.head = 0  # positions below it are evicted, kept for window.expired
        self.expired_start = 0  # evicted since the last window handed out: from here to head
        self.next_pid = 0
        self.cache: OrderedDict[int, list[Any]] = OrderedDict()
        self.dirty: set[int] = set()
        self.garbage: list[str] = []  # keys superseded since the last checkpoint
        # Keys the last checkpoint superseded: deleted when it commits.  Not ``garbage``:
        # what was superseded after it (a spill between prepare and commit) it still names.
        self.superseded: list[str] = []
        self.loads = 0  # partitions read from the store (for tests and logs)

    # -- sequence of the live (not evicted) tuples, as WindowCore uses a list --

    def __len__(self) -> int:
        return sum(p[2] for p in self.parts) - self.head

    def __getitem__(self, item: Any) -> Any:
        if isinstance(item, slice):
            start, stop, step = item.indices(len(self))
            assert step == 1
            return TupleView(self, self.head + start, self.head + max(start, stop))
        if item < 0:
            item += len(self)
        return self.at(self.head + item)

    def __iter__(self) -> Iterator[Any]:
        return iter(self[:])

    def append(self, tup: Any) -> None:
        if not self.parts or self.parts[-1][2] >= self.part_size:
            self.parts.append([self.next_pid, 0, 0])
            self.cache[self.next_pid] = []
            self.next_pid += 1
        part = self.parts[-1]
        self._tuples(part).append(tup)
        part[2] += 1
        self.dirty.add(part[0])
        self._shrink(keep=part[0])

    def insert(self, at: int, tup: Any) -> None:
        """Insert at live index ``at`` (event time: an out-of-order tuple)."""
        if at >= len(self):
            self.append(tup)
            return
        i, off = self._locate(self.head + at)
        part = self.parts[i]
        tuples = self._tuples(part)
        tuples.insert(off, tup)
        part[2] += 1
        self.dirty.add(part[0])
        if part[2] > 2 * self.part_size:  # inserts keep partitions small, so the cache can hold several
            half = part[2] // 2
            self.cache[self.next_pid] = tuples[half:]
            del tuples[half:]
            self.parts.insert(i + 1, [self.next_pid, 0, part[2] - half])
            part[2] = half
            self.dirty.add(self.next_pid)
            self.next_pid += 1
        self._shrink(keep=part[0])

    def evict_front(self, n: int) -> TupleView:
        """Evict the ``n`` oldest live tuples; they stay readable until ``release``."""
        start = self.head
        self.head += n
        return TupleView(self, start, self.head)

    def hand_out(self, upto: int, picks: Any) -> tuple[TupleView, TupleView, TupleView]:
        """A window of the first ``upto`` live tuples: its tuples, the new ones
        (live indexes ``picks``) and those evicted since the last window."""
        # The previous window is done with: what was evicted before it can go.
        while self.parts and self.parts[0][2] <= self.expired_start:
            pid, version, count = self.parts.pop(0)
            self.cache.pop(pid, None)
            self.dirty.discard(pid)
            self.garbage.append(self._key(pid, version))
            self.expired_start -= count
            self.head -= count
        expired = TupleView(self, self.expired_start, self.head)
        self.expired_start = self.head
        start, stop = self.head, self.head + upto
        return TupleView(self, start, stop), TupleView(self, start, stop, picks), expired

    # -- reading a position ---------------------------------------------------

    def _key(self, pid: int, version: int) -> str:
        return f"{self.prefix}/{pid}.{version}"

    def _locate(self, pos: int) -> tuple[int, int]:
        for i, part in enumerate(self.parts):
            if pos < part[2]:
                return i, pos
            pos -= part[2]
        raise IndexError(pos)

    def at(self, pos: int) -> Any:
        i, off = self._locate(pos)
        return self._tuples(self.parts[i])[off]

    def _tuples(self, part: list[int]) -> list[Any]:
        pid = part[0]
        got = self.cache.get(pid)
        if got is None:
            [raw] = self.store.get_many([self._key(pid, part[1])])
            got = [self.decode(t) for t in raw or []]
            self.loads += 1
            self.cache[pid] = got
            self._shrink(keep=pid)
        self.cache.move_to_end(pid)
        return got

    def iter_range(self, start: int, stop: int) -> Iterator[Any]:
        pos = 0
        for part in list(self.parts):
            lo, hi = max(start - pos, 0), min(stop - pos, part[2])
            if lo < hi:
                yield from self._tuples(part)[lo:hi]
            pos += part[2]
            if pos >= stop:
                return

    # -- the memory bound and the checkpoint -----------------------------------

    def held(self) -> int:
        """Tuples in memory now."""
        return sum(len(t) for t in self.cache.values())

    def _shrink(self, keep: int) -> None:
        held = self.held()
        for pid in list(self.cache):
            if held <= self.bound:
                return
            if pid == keep:
                continue
            if pid in self.dirty:
                self._save([self._part(pid)])
            held -= len(self.cache.pop(pid))

    def _part(self, pid: int) -> list[int]:
        return next(p for p in self.parts if p[0] == pid)

    def _save(self, parts: list[list[int]]) -> None:
        """Write ``parts`` (dirty, in the cache) under new versions."""
        writes: dict[str, Any] = {}
        for part in parts:
            pid, version, _count = part
            if version:
                self.garbage.append(self._key(pid, version))
            part[1] = version + 1
            writes[self._key(pid, part[1])] = [self.encode(t) for t in self.cache[pid]]
            self.dirty.discard(pid)
        if writes:
            self.store.update(list(writes), lambda _cur: writes)

    def checkpoint(self) -> dict[str, Any]:
        """Save what changed since the last checkpoint; the metadata to commit with it."""
        self._save([p for p in self.parts if p[0] in self.dirty])
        self.superseded, self.garbage = self.superseded + self.garbage, []
        return {"parts": [list(p) for p in self.parts], "head": self.head, "next_pid": self.next_pid,
                "expired_start": self.expired_start}

    def committed(self) -> None:
        """The checkpoint committed: the versions it superseded can go."""
        garbage, self.superseded = self.superseded, []
        if garbage:
            self.store.update(garbage, lambda _cur: dict.fromkeys(garbage))

    def restore(self, meta: dict[str, Any] | None) -> None:
        self.cache.clear()
        self.dirty.clear()
        self.garbage, self.superseded = [], []
        if meta is None:
            self.parts, self.head, self.expired_start = [], 0, 0
            return
        self.parts = [list(p) for p in meta["parts"]]
        self.head, self.next_pid = meta["head"], meta["next_pid"]
        self.expired_start = meta["expired_start"]


class TupleView:
    """``window.tuples`` (and ``.new``/``.expired``) of a window held in
    partitions: sized, iterable and indexable, paging partitions in as it
    goes.  Valid during ``process_window`` only: copy with ``list()`` to keep."""

    def __init__(self, paged: PagedTuples, start: int, stop: int, picks: Any = None) -> None:
        self.paged, self.start, self.stop, self.picks = paged, start, stop, picks

    def __len__(self) -> int:
        return self.stop - self.start if self.picks is None else len(self.picks)

    def __iter__(self) -> Iterator[Any]:
        it = self.paged.iter_range(self.start, self.stop)
        if self.picks is None:
            return it
        picks = set(self.picks)
        return (t for i, t in enumerate(it) if i in picks)

    def __getitem__(self, i: int) -> Any:
        if isinstance(i, slice):
            return list(self)[i]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        return self.paged.at(self.start + (i if self.picks is None else self.picks[i]))

    def __repr__(self) -> str:
        return f"<{len(self)} window tuples>"
