# The Tuple's C declarations (Cython's pure-Python mode: tuple.py is the one source, this
# file types it where it is compiled; the interpreter never reads it).  The hot-path modules
# that read and fill a Tuple in C (squall/worker/executors/emit.py and acks.py,
# squall/worker/wire/codec.py and reader.py) cimport its layout and the helpers below; in
# the interpreter they import tuple_fields.py's of the same names.
# Ids leave ints through PyLong_AsUnsignedLong (64 bits on LP64): 3.11's PyLong_AsUnsignedLongLong
# converts a multi-digit int byte by byte (_PyLong_AsByteArray).
from cpython.long cimport PyLong_AsUnsignedLong, PyLong_FromUnsignedLongLong
from cpython.mem cimport PyMem_Malloc
from libc.stdint cimport uint64_t


cdef extern from "Python.h":
    ctypedef struct PyObject
    object PyType_GenericAlloc(type t, Py_ssize_t nitems)
    PyObject* PyList_GET_ITEM(object o, Py_ssize_t i)
    PyObject* PyTuple_GET_ITEM(object o, Py_ssize_t i)
    void PyTuple_SET_ITEM(object o, Py_ssize_t i, PyObject* v)
    void Py_INCREF(PyObject* o)
    int _PyLong_Sign(object v)
    size_t _PyLong_NumBits(object v) except? <size_t>-1

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


# What the build keeps for ``id``, ``anchors`` and ``ackval`` (tuple.py's properties read
# and write them); the interpreter keeps those three as plain slots.
cdef class Tuple:
    cdef public object component, stream, task, values
    cdef object tid          # the id, unless ``id_is_edge``
    cdef bint id_is_edge     # the id is the edge (an emit's only edge): no int made for it
    cdef unsigned char form  # NO_ANCHORS, ONE_ROOT or ROOT_MAP
    cdef uint64_t root, edge
    cdef object amap
    cdef uint64_t ack        # the XOR of the edges of the tuples anchored to this one


cdef inline bint is_u64(object v):
    return type(v) is int and _PyLong_Sign(v) >= 0 and _PyLong_NumBits(v) <= 64


cdef inline int set_anchors(Tuple t, object anchors) except -1:
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


cdef inline object anchors_of(Tuple t):
    if t.form == ONE_ROOT:
        return {PyLong_FromUnsignedLongLong(t.root): PyLong_FromUnsignedLongLong(t.edge)}
    return t.amap


cdef inline object id_of(Tuple t):
    if t.id_is_edge:
        return PyLong_FromUnsignedLongLong(t.edge)
    return t.tid


cdef inline int set_id(Tuple t, object value) except -1:
    t.tid = value
    t.id_is_edge = False
    return 0


cdef inline int reset_anchors(Tuple t, object value) except -1:
    if t.id_is_edge:  # the id was this edge: keep it when the edge goes
        t.tid = PyLong_FromUnsignedLongLong(t.edge)
        t.id_is_edge = False
    return set_anchors(t, value)


cdef inline object ackval_of(Tuple t):
    return PyLong_FromUnsignedLongLong(t.ack)


cdef inline int set_ackval(Tuple t, object value) except -1:
    t.ack = value & 0xFFFFFFFFFFFFFFFF
    return 0


cdef inline int init_typed(Tuple t, object tid, object anchors) except -1:
    """What ``Tuple.__init__`` keeps in C besides the four plain fields."""
    t.tid = tid
    t.id_is_edge = False
    t.ack = 0
    return set_anchors(t, anchors)


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


# -- what the emitters and the acking loop read and write of any tuple -----------------
# (squall/worker/executors/emit.py; tuple_fields.py defines the same names for the interpreter.)
# A Tuple's C fields, or the ``anchors`` and ``ackval`` of any other object that has them.

cdef inline bint one_tree(object t) except -1:
    """A Tuple anchored in exactly one tree, kept as C integers (ONE_ROOT)."""
    return type(t) is Tuple and (<Tuple>t).form == ONE_ROOT


cdef inline uint64_t root_of(object t) noexcept:
    return (<Tuple>t).root  # (only of a tuple one_tree)


cdef inline uint64_t edge_of(object t) noexcept:
    return (<Tuple>t).edge  # (only of a tuple one_tree)


cdef inline object roots_of(object t):
    return anchors_of(<Tuple>t) if type(t) is Tuple else t.anchors


cdef inline uint64_t ack_of(object t) except? 0:
    if type(t) is Tuple:
        return (<Tuple>t).ack
    return PyLong_AsUnsignedLong(t.ackval)


cdef inline int add_ack(object t, uint64_t edge) except -1:
    if type(t) is Tuple:
        (<Tuple>t).ack ^= edge
    else:
        t.ackval ^= edge
    return 0


cdef inline Tuple tree_tuple(object component, object stream, object task, object values, uint64_t root,
                             uint64_t edge):
    """A tuple of one tree: its id is its edge."""
    cdef Tuple t = bare_tuple(None, component, stream, task, values)
    t.id_is_edge = True
    t.form = ONE_ROOT
    t.root = root
    t.edge = edge
    return t


cdef inline bint is_values_record(object record):
    """A values record type that adds nothing to tuple (a namedtuple's): one that can be
    allocated and filled as a tuple is."""
    return (isinstance(record, type) and (<type>record).__base__ is tuple
            and (<type>record).__basicsize__ == (<type>tuple).__basicsize__)


