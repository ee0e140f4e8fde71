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
# Ids leave ints through PyLong_AsUnsignedLong (64 bits on LP64): 3.11's PyLong_AsUnsignedLongLong
# converts a multi-digit int byte by byte (_PyLong_AsByteArray).
from cpython.long cimport PyLong_AsUnsignedLong, PyLong_FromUnsignedLongLong
from cpython.mem cimport PyMem_Malloc
from libc.stdint cimport uint64_t

TICK_STREAM = "__tick"

cdef extern from "Python.h":
    int _PyLong_Sign(object v)
    size_t _PyLong_NumBits(object v) except? <size_t>-1


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
                t.root = PyLong_AsUnsignedLong(root)
                t.edge = PyLong_AsUnsignedLong(edge)
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


# -- values records from a free list ----------------------------------------------
#
# Every emit makes a values record, an instance of a namedtuple class: CPython
# allocates it as any heap type's instance (malloc, zeroed, its type's reference
# taken, tracked by the collector) and frees it through subtype_dealloc's general
# path, about a tenth of a bolt's time on the word count.  The record types Squall
# makes (squall.topology.tuple.record_type, through pool_records) are freed here
# instead: a dead record keeps its memory in a free list of its length, as CPython
# keeps plain tuples, and the next record of that length of any pooled type is made
# from it.  Pooled types have the tuple's layout and nothing more (no __dict__, no
# weak references, no finalizer), so a record needs no more than its items and its
# type reference dropped.  Only with the GIL, as every allocation and free is.

cdef extern from "Python.h":
    ctypedef void (*destructor)(PyObject*)
    ctypedef void (*freefunc)(void*)
    ctypedef struct RecordTypeObject "PyTypeObject":
        destructor tp_dealloc
        freefunc tp_free
        void* tp_finalize
        void* tp_del
    RecordTypeObject* Py_TYPE(PyObject* o)
    void Py_SET_TYPE(PyObject* o, RecordTypeObject* t)
    Py_ssize_t Py_SIZE(PyObject* o)
    void _Py_NewReference(PyObject* o)
    void PyObject_GC_Track(void* o)
    void PyObject_GC_UnTrack(void* o)
    void Py_DECREF(PyObject* o)
    void Py_XDECREF(PyObject* o)

cdef extern from *:
    """
    #define squall_record_items(op) (((PyTupleObject *)(op))->ob_item)
    #define squall_prefetch(p) __builtin_prefetch(p)
    """
    PyObject** squall_record_items(PyObject* op)
    void squall_prefetch(const void* p)

cdef enum:
    HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE
    POOLED_LENGTHS = 9  # records of 1 to 8 values are pooled
    POOL_MAX = 16384    # records kept per length: a bolt frees 8K at once on the word count

# Per length, a stack of the dead records' addresses (allocated at the first one).  Not
# a list linked through the records: taking one would read its memory, cold by the time
# the wire's decoder takes a frame's worth of them (a cluster worker spent 4% of its
# time waiting on those reads).
cdef PyObject** pool[POOLED_LENGTHS]
cdef Py_ssize_t pool_size[POOLED_LENGTHS]


cdef void record_dealloc(PyObject* op) noexcept:
    """A pooled record type's tp_dealloc: what subtype_dealloc and tupledealloc do for
    the tuple's layout (which is all a pooled type has), the memory kept if there is
    room.  Not a call to subtype_dealloc: it would take this function for the base's
    deallocator and call it back.  A subclass's instance (whose subtype_dealloc has
    cleared what the subclass added) arrives here too, and is freed."""
    cdef Py_ssize_t n = Py_SIZE(op)
    cdef Py_ssize_t i
    cdef PyObject** items = squall_record_items(op)
    cdef PyObject* item
    cdef RecordTypeObject* t = Py_TYPE(op)
    PyObject_GC_UnTrack(op)
    for i in range(n):
        item = items[i]
        items[i] = NULL
        Py_XDECREF(item)
    if (0 < n < POOLED_LENGTHS and pool_size[n] < POOL_MAX and t.tp_dealloc == record_dealloc
            and (pool[n] != NULL or new_pool(n))):
        pool[n][pool_size[n]] = op
        pool_size[n] += 1
    else:
        t.tp_free(op)
    Py_DECREF(<PyObject*>t)  # last: the record held a reference to its type, as any heap type's


cdef bint new_pool(Py_ssize_t n) noexcept:
    pool[n] = <PyObject**>PyMem_Malloc(POOL_MAX * sizeof(PyObject*))
    return pool[n] != NULL


