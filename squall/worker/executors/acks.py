# cython: boundscheck=False, wraparound=False, initializedcheck=False
"""A bolt's acks: the loop over an input batch that acks what it processed, and
the table that sums those acks per tuple tree.

XOR is associative, so the acker sees the same sum from one message per root
a turn as it would from one message per tuple: :class:`AckTable` XORs a
turn's acks per root and hands them to the ackers packed
(squall.acker.ledger.PACKED_ACK), one bytes per acker.

One source for both runs, as emit.py: built with ``acks.pxd``, the table's
roots and sums are C integers and the loop reads each tuple's C fields
(tuple.pxd); tests/worker/test_emit.py runs both.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Callable
from typing import Any

import cython

from squall.worker.executors.emit import TaskState

if not cython.compiled:  # what acks.pxd cimports or defines, in the interpreter
    from squall.topology.tuple_fields import ack_of, edge_of, one_tree, root_of, roots_of

    def packed_bytes(words: array, a: int, b: int) -> bytes:
        return words[a:b].tobytes()

TABLE_START = 64  # index slots of a new table; it doubles as a turn's roots grow
# Pairs travel little-endian (PACKED_ACK): an array of them is that, on such a machine.
BIG_ENDIAN = sys.byteorder == "big"


def zeros(typecode: str, n: int) -> array:
    return array(typecode, bytes(8 * n))


@cython.final
@cython.cclass
class AckTable:
    """One turn's acks of a bolt executor, XOR-ed per root.

    XOR is associative, so the acker sees the same sum it would from one
    message per tuple, in one message per root a turn.  The roots and their
    sums are kept in the order they came, with an open-addressing index over
    them (the roots are random: their low bits are the hash); built, all are C
    integers.  :meth:`drain_by` hands them to the ackers and empties the table
    for the next turn without freeing it.
    """

    def __init__(self) -> None:
        self.n = 0
        self.cap = 0
        self.n_ackers = 0
        self.grow(TABLE_START)

    @cython.locals(i=cython.Py_ssize_t, slot=cython.Py_ssize_t, mask=cython.Py_ssize_t,
                   roots=cython.ulonglong[::1], vals=cython.ulonglong[::1], index=cython.longlong[::1],
                   slots=cython.longlong[::1])
    def grow(self, cap: int) -> int:
        mask = cap - 1
        roots, vals, slots = zeros("Q", cap // 2), zeros("Q", cap // 2), zeros("q", cap // 2)
        index = array("q", [-1]) * cap  # slot -> position in roots/vals, or -1
        for i in range(self.n):
            roots[i] = self.roots[i]
            vals[i] = self.vals[i]
            slot = roots[i] & mask
            while index[slot] != -1:
                slot = (slot + 1) & mask
            index[slot] = i
            slots[i] = slot
        self.roots, self.vals, self.index, self.slots, self.cap = roots, vals, index, slots, cap
        self.packed = zeros("Q", cap)  # drain_by's pairs: two words for each of cap // 2 roots
        self.words = self.packed
        return 0

    @cython.locals(mask=cython.Py_ssize_t, slot=cython.Py_ssize_t, at=cython.Py_ssize_t)
    def put(self, root: int, val: int) -> int:
        mask = self.cap - 1
        slot = root & mask
        while True:
            at = self.index[slot]
            if at == -1:
                break
            if self.roots[at] == root:
                self.vals[at] ^= val
                return 0
            slot = (slot + 1) & mask
        if 2 * (self.n + 1) > self.cap:
            self.grow(2 * self.cap)
            return self.put(root, val)
        self.index[slot] = self.n
        self.slots[self.n] = slot
        self.roots[self.n] = root
        self.vals[self.n] = val
        self.n += 1
        return 0

    @cython.locals(ack=cython.ulonglong)
    def put_tuple(self, tup: Any) -> int:
        if one_tree(tup):
            return self.put(root_of(tup), edge_of(tup) ^ ack_of(tup))
        am = roots_of(tup)
        if am:
            ack = ack_of(tup)
            for root, edge in am.items():
                self.put(root, edge ^ ack)
        return 0

    def xor(self, root: int, val: int) -> None:
        """XOR ``val`` into ``root``'s sum."""
        self.put(root, val)

    def add(self, tup: Any) -> None:
        """A tuple's ack: its edge XOR the edges anchored to it, into each of its roots."""
        self.put_tuple(tup)

    def __len__(self) -> int:
        return self.n

    @cython.locals(i=cython.Py_ssize_t)
    def drain(self) -> list[tuple[int, int]]:
        """The (root, value) pairs in the order their roots came; the table is left empty."""
        out = [(self.roots[i], self.vals[i]) for i in range(self.n)]
        self.clear()
        return out

    @cython.locals(i=cython.Py_ssize_t, a=cython.Py_ssize_t, at=cython.Py_ssize_t, k=cython.Py_ssize_t,
                   n_ackers=cython.ulonglong)
    def drain_by(self, ackers: int) -> list[bytes]:
        """The pairs of :meth:`drain`, packed (squall.acker.ledger.PACKED_ACK) one bytes per
        acker: the acker of a root is ``root % ackers`` (the spout chose the root so); the
        table is left empty.  No tuple or int is made for a pair, and (built) no array: each
        acker's pairs are laid out in the table's own scratch words, then copied out once."""
        if ackers < 1:
            msg = f"ackers must be at least 1, not {ackers}"
            raise ValueError(msg)
        if ackers != self.n_ackers:
            self.starts, self.filled, self.n_ackers = zeros("q", ackers + 1), zeros("q", ackers), ackers
        n_ackers = ackers
        for a in range(ackers + 1):
            self.starts[a] = 0
        for i in range(self.n):
            a = self.roots[i] % n_ackers
            self.starts[a + 1] += 2
        for a in range(ackers):
            self.starts[a + 1] += self.starts[a]
            self.filled[a] = 0
        for i in range(self.n):  # each acker's pairs in one run, in the order their roots came
            a = self.roots[i] % n_ackers
            at = self.starts[a] + self.filled[a]
            self.words[at] = self.roots[i]
            self.words[at + 1] = self.vals[i]
            self.filled[a] += 2
        if BIG_ENDIAN:
            self.packed.byteswap()
        self.clear()
        return [packed_bytes(self.words, self.starts[k], self.starts[k + 1]) for k in range(ackers)]

    @cython.locals(i=cython.Py_ssize_t)
    def clear(self) -> None:
        for i in range(self.n):
            self.index[self.slots[i]] = -1
        self.n = 0


@cython.locals(i=cython.Py_ssize_t, n=cython.Py_ssize_t, errors=cython.Py_ssize_t,
               check_every=cython.Py_ssize_t, acks=AckTable, state=TaskState, current=cython.bint,
               tuples=list)
def run_batch(executor: Any, bt: Any, tuples: list, process: Callable, state: TaskState,
              acks: AckTable | None, current: bool, check_every: int) -> int:
    """A bolt's loop over one input batch: each tuple processed, then (with ``acks``) its
    ack folded in; ``current``: each is the state's current tuple while it runs (what
    auto-anchoring reads).  A tuple whose process raised goes to the executor's error
    path, unacked.  Stops early (the rest times out and replays) once the executor is
    told to stop, looking every ``check_every`` tuples.  Returns how many raised."""
    n = len(tuples)
    errors = 0
    for i in range(n):
        if i % check_every == 0 and not executor.running:
            break
        tup = tuples[i]
        if current:
            state.current = tup
        try:
            process(tup)
        except Exception as e:  # noqa: BLE001 - user code: fail the tuple, keep going
            executor.on_process_error(bt, tup, e)
            errors += 1
            continue
        if acks is not None:
            acks.put_tuple(tup)
    return errors
