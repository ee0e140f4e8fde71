# The emitters' C declarations (Cython's pure-Python mode: emit.py is the one source, this
# file types it where it is compiled; the interpreter never reads it).
from libc.stdint cimport uint64_t

from squall.topology.tuple cimport (
    Tuple,
    add_ack,
    bare_tuple,
    filled_record,
    is_values_record,
    one_tree,
    root_of,
    roots_of,
    set_anchors,
    tree_tuple,
)
from squall.worker.executors.pending cimport PendingTrees
from squall.worker.wire.codec cimport RemoteBatch

cdef uint64_t MASK64


cdef uint64_t rotl(uint64_t x, int k) noexcept


cdef class RandomIds:
    cdef uint64_t s0, s1, s2, s3

    cdef uint64_t next(self) noexcept


cdef class TaskState:
    cdef public object current
    cdef public long long emitted


cdef class StreamCounts:
    cdef public long long emitted, transferred


cdef class Out:
    cdef object record, route, fields, constant
    cdef Py_ssize_t nfields, key_index
    cdef bint direct, bare_record
    cdef dict memo
    cdef StreamCounts counts


cdef class Emitter:
    cdef object component, task, streams, check, capture, rand64, plain
    cdef public object debug  # the event logger's sampler, or None (squall.worker.event_log)
    cdef object vals, tasks  # what prepare() found, for the emit that called it
    cdef dict table, targets
    cdef bint always_check, c_ids
    cdef RandomIds ids
    cdef TaskState state

    cdef uint64_t new_id(self) except? 0
    cdef int put_into(self, object target, object tup) except -1
    cdef int prepare(self, object values, object stream, object direct_task) except -1
    cdef int untracked(self, object vals, tuple tasks, object stream) except -1


cdef class BoltEmit(Emitter):
    cdef public bint tracking, auto_anchor

    cdef int one_tree_children(self, object a, object vals, tuple tasks, object stream) except -1
    cdef int anchored(self, object vals, tuple tasks, object stream, object anchors) except -1


cdef class SpoutEmit(Emitter):
    cdef public object tracker, now, inits, immediate, acker_tasks
    cdef public PendingTrees pending
    cdef public Py_ssize_t n_ackers, n_local, turn
    cdef public tuple local
    cdef public uint64_t top

    cdef uint64_t new_root(self) except? 0