cdef object new_record(type record, Py_ssize_t n):
    """An empty record (its items NULL) of ``n`` values of ``record``, which
    :func:`is_values_record`: from the free list when ``record`` is pooled.  It is
    left untracked by the cyclic collector: the caller fills it, then calls
    ``track_unless_atomic``."""
    cdef PyObject* op
    cdef RecordTypeObject* t = <RecordTypeObject*>record
    if n <= 0 or n >= POOLED_LENGTHS or pool_size[n] == 0 or t.tp_dealloc != record_dealloc:
        vals = PyType_GenericAlloc(record, n)
        PyObject_GC_UnTrack(<PyObject*>vals)  # (untracked until filled: track_unless_atomic)
        return vals
    pool_size[n] -= 1
    op = pool[n][pool_size[n]]
    if pool_size[n]:
        squall_prefetch(pool[n][pool_size[n] - 1])  # the next one's header, written next time
    Py_INCREF(<PyObject*>record)
    Py_SET_TYPE(op, t)
    _Py_NewReference(op)
    vals = <object>op  # a second reference: the one _Py_NewReference made is dropped below
    Py_DECREF(op)
    return vals  # untracked, its items NULL: the caller fills it, then track_unless_atomic


def pool_records(type record):
    """Free ``record``'s instances into the free list (a namedtuple class Squall made,
    which :func:`is_values_record`; anything else is refused)."""
    cdef RecordTypeObject* t = <RecordTypeObject*>record
    if (not is_values_record(record) or not record.__flags__ & HEAPTYPE or t.tp_finalize != NULL
            or t.tp_del != NULL or type(record) is not type):
        raise TypeError(f"not a plain values record: {record!r}")
    t.tp_dealloc = record_dealloc


def pooled_records():
    """How many dead records wait in the free list, by length (for tests)."""
    return {n: pool_size[n] for n in range(1, POOLED_LENGTHS) if pool_size[n]}


# Not tracked by the cyclic collector: a Tuple holds strings, a task number, a values
# record and an anchors map of ints, and is in no cycle unless a bolt builds one by
# assigning a container holding the tuple to its own field.  Untracked, a tuple costs
# no collector bookkeeping when made or freed, nor any scan while it waits in a queue.
@cython.no_gc
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

    def __delattr__(self, name):
        # Its fields are read by C code that takes them to be objects (see below)
        raise AttributeError(f"a tuple's {name} cannot be deleted")


# -- its fields as slots ------------------------------------------------------------
#
# Cython makes a ``cdef public`` field a property (a getset descriptor), and
# CPython 3.11 never specializes reading one: every ``tup.values`` in a
# bolt's ``process`` took the generic attribute lookup and a call to the
# getter.  The fields are read instead through member descriptors at the same
# offsets, what ``__slots__`` makes (the pure twin's are), which the
# interpreter reads inline once it has seen one.  Writes go through them too;
# deleting one would leave C code a NULL to read, so Tuple refuses it.

cdef extern from "structmember.h":
    ctypedef struct PyMemberDef:
        const char* name
        int type
        Py_ssize_t offset
        int flags
        const char* doc
    enum: T_OBJECT_EX
    object PyDescr_NewMember(type t, PyMemberDef* member)

cdef extern from "Python.h":
    ctypedef struct FieldsTypeObject "PyTypeObject":
        PyObject* tp_dict
    void PyType_Modified(type t)
    int PyDict_SetItemString(PyObject* d, const char* key, object value) except -1

cdef PyMemberDef slot_fields[4]  # kept for as long as the descriptors that point at them
cdef const char* SLOT_NAMES[4]
SLOT_NAMES[:] = [b"component", b"stream", b"task", b"values"]


cdef Py_ssize_t offset_of(Tuple probe, object marker) except -1:
    """Where in a Tuple the field holding ``marker`` is (Cython does not give a
    field's offset: the probe's words are searched for the marker's address)."""
    cdef void** words = <void**><PyObject*>probe
    cdef Py_ssize_t i
    for i in range(Tuple.__basicsize__ // sizeof(void*)):
        if words[i] == <void*>marker:
            return i * sizeof(void*)
    raise RuntimeError("a Tuple field was not found in its layout")


cdef int fields_as_slots() except -1:
    cdef Tuple probe = Tuple.__new__(Tuple)
    cdef FieldsTypeObject* t = <FieldsTypeObject*>Tuple
    markers = [object() for _ in range(4)]
    probe.component, probe.stream, probe.task, probe.values = markers
    for i in range(4):
        slot_fields[i].name = SLOT_NAMES[i]
        slot_fields[i].type = T_OBJECT_EX
        slot_fields[i].offset = offset_of(probe, markers[i])
        slot_fields[i].flags = 0
        slot_fields[i].doc = NULL
        PyDict_SetItemString(t.tp_dict, slot_fields[i].name, PyDescr_NewMember(Tuple, &slot_fields[i]))
    PyType_Modified(Tuple)
    return 0


fields_as_slots()
