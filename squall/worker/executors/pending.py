# cython: boundscheck=False, wraparound=False, initializedcheck=False
"""A spout's pending trees: root id -> (spout task, message id, emit time).

One open-addressing table (linear probing, deletion by shifting back, no
tombstones) in five columns: the roots and emit times as 64-bit numbers
(``array``), the task and message id as references (lists; an empty slot's task
is None), and the rotation each tree was put in.  It grows at three quarters
full, so a tree costs 48 to 96 bytes; a dict of tuples cost about 170.

Timeouts keep Storm's RotatingMap meaning (two buckets: a tree put between two
rotations expires at the second) without its buckets: ``rotate`` counts
rotations and takes the trees put before the last one, in one pass over the
table, once a message timeout.

:func:`settle` is the spout executor's loop over an ack or fail message from
the acker.  One source for both runs: the interpreter runs this file as it is,
and ``python -m squall.compiled build`` compiles it with the C types of
``pending.pxd`` (Cython's pure-Python mode).
"""

from __future__ import annotations

from array import array
from typing import Any

import cython

# A spout chooses a root's residue (its acker's index): a multiplicative hash's high
# bits spread the roots whatever their low ones.
GOLDEN = 0x9E3779B97F4A7C15
START = 1024  # slots of a new table


@cython.final
@cython.cclass
class PendingTrees:
    def __init__(self) -> None:
        self.n = 0
        self.rotation = 0
        self.cap = START
        self.roots = array("Q", [0]) * START
        self.emitted = array("d", [0.0]) * START
        self.put_in = array("I", [0]) * START
        self.tasks = [None] * START
        self.msg_ids = [None] * START

    def __len__(self) -> int:
        return self.n

    def __contains__(self, root: int) -> bool:
        return self.tasks[self.slot_of(root)] is not None

    # -- the table ---------------------------------------------------------

    @cython.locals(i=cython.Py_ssize_t, mask=cython.Py_ssize_t)
    def slot_of(self, root: int) -> int:
        """The slot holding ``root``, or the empty slot where it would go."""
        mask = self.cap - 1
        i = ((root * GOLDEN) >> 32) & mask  # bits 32 and up of a 64-bit product: no wrap matters
        # (an empty slot ends the probe whatever root it last held: no key lies past a hole)
        while self.roots[i] != root and self.tasks[i] is not None:
            i = (i + 1) & mask
        return i

    @cython.locals(j=cython.Py_ssize_t, home=cython.Py_ssize_t, mask=cython.Py_ssize_t)
    def remove(self, i: int) -> None:
        """Empty slot ``i`` (its task and message id handed on), shifting back the entries
        after it that probed past it."""
        mask = self.cap - 1
        j = i
        while True:
            j = (j + 1) & mask
            if self.tasks[j] is None:
                break
            home = ((self.roots[j] * GOLDEN) >> 32) & mask
            # j's entry may fill the hole at i if its home is not in (i, j], cyclically
            if (j > i and (home <= i or home > j)) or (j < i and home <= i and home > j):
                self.roots[i] = self.roots[j]
                self.emitted[i] = self.emitted[j]
                self.put_in[i] = self.put_in[j]
                self.tasks[i] = self.tasks[j]
                self.msg_ids[i] = self.msg_ids[j]
                i = j
        self.tasks[i] = None
        self.msg_ids[i] = None
        self.n -= 1

    @cython.locals(k=cython.Py_ssize_t, i=cython.Py_ssize_t, old_cap=cython.Py_ssize_t,
                   roots=cython.ulonglong[::1], emitted=cython.double[::1], put_in=cython.uint[::1])
    def grow(self) -> int:
        old_cap, roots, emitted, put_in, tasks, msg_ids = (
            self.cap, self.roots, self.emitted, self.put_in, self.tasks, self.msg_ids)
        self.cap = old_cap * 2
        self.roots = array("Q", [0]) * self.cap
        self.emitted = array("d", [0.0]) * self.cap
        self.put_in = array("I", [0]) * self.cap
        self.tasks = [None] * self.cap
        self.msg_ids = [None] * self.cap
        for k in range(old_cap):
            if tasks[k] is not None:
                i = self.slot_of(roots[k])
                self.roots[i] = roots[k]
                self.emitted[i] = emitted[k]
                self.put_in[i] = put_in[k]
                self.tasks[i] = tasks[k]
                self.msg_ids[i] = msg_ids[k]
        return 0

    @cython.locals(i=cython.Py_ssize_t)
    def add(self, root: int, task: Any, msg_id: Any, t0: float) -> int:
        """A new tree (its root a fresh random id); a root already pending is replaced."""
        i = self.slot_of(root)
        if self.tasks[i] is None:
            if 4 * (self.n + 1) > 3 * self.cap:
                self.grow()
                i = self.slot_of(root)
            self.n += 1
        self.roots[i] = root
        self.tasks[i] = task
        self.msg_ids[i] = msg_id
        self.emitted[i] = t0
        self.put_in[i] = self.rotation
        return 0

    @cython.locals(i=cython.Py_ssize_t)
    def take(self, root: int) -> tuple[Any, Any, float] | None:
        """The tree's (task, message id, emit time), and it is no longer pending; None if
        it is not (already timed out here)."""
        i = self.slot_of(root)
        if self.tasks[i] is None:
            return None
        out = (self.tasks[i], self.msg_ids[i], self.emitted[i])
        self.remove(i)
        return out

    # -- what the spout executor calls ----------------------------------------

    def put_new(self, root: int, value: tuple[Any, Any, float]) -> None:
        """``value`` = (task, message id, emit time) for a new tree ``root``."""
        task, msg_id, t0 = value
        self.add(root, task, msg_id, t0)

    def pop(self, root: int, default: Any = None) -> Any:
        got = self.take(root)
        return default if got is None else got

    @cython.locals(i=cython.Py_ssize_t)
    def items(self) -> list[tuple[int, tuple[Any, Any, float]]]:
        """(root, (task, message id, emit time)) of every pending tree, oldest first."""
        out = [(self.roots[i], (self.tasks[i], self.msg_ids[i], self.emitted[i]))
               for i in range(self.cap) if self.tasks[i] is not None]
        out.sort(key=_emitted)
        return out

    @cython.locals(i=cython.Py_ssize_t)
    def rotate(self) -> dict[int, tuple[Any, Any, float]]:
        """Expire the trees put before the last rotation: {root: (task, message id, emit
        time)}, oldest first."""
        dead = [(self.emitted[i], self.roots[i]) for i in range(self.cap)
                if self.tasks[i] is not None and self.put_in[i] != self.rotation]
        self.rotation = (self.rotation + 1) & 0xFFFF_FFFF  # C's 32 bits
        dead.sort(key=_first)
        return {root: self.take(root) for _t0, root in dead}


