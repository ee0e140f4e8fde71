# cython: language_level=3, boundscheck=False, wraparound=False
"""A spout's pending trees as a C hash table: ``collector.PendingTrees``'s twin.

The pure table keeps a tree as a dict entry in one of a RotatingMap's two
dicts, its root a Python int and its value a tuple of the spout task, the
message id and the emit time (a float): about 170 bytes a tree, and each emit
and each ack makes or frees four objects.  Here a tree is a 40-byte record in
one open-addressing table (linear probing, deletion by shifting back, no
tombstones): its root and emit time as C numbers, references to its task and
message id, and the rotation it was put in.  The table grows at three quarters
full, so a tree costs 53 to 107 bytes.

Timeouts keep the RotatingMap's meaning (two buckets: a tree put between two
rotations expires at the second) without its buckets: ``rotate`` counts
rotations and takes the trees put before the last one, in one pass over the
table, once a message timeout.

:func:`settle` is the spout executor's loop over an ack or fail message from
the acker, in C.  tests/worker/test_typed_pending.py runs both twins on the
same histories.  Built by ``python -m squall.compiled build``; without the
build the twin runs.
"""

# Ids leave ints through PyLong_AsUnsignedLong (64 bits on LP64): 3.11's PyLong_AsUnsignedLongLong
# converts a multi-digit int byte by byte (_PyLong_AsByteArray).
from cpython.long cimport PyLong_AsUnsignedLong, PyLong_FromUnsignedLongLong
from cpython.mem cimport PyMem_Calloc, PyMem_Free
from cpython.ref cimport Py_XDECREF, Py_XINCREF
from libc.stdint cimport uint32_t, uint64_t

cdef extern from "Python.h":
    PyObject* PyList_GET_ITEM(object o, Py_ssize_t i)

cdef enum:
    START = 1024  # slots of a new table


# Slot (in typed_pending.pxd): a tree's root and emit time (the executor's clock), its
# spout task (owned; NULL: the slot is empty) and message id (owned), and the rotation
# it was put in.


