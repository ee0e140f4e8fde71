# cython: language_level=3, boundscheck=False, wraparound=False
"""The acker's XOR ledger as a C hash table: ``squall.acker.ledger.AckLedger``'s twin.

The pure ledger keeps a pending tree as one Python int (ack value, failed bit,
spout task) in one of a RotatingMap's dicts, and each event makes and frees
ints and moves the entry between dicts.  Here a tree is a 24-byte record in one
open-addressing table (linear probing, deletion by shifting back, no
tombstones): its root, its ack value, its spout task + 1 (0 until the spout's
init arrives) and failed flag, and the rotation it was last touched in.  The
table grows at three quarters full, so a tree costs 32 to 64 bytes, against
88 in the pure one.

Timeouts keep the RotatingMap's meaning without its buckets: ``rotate`` counts
rotations, and a tree untouched for ``buckets`` of them expires (one pass over
the table, once a timeout / (buckets - 1): every 15 s by default).

Events and outcomes are the pure ledger's, in the same order
(tests/acker/test_ledger.py runs both).  Built by ``python -m squall.compiled
build``; ``squall.acker.ledger`` takes it where the build is there.
"""

# Ids leave ints through PyLong_AsUnsignedLong (64 bits on LP64): 3.11's PyLong_AsUnsignedLongLong
# converts a multi-digit int byte by byte (_PyLong_AsByteArray).
from cpython.long cimport PyLong_AsUnsignedLong, PyLong_FromUnsignedLongLong
from cpython.mem cimport PyMem_Calloc, PyMem_Free
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t
# PAIR_BYTES and get_le64: the packed acks' format, in typed_ledger.pxd

cdef extern from "Python.h":
    ctypedef struct PyObject
    PyObject* PyList_GET_ITEM(object o, Py_ssize_t i)
    PyObject* PyTuple_GET_ITEM(object o, Py_ssize_t i)
    Py_ssize_t PyTuple_GET_SIZE(object o)
    char* PyBytes_AS_STRING(object b)
    Py_ssize_t PyBytes_GET_SIZE(object b)
    int _PyLong_Sign(object v)
    size_t _PyLong_NumBits(object v) except? <size_t>-1

cdef object MASK64 = (1 << 64) - 1
cdef object FAILED_BIT = 1 << 64
cdef enum:
    TASK_SHIFT = 65
    START = 1024  # slots of a new ledger


cdef inline bint fits_u64(object v):
    """An int that is a 64-bit unsigned value (checked in C, no method call)."""
    return type(v) is int and _PyLong_Sign(v) >= 0 and _PyLong_NumBits(v) <= 64


cdef struct Entry:
    uint64_t root
    uint64_t val
    uint32_t task1   # spout task + 1; 0: the init has not arrived
    uint16_t touched  # the rotation it was last updated in (mod 2**16)
    uint8_t failed
    uint8_t used


