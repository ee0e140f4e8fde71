# The pending trees' C declarations (Cython's pure-Python mode: pending.py is the one
# source, this file types it where it is compiled).  squall/worker/executors/emit.pxd cimports
# PendingTrees: the spout emit adds a tree in C, with no tuple or int made for it.
from libc.stdint cimport uint64_t

cdef uint64_t GOLDEN
cdef Py_ssize_t START


cdef class PendingTrees:
    cdef unsigned long long[::1] roots
    cdef double[::1] emitted
    cdef unsigned int[::1] put_in
    cdef list tasks, msg_ids
    cdef Py_ssize_t cap, n
    cdef unsigned int rotation

    cdef Py_ssize_t slot_of(self, uint64_t root)
    cdef void remove(self, Py_ssize_t i)
    cdef int grow(self) except -1
    # cpdef: emit.py calls it from the interpreter too, run from its edited source beside this build
    cpdef int add(self, uint64_t root, object task, object msg_id, double t0) except -1
    cdef object take(self, uint64_t root)
