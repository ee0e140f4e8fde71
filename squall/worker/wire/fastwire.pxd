# What squall/worker/executors/emit.py reads of fastwire.pyx: the batch an executor packs
# its rows for a task of another worker into, so that an emit of one tree writes its
# row there without making a Tuple first.  See fastwire.pyx.
from libc.stdint cimport uint64_t


cdef struct Buf:
    char* data
    Py_ssize_t size
    Py_ssize_t cap


cdef class RemoteBatch:
    cdef Buf buf
    cdef Py_ssize_t rows
    cdef list kept

    cdef int start(self) except -1
    cdef int put_tree(self, uint64_t edge, object task, object stream, object values,
                      uint64_t root) except -1