cdef class AckLedger:
    cdef Entry* table
    cdef Py_ssize_t cap, n
    cdef uint16_t rotation
    cdef int buckets

    def __cinit__(self, int buckets=3):
        if buckets < 2:
            raise ValueError(f"a RotatingMap needs at least 2 buckets, got {buckets}")
        self.buckets = buckets
        self.rotation = 0
        self.n = 0
        self.cap = START
        self.table = <Entry*>PyMem_Calloc(START, sizeof(Entry))
        if self.table == NULL:
            raise MemoryError()

    def __dealloc__(self):
        PyMem_Free(self.table)

    def __len__(self):
        return self.n

    # -- the table ---------------------------------------------------------

    cdef inline Py_ssize_t home(self, uint64_t root):
        # Roots are random 64-bit ids, but a spout chooses their residue (its acker's
        # index): a multiplicative hash's high bits spread them whatever the low ones.
        return <Py_ssize_t>((root * <uint64_t>0x9E3779B97F4A7C15) >> 32) & (self.cap - 1)

    cdef inline Py_ssize_t slot_of(self, uint64_t root):
        """The slot holding ``root``, or the empty slot where it would go."""
        cdef Py_ssize_t mask = self.cap - 1
        cdef Py_ssize_t i = self.home(root)
        while self.table[i].used and self.table[i].root != root:
            i = (i + 1) & mask
        return i

    cdef void remove(self, Py_ssize_t i):
        """Empty slot ``i``, shifting back the entries after it that probed past it."""
        cdef Py_ssize_t mask = self.cap - 1
        cdef Py_ssize_t j = i, home
        while True:
            j = (j + 1) & mask
            if not self.table[j].used:
                break
            home = self.home(self.table[j].root)
            # j's entry may fill the hole at i if its home is not in (i, j], cyclically
            if (j > i and (home <= i or home > j)) or (j < i and home <= i and home > j):
                self.table[i] = self.table[j]
                i = j
        self.table[i].used = 0
        self.n -= 1

    cdef int grow(self) except -1:
        cdef Entry* old = self.table
        cdef Py_ssize_t old_cap = self.cap, k, i
        cdef Entry* table = <Entry*>PyMem_Calloc(old_cap * 2, sizeof(Entry))
        if table == NULL:
            raise MemoryError()
        self.table = table
        self.cap = old_cap * 2
        for k in range(old_cap):
            if old[k].used:
                i = self.slot_of(old[k].root)
                self.table[i] = old[k]
        PyMem_Free(old)
        return 0

    cdef int apply(self, uint64_t root, uint64_t val, uint32_t task1, uint8_t failed, bint failing,
                   list out) except -1:
        """One event: XOR (or, failing, OR) into the tree; its outcome appended if it ended."""
        cdef Py_ssize_t i = self.slot_of(root)
        cdef Entry* e = &self.table[i]
        if not e.used:
            if 4 * (self.n + 1) > 3 * self.cap:
                self.grow()
                i = self.slot_of(root)
                e = &self.table[i]
            e.used = 1
            e.root = root
            e.val = 0
            e.task1 = 0
            e.failed = 0
            self.n += 1
        if failing:
            e.val |= val
            e.task1 |= task1
            e.failed |= failed
        else:
            e.val ^= val
            e.task1 ^= task1
            e.failed ^= failed
        e.touched = self.rotation
        if e.task1:
            if e.failed:
                out.append((e.task1 - 1, PyLong_FromUnsignedLongLong(root), False))
                self.remove(i)
            elif e.val == 0:
                out.append((e.task1 - 1, PyLong_FromUnsignedLongLong(root), True))
                self.remove(i)
        return 0

    # -- the pure ledger's API ----------------------------------------------

    def init(self, root, val, spout_task):
        """The spout emitted tree ``root``: ``val`` is the XOR of its edge ids."""
        return _single(self.init_many([(root, val, spout_task)]))

    def ack(self, root, val):
        """A bolt acked: ``val`` = its tuple's edge id XOR its children's edge ids."""
        return _single(self.ack_many([(root, val)]))

    def fail(self, root):
        return _single(self.fail_many([root]))

    def init_many(self, list items):
        """``init`` for each (root, val, spout task); the outcomes, in order."""
        cdef list out = []
        cdef Py_ssize_t k
        for k in range(len(items)):
            item = <object>PyList_GET_ITEM(items, k)
            root, val, task = item
            self.apply(PyLong_AsUnsignedLong(root), PyLong_AsUnsignedLong(val), task + 1, 0, False, out)
        return out

    def fail_many(self, list roots):
        cdef list out = []
        for root in roots:
            self.apply(PyLong_AsUnsignedLong(root), 0, 0, 1, True, out)
        return out

    def ack_many(self, items, bint failing=False):
        """XOR each (root, term) into its tree; the trees that completed or failed.  A term
        wider than 64 bits carries the pure ledger's failed bit and task above them.
        ``items`` are pairs, or the bytes squall.acker.ledger.PACKED_ACK packs them into."""
        cdef list out = []
        cdef Py_ssize_t k, n
        cdef PyObject* term
        cdef const unsigned char* p
        if type(items) is bytes:
            n = PyBytes_GET_SIZE(items)
            if n % PAIR_BYTES:
                raise ValueError(f"packed acks are {PAIR_BYTES}-byte pairs, not {n} bytes")
            p = <const unsigned char*>PyBytes_AS_STRING(items)
            for k in range(0, n, PAIR_BYTES):
                self.apply(get_le64(p + k), get_le64(p + k + 8), 0, 0, failing, out)
            return out
        if type(items) is not list:
            raise TypeError(f"acks are a list of pairs or packed bytes, not {type(items).__name__}")
        for k in range(len(items)):
            item = <object>PyList_GET_ITEM(items, k)
            if type(item) is tuple and PyTuple_GET_SIZE(item) == 2:
                root = <object>PyTuple_GET_ITEM(item, 0)
                term = PyTuple_GET_ITEM(item, 1)
            else:
                root, value = item
                term = <PyObject*>value
            if fits_u64(<object>term):
                self.apply(PyLong_AsUnsignedLong(root), PyLong_AsUnsignedLong(<object>term), 0, 0,
                           failing, out)
            else:
                wide = <object>term
                self.apply(PyLong_AsUnsignedLong(root), PyLong_AsUnsignedLong(wide & MASK64),
                           wide >> TASK_SHIFT, (wide >> 64) & 1, failing, out)
        return out

    def rotate(self):
        """Advance timeouts; trees untouched for ``buckets`` rotations fail back to their spout
        (those whose init never came are dropped)."""
        cdef list out = []
        cdef Py_ssize_t i = 0
        cdef uint16_t age
        self.rotation += 1
        while i < self.cap:
            if self.table[i].used:
                age = self.rotation - self.table[i].touched
                if age >= self.buckets:
                    if self.table[i].task1:
                        out.append((self.table[i].task1 - 1, PyLong_FromUnsignedLongLong(self.table[i].root),
                                    False))
                    self.remove(i)
                    continue  # an entry shifted back into slot i is looked at too
            i += 1
        return out


def _single(list outcomes):
    return outcomes[0] if outcomes else None
