# cython: boundscheck=False, wraparound=False, initializedcheck=False
"""The acker's XOR ledger, a pure core: events in, completions out.

A pending tuple tree is the ack val Storm keeps (the XOR of every edge id
created or acked in the tree), its spout task and a failed flag: three 64-bit
words of one table (open addressing, linear probing, deletion by shifting back,
no tombstones): its root, its ack val, and a word that packs the spout task + 1
(0 = the spout's init has not arrived yet; bolts' acks may overtake it), the
rotation it was last touched in, the failed flag and the slot's used flag.  The
table is an ``array('Q')``, grown at three quarters full, so a tree costs 32 to
64 bytes (Storm: ~20 in Java).

Timeouts keep Storm's RotatingMap meaning without its buckets: ``rotate``
counts rotations, and a tree untouched for ``buckets`` of them expires (one
pass over the table, once a timeout / (buckets - 1): every 15 s by default).

One source for both runs: the interpreter runs this file as it is, and
``python -m squall.compiled build`` compiles it with the C types of
``ledger.pxd`` (Cython's pure-Python mode), the table read as a C array.
"""

from __future__ import annotations

import struct
import sys
from array import array

import cython

if not cython.compiled:  # what ledger.pxd takes from CPython's C API, in Python

    def _PyLong_Sign(v: int) -> int:  # noqa: N802 - CPython's name, declared in ledger.pxd
        return (v > 0) - (v < 0)

    def _PyLong_NumBits(v: int) -> int:  # noqa: N802
        return v.bit_length()


MASK64 = (1 << 64) - 1
# A term of ``ack_many`` wider than 64 bits carries the failed bit and the spout task
# above the ack val (init_many's events, as one int).
FAILED_BIT = 1 << 64
TASK_SHIFT = 65
# A bolt's acks as they travel to an acker: (root, value) pairs, each two unsigned 64-bit
# integers, little-endian, back to back.  Packed once by the bolt (its AckTable), read
# once by the ledger: no tuple or int is made for a pair, in this worker or across.
PACKED_ACK = struct.Struct("<QQ")

# Roots are random 64-bit ids, but a spout chooses their residue (its acker's index):
# a multiplicative hash's high bits spread them whatever the low ones.
GOLDEN = 0x9E3779B97F4A7C15
# The third word of a slot: spout task + 1 in the low 32 bits, then the rotation it
# was last touched in (mod 2**16), the failed flag, the used flag.
# (Written out: compiled, a shift by a C int would be taken in 32 bits.)
TASK1 = 0xFFFF_FFFF
TOUCHED_SHIFT = 32
TOUCHED = 0xFFFF_0000_0000
FAILED_SHIFT = 48
FAILED = 0x1_0000_0000_0000
USED = 0x2_0000_0000_0000
START = 1024  # slots of a new ledger
WORDS = 3  # words a slot: root, ack val, the packed rest


def pack_acks(pairs: list[tuple[int, int]]) -> bytes:
    return b"".join(PACKED_ACK.pack(root, val) for root, val in pairs)


# Outcomes returned to the shell: (spout task, root id, ok?)
Outcome = tuple[int, int, bool]


def fits_u64(v: object) -> bool:
    """An int that is a 64-bit unsigned value (in C: no method call, no int made)."""
    return type(v) is int and _PyLong_Sign(v) >= 0 and _PyLong_NumBits(v) <= 64


