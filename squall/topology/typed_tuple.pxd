# The typed Tuple's fields, for the accelerators that read and fill them in C
# (squall/worker/fastwire.pyx, squall/worker/typed_emit.pyx).  See typed_tuple.pyx.
from libc.stdint cimport uint64_t

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
