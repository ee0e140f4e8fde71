# A bolt's acks, typed (Cython's pure-Python mode: acks.py is the one source, this file
# types it where it is compiled; the interpreter never reads it).
from libc.stdint cimport uint64_t

from squall.topology.tuple cimport ack_of, edge_of, one_tree, root_of, roots_of
from squall.worker.executors.emit cimport TaskState

cdef bint BIG_ENDIAN


cdef class AckTable:
    cdef unsigned long long[::1] roots, vals  # in the order the roots came
    cdef long long[::1] index  # slot -> position in roots/vals, or -1
    cdef long long[::1] slots  # position -> its slot in the index
    cdef Py_ssize_t n, cap  # entries; index slots (a power of two, at least twice n)

    cdef int grow(self, Py_ssize_t cap) except -1
    cdef int put(self, uint64_t root, uint64_t val) except -1
    cdef int put_tuple(self, object tup) except -1
    cdef void clear(self) noexcept
