# The ledger's C declarations (Cython's pure-Python mode: ledger.py is the one source, this
# file types it where it is compiled; the interpreter never reads it).
from libc.stdint cimport uint64_t

cdef extern from "Python.h":
    int _PyLong_Sign(object v)
    size_t _PyLong_NumBits(object v) except? <size_t>-1

cdef uint64_t GOLDEN, USED, FAILED, TASK1, TOUCHED
cdef int TOUCHED_SHIFT, FAILED_SHIFT
cdef Py_ssize_t START, WORDS


cdef bint fits_u64(object v)


cdef class AckLedger:
    cdef unsigned long long[::1] table
    cdef Py_ssize_t cap, n
    cdef uint64_t rotation
    cdef int buckets

    cdef Py_ssize_t slot_of(self, uint64_t root)
    cdef void remove(self, Py_ssize_t at)
    cdef int grow(self) except -1
    cdef int apply(self, uint64_t root, uint64_t val, uint64_t task1, uint64_t failed, bint failing,
                   list out) except -1
    cdef int apply_packed(self, const unsigned long long[::1] words, bint failing, list out) except -1