@cython.final
@cython.cclass
class AckLedger:
    def __init__(self, buckets: int = 3) -> None:
        if buckets < 2:
            msg = f"a RotatingMap needs at least 2 buckets, got {buckets}"
            raise ValueError(msg)
        self.buckets = buckets
        self.rotation = 0
        self.n = 0
        self.cap = START
        self.table = array("Q", [0]) * (WORDS * START)

    def __len__(self) -> int:
        return self.n

    # -- the table ---------------------------------------------------------

    @cython.locals(i=cython.Py_ssize_t, mask=cython.Py_ssize_t)
    def slot_of(self, root: int) -> int:
        """The slot holding ``root``, or the empty slot where it would go (its first word)."""
        mask = self.cap - 1
        i = ((root * GOLDEN) >> 32) & mask  # bits 32 and up of a 64-bit product: no wrap matters
        while self.table[WORDS * i + 2] & USED and self.table[WORDS * i] != root:
            i = (i + 1) & mask
        return WORDS * i

    @cython.locals(i=cython.Py_ssize_t, j=cython.Py_ssize_t, home=cython.Py_ssize_t, mask=cython.Py_ssize_t)
    def remove(self, at: int) -> None:
        """Empty the slot at word ``at``, shifting back the entries after it that probed past it."""
        mask = self.cap - 1
        i = j = at // WORDS
        while True:
            j = (j + 1) & mask
            if not self.table[WORDS * j + 2] & USED:
                break
            home = ((self.table[WORDS * j] * GOLDEN) >> 32) & mask
            # j's entry may fill the hole at i if its home is not in (i, j], cyclically
            if (j > i and (home <= i or home > j)) or (j < i and home <= i and home > j):
                self.table[WORDS * i] = self.table[WORDS * j]
                self.table[WORDS * i + 1] = self.table[WORDS * j + 1]
                self.table[WORDS * i + 2] = self.table[WORDS * j + 2]
                i = j
        self.table[WORDS * i + 2] = 0
        self.n -= 1

    @cython.locals(old=cython.ulonglong[::1], k=cython.Py_ssize_t, at=cython.Py_ssize_t)
    def grow(self) -> int:
        old = self.table
        self.cap *= 2
        self.table = array("Q", [0]) * (WORDS * self.cap)
        for k in range(0, len(old), WORDS):
            if old[k + 2] & USED:
                at = self.slot_of(old[k])
                self.table[at] = old[k]
                self.table[at + 1] = old[k + 1]
                self.table[at + 2] = old[k + 2]
        return 0

    @cython.locals(at=cython.Py_ssize_t, rest=cython.ulonglong, task=cython.ulonglong,
                   val_now=cython.ulonglong)
    def apply(self, root: int, val: int, task1: int, failed: int, failing: bool, out: list) -> int:
        """One event: XOR (or, failing, OR) into the tree; its outcome appended if it ended.
        ``task1`` is a spout task + 1 (0: not the init), ``failed`` 1 to fail the tree."""
        at = self.slot_of(root)
        if not self.table[at + 2] & USED:
            if 4 * (self.n + 1) > 3 * self.cap:
                self.grow()
                at = self.slot_of(root)
            self.table[at] = root
            self.table[at + 1] = 0
            self.table[at + 2] = USED
            self.n += 1
        rest = self.table[at + 2]
        task1 &= TASK1  # what C's 32 bits of a task keep
        if failing:
            val_now = self.table[at + 1] | val
            task = (rest & TASK1) | task1
            failed |= (rest & FAILED) >> FAILED_SHIFT
        else:
            val_now = self.table[at + 1] ^ val
            task = (rest & TASK1) ^ task1
            failed ^= (rest & FAILED) >> FAILED_SHIFT
        self.table[at + 1] = val_now
        self.table[at + 2] = USED | (failed << FAILED_SHIFT) | (self.rotation << TOUCHED_SHIFT) | task
        if task:
            if failed:
                out.append((task - 1, root, False))
                self.remove(at)
            elif val_now == 0:
                out.append((task - 1, root, True))
                self.remove(at)
        return 0

    # -- events --------------------------------------------------------------

    def init(self, root: int, val: int, spout_task: int) -> Outcome | None:
        """The spout emitted tree ``root``: ``val`` is the XOR of its edge ids."""
        return _single(self.init_many([(root, val, spout_task)]))

    def ack(self, root: int, val: int) -> Outcome | None:
        """A bolt acked: ``val`` = its tuple's edge id XOR its children's edge ids."""
        return _single(self.ack_many([(root, val)]))

    def fail(self, root: int) -> Outcome | None:
        return _single(self.fail_many([root]))

    def init_many(self, items: list) -> list[Outcome]:
        """``init`` for each (root, val, spout task); the outcomes, in order."""
        out: list[Outcome] = []
        for item in items:
            root, val, task = item
            self.apply(root, val, task + 1, 0, False, out)
        return out

    def fail_many(self, roots: list) -> list[Outcome]:
        out: list[Outcome] = []
        for root in roots:
            self.apply(root, 0, 0, 1, True, out)
        return out

    def ack_many(self, items: list | bytes, failing: bool = False) -> list[Outcome]:
        """XOR each (root, term) into its tree; the trees that completed or failed.
        ``items`` are pairs, or the bytes :data:`PACKED_ACK` packs them into.  A term
        wider than 64 bits carries a failed bit and a spout task above them."""
        out: list[Outcome] = []
        if type(items) is bytes:
            if len(items) % PACKED_ACK.size:
                msg = f"packed acks are {PACKED_ACK.size}-byte pairs, not {len(items)} bytes"
                raise ValueError(msg)
            self.apply_packed(_packed_words(items), failing, out)
            return out
        if type(items) is not list:
            msg = f"acks are a list of pairs or packed bytes, not {type(items).__name__}"
            raise TypeError(msg)
        for item in items:
            root, term = item
            if fits_u64(term):
                self.apply(root, term, 0, 0, failing, out)
            else:
                self.apply(root, term & MASK64, term >> TASK_SHIFT, (term >> 64) & 1, failing, out)
        return out

    @cython.locals(k=cython.Py_ssize_t)
    def apply_packed(self, words: memoryview | array, failing: bool, out: list) -> int:
        """``apply`` each pair of packed acks, read as their 64-bit words."""
        for k in range(0, len(words), 2):
            self.apply(words[k], words[k + 1], 0, 0, failing, out)
        return 0

    @cython.locals(k=cython.Py_ssize_t, rest=cython.ulonglong, age=cython.int)
    def rotate(self) -> list[Outcome]:
        """Advance timeouts; trees untouched for ``buckets`` rotations fail back to their
        spout (those whose init never came are dropped)."""
        out: list[Outcome] = []
        self.rotation = (self.rotation + 1) & 0xFFFF
        k = 0
        while k < WORDS * self.cap:
            rest = self.table[k + 2]
            if rest & USED:
                age = (self.rotation - ((rest & TOUCHED) >> TOUCHED_SHIFT)) & 0xFFFF
                if age >= self.buckets:
                    if rest & TASK1:
                        out.append(((rest & TASK1) - 1, self.table[k], False))
                    self.remove(k)
                    continue  # an entry shifted back into slot k is looked at too
            k += WORDS
        return out


def _packed_words(packed: bytes) -> memoryview | array:
    """Packed acks as their 64-bit words: read in place where this host is little-endian,
    as the format is; else a swapped copy."""
    if sys.byteorder == "little":
        return memoryview(packed).cast("Q")
    words = array("Q", packed)
    words.byteswap()
    return words


def _single(outcomes: list[Outcome]) -> Outcome | None:
    return outcomes[0] if outcomes else None
