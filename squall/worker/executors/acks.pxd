# A bolt's acks, typed (Cython's pure-Python mode: acks.py is the one source, this file
# types it where it is compiled; the interpreter never reads it).
from libc.stdint cimport uint64_t

from squall.topology.tuple cimport ack_of, edge_of, one_tree, root_of, roots_of
from squall.worker.executors.emit cimport TaskState

cdef extern from "Python.h":
    bytes PyBytes_FromStringAndSize(const char* s, Py_ssize_t size)

cdef bint BIG_ENDIAN


cdef inline bytes packed_bytes(unsigned long long[::1] words, Py_ssize_t a, Py_ssize_t b):
    """Words ``a`` to ``b`` as bytes, copied once."""
    if b <= a:
        return b""
    return PyBytes_FromStringAndSize(<const char*>&words[a], 8 * (b - a))


cdef class AckTable:
    cdef unsigned long long[::1] roots, vals  # in the order the roots came
    cdef long long[::1] index  # slot -> position in roots/vals, or -1
    cdef long long[::1] slots  # position -> its slot in the index
    cdef Py_ssize_t n, cap  # entries; index slots (a power of two, at least twice n)
    cdef object packed  # drain_by's scratch, an array('Q') of cap words,
    cdef unsigned long long[::1] words  # read as C
    cdef long long[::1] starts, filled  # per acker: where its pairs start; how many are laid out
    cdef Py_ssize_t n_ackers  # the ackers starts and filled are sized for

    cdef int grow(self, Py_ssize_t cap) except -1
    cdef int put(self, uint64_t root, uint64_t val) except -1
    cdef int put_tuple(self, object tup) except -1
    cdef void clear(self) noexcept
