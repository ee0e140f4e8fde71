# The typed Tuple's fields and its values record, for the accelerators that read and
# fill them in C (squall/worker/wire/fastwire.pyx, squall/worker/executors/typed_core.pyx).  See
# typed_tuple.pyx.
from libc.stdint cimport uint64_t


cdef extern from "Python.h":
    ctypedef struct PyObject
    object PyType_GenericAlloc(type t, Py_ssize_t nitems)
    PyObject* PyList_GET_ITEM(object o, Py_ssize_t i)
    PyObject* PyTuple_GET_ITEM(object o, Py_ssize_t i)
    void PyTuple_SET_ITEM(object o, Py_ssize_t i, PyObject* v)
    void Py_INCREF(PyObject* o)

cdef extern from *:
    """
    static inline int squall_is_atomic(PyObject *o) {
        PyTypeObject *t = Py_TYPE(o);
        return t == &PyUnicode_Type || t == &PyLong_Type || t == &PyFloat_Type || o == Py_None
            || t == &PyBool_Type || t == &PyBytes_Type;
    }
    #define squall_gc_track(o) PyObject_GC_Track(o)
    """
    bint squall_is_atomic(PyObject* o)  # a string, number, bytes or None: no reference out
    void squall_gc_track(PyObject* o)

cdef enum:
    NO_ANCHORS = 0  # untracked: ``anchors`` is None
    ONE_ROOT = 1    # one tree: its root and this tuple's edge in it, as C integers
    ROOT_MAP = 2    # anything else: the {root: edge} dict itself, in ``amap``


cdef class Tuple:
    cdef public object component, stream, task, values
    cdef object tid          # the id, unless ``id_is_edge``
    cdef bint id_is_edge     # the id is the edge (an emit's only edge): no int made for it
    cdef unsigned char form  # NO_ANCHORS, ONE_ROOT or ROOT_MAP
    cdef uint64_t root, edge
    cdef object amap
    cdef uint64_t ack        # the XOR of the edges of the tuples anchored to this one


cdef int set_anchors(Tuple t, object anchors) except -1
cdef object anchors_of(Tuple t)
cdef object id_of(Tuple t)


cdef inline Tuple bare_tuple(object tid, object component, object stream, object task, object values):
    """A Tuple from the free list, without anchors, filled with no call to ``__init__``."""
    cdef Tuple t = Tuple.__new__(Tuple)
    t.tid = tid
    t.id_is_edge = False
    t.component = component
    t.stream = stream
    t.task = task
    t.values = values
    t.form = NO_ANCHORS
    t.amap = None
    t.ack = 0
    return t


cdef inline bint is_values_record(object record):
    """A values record type that adds nothing to tuple (a namedtuple's): one that can be
    allocated and filled as a tuple is."""
    return (isinstance(record, type) and (<type>record).__base__ is tuple
            and (<type>record).__basicsize__ == (<type>tuple).__basicsize__)


cdef object new_record(type record, Py_ssize_t n)


cdef inline void track_unless_atomic(object vals, Py_ssize_t n):
    """Put a filled record in the cyclic collector's reach if one of its values could
    lead back to it.  A record is made untracked (``new_record``): one of strings and
    numbers, nearly every record, is in no cycle (CPython leaves such tuples untracked
    too), and the collector need neither link it on each emit nor scan it in queues."""
    cdef Py_ssize_t i
    for i in range(n):
        if not squall_is_atomic(PyTuple_GET_ITEM(vals, i)):
            squall_gc_track(<PyObject*>vals)
            return


cdef inline object filled_record(type record, object values, Py_ssize_t n):
    """``record(*values)`` for a list or tuple of ``n`` values and a record that
    :func:`is_values_record`, allocated and filled with no call to its type."""
    cdef Py_ssize_t i
    cdef PyObject* item
    cdef bint is_list = type(values) is list
    vals = new_record(record, n)
    for i in range(n):
        item = PyList_GET_ITEM(values, i) if is_list else PyTuple_GET_ITEM(values, i)
        Py_INCREF(item)
        PyTuple_SET_ITEM(vals, i, item)
    track_unless_atomic(vals, n)
    return vals