# An empty record from the free list (tuple.py's ``new_record``, a function of the Tuple's
# module so that every caller takes from the one free list).
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


# -- what the wire's encoder reads of a tuple --------------------------------------------
# (squall/worker/wire/codec.py; tuple_fields.py defines the same names for the interpreter.)

cdef inline bint row_in_fields(object t) noexcept:
    """A Tuple of one tree (ONE_ROOT): the encoder writes its row from its C fields, with no
    dict made for its anchors (nor an int for its id where it is its edge, ``id_is_edge``)."""
    return type(t) is Tuple and (<Tuple>t).form == ONE_ROOT


cdef inline bint id_is_edge(Tuple t) noexcept:
    """Its id is its edge (an emit's tuple of one tree, ``tree_tuple``), kept only in C."""
    return t.id_is_edge


# -- values records from a free list ----------------------------------------------
#
# Every emit makes a values record, an instance of a namedtuple class: CPython
# allocates it as any heap type's instance (malloc, zeroed, its type's reference
# taken, tracked by the collector) and frees it through subtype_dealloc's general
# path, about a tenth of a bolt's time on the word count.  The record types Squall
# makes (tuple.py's record_type, through pool_records) are freed here instead: a dead
# record keeps its memory in a free list of its length, as CPython keeps plain tuples,
# and the next record of that length of any pooled type is made from it.  Pooled types
# have the tuple's layout and nothing more (no __dict__, no weak references, no
# finalizer), so a record needs no more than its items and its type reference dropped.
# Only with the GIL, as every allocation and free is.
#
# The free list is static C: each module that cimports this file has its own copy of it
# and of record_dealloc, but only the Tuple's module uses them (pool_records sets its
# record_dealloc, its new_record takes from its list; the others call that new_record).

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

cdef enum:
    HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE
    POOLED_LENGTHS = 9  # records of 1 to 8 values are pooled
    POOL_MAX = 16384    # records kept per length: a bolt frees 8K at once on the word count

# Per length, a stack of the dead records' addresses (allocated at the first one).  Not
# a list linked through the records: taking one would read its memory, cold by the time
# the wire's decoder takes a frame's worth of them (a cluster worker spent 4% of its
# time waiting on those reads).
cdef extern from *:
    """
    #define squall_record_items(op) (((PyTupleObject *)(op))->ob_item)
    #define squall_prefetch(p) __builtin_prefetch(p)
    static PyObject** squall_pool[9];
    static Py_ssize_t squall_pool_size[9];
    """
    PyObject** squall_record_items(PyObject* op)
    void squall_prefetch(const void* p)
    PyObject** pool "squall_pool"[POOLED_LENGTHS]
    Py_ssize_t pool_size "squall_pool_size"[POOLED_LENGTHS]


cdef inline bint new_pool(Py_ssize_t n) noexcept:
    pool[n] = <PyObject**>PyMem_Malloc(POOL_MAX * sizeof(PyObject*))
    return pool[n] != NULL


cdef inline void record_dealloc(PyObject* op) noexcept:
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


cdef inline object pooled_record(type record, Py_ssize_t n):
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


cdef inline int pool_record_type(type record) except -1:
    """Free ``record``'s instances into the free list (refused unless a plain values record)."""
    cdef RecordTypeObject* t = <RecordTypeObject*>record
    if (not is_values_record(record) or not record.__flags__ & HEAPTYPE or t.tp_finalize != NULL
            or t.tp_del != NULL or type(record) is not type):
        raise TypeError(f"not a plain values record: {record!r}")
    t.tp_dealloc = record_dealloc
    return 0


cdef inline Py_ssize_t pooled_count(Py_ssize_t n) noexcept:
    return pool_size[n] if 0 < n < POOLED_LENGTHS else 0


# -- the Tuple's fields as slots ------------------------------------------------------
#
# Cython makes a ``cdef public`` field a property (a getset descriptor), and
# CPython 3.11 never specializes reading one: every ``tup.values`` in a
# bolt's ``process`` took the generic attribute lookup and a call to the
# getter.  The fields are read instead through member descriptors at the same
# offsets, what ``__slots__`` makes (the interpreter's Tuple has them), which the
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

cdef extern from *:
    """
    static PyMemberDef squall_slot_fields[4];  /* kept for as long as the descriptors */
    static const char* squall_slot_names[4] = {"component", "stream", "task", "values"};
    """
    PyMemberDef slot_fields "squall_slot_fields"[4]
    const char* SLOT_NAMES "squall_slot_names"[4]


cdef inline Py_ssize_t offset_of(Tuple probe, object marker) except -1:
    """Where in a Tuple the field holding ``marker`` is (Cython does not give a
    field's offset: the probe's words are searched for the marker's address)."""
    cdef void** words = <void**><PyObject*>probe
    cdef Py_ssize_t i
    for i in range(Tuple.__basicsize__ // sizeof(void*)):
        if words[i] == <void*>marker:
            return i * sizeof(void*)
    raise RuntimeError("a Tuple field was not found in its layout")


cdef inline int fields_as_slots() except -1:
    cdef Tuple probe = Tuple.__new__(Tuple)
    cdef FieldsTypeObject* t = <FieldsTypeObject*>Tuple
    cdef int i
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