def _first(pair: tuple[float, int]) -> float:
    return pair[0]


def _emitted(item: tuple[int, tuple[Any, Any, float]]) -> float:
    return item[1][2]


@cython.locals(pending=PendingTrees, roots=list, ok=cython.bint, now=cython.double, by_task=dict,
               settled=cython.Py_ssize_t, waited=cython.double, t0=cython.double, i=cython.Py_ssize_t)
def settle(pending: PendingTrees, roots: list[int], ok: bool, now: float, latencies: Any,
           by_task: dict[int, Any]) -> tuple[int, float]:
    """The trees ``roots`` settled (acked if ``ok``, else failed): each the spout's ack
    or fail with its message id, its latency kept when acked.  Roots no longer pending
    (timed out here already) are skipped.  Returns (trees settled, seconds they waited)."""
    settled = 0
    waited = 0.0
    append = latencies.append
    for root in roots:
        i = pending.slot_of(root)
        task = pending.tasks[i]
        if task is None:
            continue
        msg_id = pending.msg_ids[i]
        t0 = pending.emitted[i]
        pending.remove(i)
        settled += 1
        if ok:
            append(now - t0)
            waited += now - t0
            by_task[task].spout.ack(msg_id)
        else:
            by_task[task].spout.fail(msg_id)
    return settled, waited
