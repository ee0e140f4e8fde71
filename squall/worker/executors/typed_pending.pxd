# What squall/worker/executors/typed_core.pyx reads of typed_pending.pyx: the spout emit adds a
# tree to its executor's pending table in C, with no tuple or int made for it.
from libc.stdint cimport uint32_t, uint64_t


cdef extern from "Python.h":
    ctypedef struct PyObject


cdef struct Slot:
    uint64_t root
    double t0
    PyObject* task
    PyObject* msg_id
    uint32_t put_in


cdef class PendingTrees:
    cdef Slot* table
    cdef Py_ssize_t cap, n
    cdef uint32_t rotation

    cdef Py_ssize_t home(self, uint64_t root)
    cdef Py_ssize_t slot_of(self, uint64_t root)
    cdef void remove(self, Py_ssize_t i)
    cdef int grow(self) except -1
    cdef int add(self, uint64_t root, object task, object msg_id, double t0) except -1
    cdef object take(self, uint64_t root)