cdef class PendingTrees:
    def __cinit__(self):
        self.n = 0
        self.rotation = 0
        self.cap = START
        self.table = <Slot*>PyMem_Calloc(START, sizeof(Slot))
        if self.table == NULL:
            raise MemoryError()

    def __dealloc__(self):
        cdef Py_ssize_t i
        if self.table != NULL:
            for i in range(self.cap):
                if self.table[i].task != NULL:
                    Py_XDECREF(self.table[i].task)
                    Py_XDECREF(self.table[i].msg_id)
        PyMem_Free(self.table)

    def __len__(self):
        return self.n

    def __contains__(self, root):
        return self.table[self.slot_of(PyLong_AsUnsignedLong(root))].task != NULL

    # -- the table ---------------------------------------------------------

    cdef Py_ssize_t home(self, uint64_t root):
        # A spout chooses a root's residue (its acker's index): a multiplicative hash's
        # high bits spread the roots whatever their low ones.
        return <Py_ssize_t>((root * <uint64_t>0x9E3779B97F4A7C15) >> 32) & (self.cap - 1)

    cdef Py_ssize_t slot_of(self, uint64_t root):
        """The slot holding ``root``, or the empty slot where it would go."""
        cdef Py_ssize_t mask = self.cap - 1
        cdef Py_ssize_t i = self.home(root)
        while self.table[i].task != NULL and self.table[i].root != root:
            i = (i + 1) & mask
        return i

    cdef void remove(self, Py_ssize_t i):
        """Empty slot ``i`` (its references already handed on), shifting back the
        entries after it that probed past it."""
        cdef Py_ssize_t mask = self.cap - 1
        cdef Py_ssize_t j = i, home
        while True:
            j = (j + 1) & mask
            if self.table[j].task == NULL:
                break
            home = self.home(self.table[j].root)
            # j's entry may fill the hole at i if its home is not in (i, j], cyclically
            if (j > i and (home <= i or home > j)) or (j < i and home <= i and home > j):
                self.table[i] = self.table[j]
                i = j
        self.table[i].task = NULL
        self.table[i].msg_id = NULL
        self.n -= 1

    cdef int grow(self) except -1:
        cdef Slot* old = self.table
        cdef Py_ssize_t old_cap = self.cap, k
        cdef Slot* table = <Slot*>PyMem_Calloc(old_cap * 2, sizeof(Slot))
        if table == NULL:
            raise MemoryError()
        self.table = table
        self.cap = old_cap * 2
        for k in range(old_cap):
            if old[k].task != NULL:
                self.table[self.slot_of(old[k].root)] = old[k]
        PyMem_Free(old)
        return 0

    cdef int add(self, uint64_t root, object task, object msg_id, double t0) except -1:
        """A new tree (its root a fresh random id); a root already pending is replaced."""
        cdef Py_ssize_t i = self.slot_of(root)
        cdef Slot* s = &self.table[i]
        if s.task != NULL:
            Py_XDECREF(s.task)
            Py_XDECREF(s.msg_id)
        else:
            if 4 * (self.n + 1) > 3 * self.cap:
                self.grow()
                s = &self.table[self.slot_of(root)]
            self.n += 1
        Py_XINCREF(<PyObject*>task)
        Py_XINCREF(<PyObject*>msg_id)
        s.root = root
        s.task = <PyObject*>task
        s.msg_id = <PyObject*>msg_id
        s.t0 = t0
        s.put_in = self.rotation
        return 0

    cdef object take(self, uint64_t root):
        """The tree's (task, message id, emit time), and it is no longer pending; None if
        it is not (already timed out here)."""
        cdef Py_ssize_t i = self.slot_of(root)
        cdef Slot* s = &self.table[i]
        if s.task == NULL:
            return None
        out = (<object>s.task, <object>s.msg_id, s.t0)
        Py_XDECREF(s.task)  # the tuple holds them now
        Py_XDECREF(s.msg_id)
        self.remove(i)
        return out

    # -- the pure table's API ----------------------------------------------

    def put_new(self, root, value):
        """``value`` = (task, message id, emit time) for a new tree ``root``."""
        task, msg_id, t0 = value
        self.add(PyLong_AsUnsignedLong(root), task, msg_id, t0)

    def pop(self, root, default=None):
        got = self.take(PyLong_AsUnsignedLong(root))
        return default if got is None else got

    def items(self):
        """(root, (task, message id, emit time)) of every pending tree, oldest first."""
        cdef Py_ssize_t i
        out = [(PyLong_FromUnsignedLongLong(self.table[i].root),
                (<object>self.table[i].task, <object>self.table[i].msg_id, self.table[i].t0))
               for i in range(self.cap) if self.table[i].task != NULL]
        out.sort(key=_emitted)
        return out

    def rotate(self):
        """Expire the trees put before the last rotation: {root: (task, message id, emit
        time)}, oldest first."""
        cdef Py_ssize_t i
        cdef list dead = []
        for i in range(self.cap):
            if self.table[i].task != NULL and self.table[i].put_in != self.rotation:
                dead.append((self.table[i].t0, PyLong_FromUnsignedLongLong(self.table[i].root)))
        self.rotation += 1
        dead.sort(key=_first)
        out = {}
        for _t0, root in dead:
            out[root] = self.take(PyLong_AsUnsignedLong(root))
        return out


cdef object _first(pair):
    return pair[0]


cdef object _emitted(item):
    return item[1][2]


def settle(PendingTrees pending, list roots, bint ok, double now, latencies, dict by_task):
    """The trees ``roots`` settled (acked if ``ok``, else failed): each the spout's ack
    or fail with its message id, its latency kept when acked.  Roots no longer pending
    (timed out here already) are skipped.  Returns (trees settled, seconds they waited)."""
    cdef Py_ssize_t k, settled = 0
    cdef double waited = 0.0, t0
    cdef Slot* s
    cdef Py_ssize_t i
    append = latencies.append
    for k in range(len(roots)):
        i = pending.slot_of(PyLong_AsUnsignedLong(<object>PyList_GET_ITEM(roots, k)))
        s = &pending.table[i]
        if s.task == NULL:
            continue
        task = <object>s.task
        msg_id = <object>s.msg_id
        t0 = s.t0
        Py_XDECREF(s.task)  # the locals hold them now
        Py_XDECREF(s.msg_id)
        pending.remove(i)
        settled += 1
        if ok:
            append(now - t0)
            waited += now - t0
            by_task[task].spout.ack(msg_id)
        else:
            by_task[task].spout.fail(msg_id)
    return settled, waited
