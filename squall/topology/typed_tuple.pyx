# cython: language_level=3
"""The Tuple, typed: the same class as ``squall.topology.tuple.Tuple``, in C.

Every tuple the engine moves is one of these when the build is there
(``python -m squall.compiled build``); ``squall.topology.tuple`` takes it in
place of its pure-Python twin, which stays the reference and is tested
against it (tests/topology/test_typed_tuple.py).

What it saves is the Python objects acking made per tuple.  A tuple in one
tree (nearly all of them) keeps its root and edge id as two C integers, not
a ``{root: edge}`` dict and two ints; its id, being that edge, is made into
an int only if someone reads it; ``ackval`` is a C integer the emitters XOR
into.  Tuples come from a free list, so a bolt's steady state allocates none.
``anchors`` still reads as the dict (built on demand) for the code that is
not on the hot path, and any other map (several trees, or ids that are not
64-bit) is kept as it is given.
"""

cimport cython
from cpython.long cimport PyLong_FromUnsignedLongLong
from libc.stdint cimport uint64_t

TICK_STREAM = "__tick"

cdef extern from "Python.h":
    int _PyLong_Sign(object v)
    size_t _PyLong_NumBits(object v) except? <size_t>-1
    unsigned long long PyLong_AsUnsignedLongLong(object v) except? <unsigned long long>-1


cdef inline bint is_u64(object v):
    return type(v) is int and _PyLong_Sign(v) >= 0 and _PyLong_NumBits(v) <= 64


cdef int set_anchors(Tuple t, object anchors) except -1:
    """Keep ``anchors`` (None or a {root: edge} dict) in the form that holds it."""
    t.amap = None
    if anchors is None:
        t.form = NO_ANCHORS
        return 0
    if type(anchors) is dict and len(<dict>anchors) == 1:
        for root, edge in (<dict>anchors).items():
            if is_u64(root) and is_u64(edge):
                t.root = PyLong_AsUnsignedLongLong(root)
                t.edge = PyLong_AsUnsignedLongLong(edge)
                t.form = ONE_ROOT
                return 0
    t.form = ROOT_MAP
    t.amap = anchors
    return 0


cdef object anchors_of(Tuple t):
    if t.form == ONE_ROOT:
        return {PyLong_FromUnsignedLongLong(t.root): PyLong_FromUnsignedLongLong(t.edge)}
    return t.amap


cdef object id_of(Tuple t):
    if t.id_is_edge:
        return PyLong_FromUnsignedLongLong(t.edge)
    return t.tid


@cython.freelist(1024)
cdef class Tuple:
    """One tuple as a bolt sees it (the pure-Python twin's docstring says what each field is)."""

    def __init__(self, id, component, stream, task, values, anchors=None):  # noqa: A002
        self.tid = id
        self.id_is_edge = False
        self.component = component
        self.stream = stream
        self.task = task
        self.values = values
        self.ack = 0
        set_anchors(self, anchors)

    @property
    def id(self):
        return id_of(self)

    @id.setter
    def id(self, value):
        self.tid = value
        self.id_is_edge = False

    @property
    def anchors(self):
        return anchors_of(self)

    @anchors.setter
    def anchors(self, value):
        if self.id_is_edge:  # the id was this edge: keep it when the edge goes
            self.tid = PyLong_FromUnsignedLongLong(self.edge)
            self.id_is_edge = False
        set_anchors(self, value)

    @property
    def ackval(self):
        return PyLong_FromUnsignedLongLong(self.ack)

    @ackval.setter
    def ackval(self, value):
        self.ack = value & 0xFFFFFFFFFFFFFFFF

    def __getitem__(self, field):
        return getattr(self.values, field)

    @property
    def is_tick(self):
        return self.stream == TICK_STREAM

    def __repr__(self):
        vals = tuple(self.values)
        return (f"Tuple(id={self.id!r}, component={self.component!r}, stream={self.stream!r}, "
                f"task={self.task!r}, values={vals!r})")

    def __reduce__(self):
        return (Tuple, (self.id, self.component, self.stream, self.task, self.values, self.anchors),
                {"ackval": self.ackval})

    def __setstate__(self, state):
        self.ackval = state["ackval"]
