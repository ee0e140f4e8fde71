# cython: language_level=3, boundscheck=False, wraparound=False
"""Frames in C: the encoder, the decoder, and the Tuples both ends build.

Encoding writes the bytes ``msgpack.packb`` writes, without its detour.

Every tuple that crosses workers is packed on the send thread, and in a
GIL'd worker that thread's time is time the executors do not get.  The
generic path (``squall.worker.wire.codec.encode``) first builds a
5-tuple per data row and then hands the whole structure to msgpack; here
the rows are read off the ``Tuple`` objects and written straight into one
buffer.  The bytes are exactly those ``msgpack.packb(..., use_bin_type=True)``
gives for the same messages (the tests compare them), so the receiving side
and its checks do not know which encoder ran.

Only the value types the emit check lets through as plain are handled
(None, bool, int, float, str, bytes, and lists, tuples and dicts of them);
for anything else (a TransactionAttempt, a bytearray, a value msgpack
itself would refuse) :func:`encode` returns None and the caller takes the
generic path, which also names whoever emitted a value it cannot pack.

A :class:`RemoteBatch` does the packing earlier still: an executor's rows for a
task of another worker are written as they are emitted, in the emitting
thread, and :func:`encode` copies them into the frame as they are.

Decoding (:func:`decode`) reads a frame's data rows straight into Tuples:
the checks of ``WireValidator`` on each row, then the values record and the
``Tuple`` filled in place, with no list per row or per values and the
stream's name shared, where msgpack and Python would build and drop them.
It declines (None) any frame it does not read exactly as msgpack would, or
in which a data message fails a check, and the validator's own path takes
it, counting what it refuses; :func:`tuples` is the same step for rows
msgpack already unpacked.

Built by ``python -m squall.compiled build`` like the hot-path modules; a
process without the build (no compiler, ``SQUALL_PURE_PYTHON=1``) uses the
generic path alone.
"""

from cpython.list cimport PyList_New, PyList_SET_ITEM
# 3.11's PyLong_AsUnsignedLongLong converts a multi-digit int byte by byte (_PyLong_AsByteArray).
from cpython.long cimport PyLong_AsUnsignedLong
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from libc.stdint cimport uint64_t
from libc.string cimport memcmp, memcpy, memset

from squall.topology.tuple cimport (
    ONE_ROOT,
    Tuple,
    bare_tuple,
    filled_record,
    is_values_record,
    new_record,
    set_anchors,
    track_unless_atomic,
)

cdef extern from "Python.h":
    ctypedef struct PyObject
    int _PyLong_Sign(object v)
    size_t _PyLong_NumBits(object v) except? <size_t>-1
    # No exception clause: a NULL (a lone surrogate) is cleared and left to the generic path.
    const char* PyUnicode_AsUTF8AndSize(object s, Py_ssize_t* size)
    void PyErr_Clear()
    object PyUnicode_DecodeUTF8(const char* s, Py_ssize_t size, const char* errors)
    object PyBytes_FromStringAndSize(const char* s, Py_ssize_t size)
    object PyFloat_FromDouble(double d)
    object PyLong_FromUnsignedLongLong(unsigned long long v)
    object PyLong_FromLongLong(long long v)
    int PyDict_SetItem(object d, object k, object v) except -1
    long long PyLong_AsLongLongAndOverflow(object v, int* overflow) except? -1
    char* PyBytes_AS_STRING(object b)
    Py_ssize_t PyBytes_GET_SIZE(object b)
    bint PyTuple_Check(object o)
    Py_ssize_t PyTuple_GET_SIZE(object o)
    PyObject* PyTuple_GET_ITEM(object o, Py_ssize_t i)
    Py_ssize_t PyList_GET_SIZE(object o)
    PyObject* PyList_GET_ITEM(object o, Py_ssize_t i)
    void PyTuple_SET_ITEM(object o, Py_ssize_t i, PyObject* v)
    void Py_INCREF(PyObject* o)
    void Py_XDECREF(PyObject* o)
    bint PyUnicode_IS_COMPACT_ASCII(PyObject* o)
    Py_ssize_t PyUnicode_GET_LENGTH(PyObject* o)
    void* PyUnicode_DATA(PyObject* o)

# C constants: compared with a literal past 32 bits, Cython makes a Python int of the
# other side and compares objects, on every row.
cdef Py_ssize_t MAX_LEN32 = 0xffffffff  # msgpack's longest array, map, str or bin
cdef uint64_t BELOW_64 = 0x100000000  # the smallest uint msgpack writes in 8 bytes

cdef enum:
    # Deeper nesting goes the generic way (msgpack's own limit is far above it).
    MAX_DEPTH = 64
    # What a put_* returns for a value left to the generic path (0: written).
    UNHANDLED = 1


cdef int grow(Buf* b, Py_ssize_t need) except -1:
    cdef Py_ssize_t cap = b.cap * 2
    while cap < b.size + need:
        cap *= 2
    cdef char* data = <char*>PyMem_Realloc(b.data, cap)
    if data == NULL:
        raise MemoryError()
    b.data = data
    b.cap = cap
    return 0


cdef inline int put(Buf* b, const char* src, Py_ssize_t n) except -1:
    if b.size + n > b.cap:
        grow(b, n)
    memcpy(b.data + b.size, src, n)
    b.size += n
    return 0


cdef inline int put_byte(Buf* b, unsigned char c) except -1:
    if b.size + 1 > b.cap:
        grow(b, 1)
    b.data[b.size] = <char>c
    b.size += 1
    return 0


cdef inline int put_be(Buf* b, unsigned char head, uint64_t v, int nbytes) except -1:
    """A type byte followed by ``v`` in ``nbytes`` big-endian bytes."""
    cdef int i
    if b.size + 1 + nbytes > b.cap:
        grow(b, 1 + nbytes)
    b.data[b.size] = <char>head
    for i in range(nbytes):
        b.data[b.size + nbytes - i] = <char>(v & 0xff)
        v >>= 8
    b.size += 1 + nbytes
    return 0


cdef int put_uint(Buf* b, uint64_t v) except -1:
    if v < 0x80:
        return put_byte(b, <unsigned char>v)
    if v < 0x100:
        return put_be(b, 0xcc, v, 1)
    if v < 0x10000:
        return put_be(b, 0xcd, v, 2)
    if v < BELOW_64:
        return put_be(b, 0xce, v, 4)
    return put_be(b, 0xcf, v, 8)


cdef int put_negative(Buf* b, long long v) except -1:
    if v >= -32:
        return put_byte(b, <unsigned char>(v & 0xff))
    if v >= -128:
        return put_be(b, 0xd0, <uint64_t>v, 1)
    if v >= -32768:
        return put_be(b, 0xd1, <uint64_t>v, 2)
    if v >= -2147483648:
        return put_be(b, 0xd2, <uint64_t>v, 4)
    return put_be(b, 0xd3, <uint64_t>v, 8)


cdef int put_header(Buf* b, Py_ssize_t n, unsigned char fix, unsigned char fixmax,
                    unsigned char h8, unsigned char h16, unsigned char h32) except -1:
    """A length header: the fix form below ``fixmax``, else the smallest of 8/16/32 bits
    (``h8`` 0 where the type has no 8-bit form)."""
    if n < fixmax:
        return put_byte(b, fix | <unsigned char>n)
    if h8 and n < 0x100:
        return put_be(b, h8, <uint64_t>n, 1)
    if n < 0x10000:
        return put_be(b, h16, <uint64_t>n, 2)
    return put_be(b, h32, <uint64_t>n, 4)


cdef int put_int(Buf* b, object v) except -1:
    cdef int overflow = 0
    cdef long long x
    if _PyLong_Sign(v) >= 0:
        if _PyLong_NumBits(v) > 64:
            return UNHANDLED  # msgpack refuses it, and the generic path says so
        if sizeof(unsigned long) < 8:
            return UNHANDLED
        return put_uint(b, PyLong_AsUnsignedLong(v))
    x = PyLong_AsLongLongAndOverflow(v, &overflow)
    if overflow:
        return UNHANDLED
    return put_negative(b, x)


cdef int put_str(Buf* b, object s) except -1:
    cdef Py_ssize_t n
    cdef const char* utf8 = PyUnicode_AsUTF8AndSize(s, &n)
    if utf8 == NULL:
        PyErr_Clear()
        return UNHANDLED  # a lone surrogate: msgpack refuses it too
    if n > MAX_LEN32:
        return UNHANDLED
    put_header(b, n, 0xa0, 32, 0xd9, 0xda, 0xdb)
    return put(b, utf8, n)


cdef int put_float(Buf* b, double d) except -1:
    cdef uint64_t bits
    memcpy(&bits, &d, 8)
    return put_be(b, 0xcb, bits, 8)


cdef int put_value(Buf* b, object v, int depth) except -1:
    """Append ``v``; UNHANDLED for what the generic path must do instead."""
    cdef type t = type(v)
    cdef Py_ssize_t n
    if t is str:
        return put_str(b, v)
    if t is int:
        return put_int(b, v)
    if v is None:
        return put_byte(b, 0xc0)
    if t is bool:
        return put_byte(b, 0xc3 if v else 0xc2)
    if t is float:
        return put_float(b, v)
    if t is bytes:
        n = PyBytes_GET_SIZE(v)
        if n > MAX_LEN32:
            return UNHANDLED
        put_header(b, n, 0, 0, 0xc4, 0xc5, 0xc6)
        return put(b, PyBytes_AS_STRING(v), n)
    if depth >= MAX_DEPTH:
        return UNHANDLED
    if t is dict:
        return put_dict(b, v, depth)
    if t is list:
        return put_array(b, v, True, depth)
    if PyTuple_Check(v):  # a values record is a tuple subclass: an array, as msgpack writes it
        return put_array(b, v, False, depth)
    return UNHANDLED


cdef int put_array(Buf* b, object seq, bint is_list, int depth) except -1:
    cdef Py_ssize_t i, n = PyList_GET_SIZE(seq) if is_list else PyTuple_GET_SIZE(seq)
    if n > MAX_LEN32:
        return UNHANDLED
    put_header(b, n, 0x90, 16, 0, 0xdc, 0xdd)
    for i in range(n):
        # A list may change size under a value's own code (none runs here, but cheap to check).
        if is_list and i >= PyList_GET_SIZE(seq):
            return UNHANDLED
        item = <object>(PyList_GET_ITEM(seq, i) if is_list else PyTuple_GET_ITEM(seq, i))
        if put_value(b, item, depth + 1):
            return UNHANDLED
    return 0


cdef int put_dict(Buf* b, dict d, int depth) except -1:
    cdef Py_ssize_t n = len(d)
    if n > MAX_LEN32:
        return UNHANDLED
    put_header(b, n, 0x80, 16, 0, 0xde, 0xdf)
    for key, value in d.items():
        if put_value(b, key, depth + 1) or put_value(b, value, depth + 1):
            return UNHANDLED
    return 0


cdef int put_row(Buf* b, object t) except -1:
    """One data row ``[id, src_task, stream, values, anchors]``, read off a typed Tuple."""
    cdef Tuple tup
    if type(t) is not Tuple:
        return UNHANDLED
    tup = <Tuple>t
    if tup.id_is_edge and tup.form == ONE_ROOT:  # nearly every row
        return put_tree_row(b, tup.edge, tup.task, tup.stream, tup.values, tup.root)
    put_byte(b, 0x95)
    if tup.id_is_edge:
        put_uint(b, tup.edge)
    elif put_value(b, tup.tid, 1):
        return UNHANDLED
    if put_value(b, tup.task, 1) or put_value(b, tup.stream, 1) or put_value(b, tup.values, 1):
        return UNHANDLED
    if tup.form == ONE_ROOT:  # the map msgpack writes for {root: edge}, with no dict made
        put_byte(b, 0x81)
        put_uint(b, tup.root)
        return put_uint(b, tup.edge)
    return put_value(b, tup.amap, 1)


cdef int put_tree_row(Buf* b, uint64_t edge, object task, object stream, object values,
                      uint64_t root) except -1:
    """The row of a Tuple of one tree whose id is its edge, from its parts."""
    put_byte(b, 0x95)
    put_uint(b, edge)
    if put_value(b, task, 1) or put_value(b, stream, 1) or put_value(b, values, 1):
        return UNHANDLED
    put_byte(b, 0x81)  # the map msgpack writes for {root: edge}, with no dict made
    put_uint(b, root)
    return put_uint(b, edge)


cdef int put_rows(Buf* b, list tuples) except -1:
    """A data payload: one row per Tuple."""
    cdef Py_ssize_t n = len(tuples)
    if n > MAX_LEN32:
        return UNHANDLED
    put_header(b, n, 0x90, 16, 0, 0xdc, 0xdd)
    for t in tuples:
        if put_row(b, t):
            return UNHANDLED
    return 0


cdef class PackedRows:
    """Data rows already packed (by a :class:`RemoteBatch`): ``count`` rows, the bytes
    msgpack writes for them one after the other, without the array header."""

    cdef readonly Py_ssize_t count
    cdef readonly bytes data

    def __cinit__(self, Py_ssize_t count, bytes data):
        self.count = count
        self.data = data

    def __len__(self):
        return self.count


cdef enum:
    BATCH_START = 4096  # the first buffer of a batch
    BATCH_KEEP = 1 << 16  # a buffer grown past this is let go at take(), not kept: a worker
    # has a batch per executor and remote task, and a turn of a few hundred rows fits


cdef class RemoteBatch:
    """The rows one executor emits to one task of another worker, packed as they are emitted.

    The executor's emit closures call :meth:`append` (a list's ``append`` for a
    task in this worker).  Packing here, in the emitting thread, instead of on the
    send thread, means the Tuple is read while it is still in cache and freed at
    once, and the send thread only copies bytes: it used to spend a third of
    its time freeing the Tuples, records and anchor maps it had packed, made
    milliseconds before by another thread and cold by then.

    A Tuple the packer does not handle (a TransactionAttempt among its values)
    is kept as it is, and so is every Tuple after it until :meth:`take`, so that
    the rows still reach the target in the order they were emitted.
    """

    def __cinit__(self):
        self.buf.data = NULL
        self.buf.size = 0
        self.buf.cap = 0
        self.rows = 0
        self.kept = []

    def __dealloc__(self):
        PyMem_Free(self.buf.data)

    cdef int start(self) except -1:
        """Ready for a row: 0, or UNHANDLED where the row must be kept as a Tuple
        (one already is, so that the rows stay in order, or the count is at msgpack's limit)."""
        if self.kept or self.rows >= MAX_LEN32:
            return UNHANDLED
        if self.buf.data == NULL:
            self.buf.data = <char*>PyMem_Malloc(BATCH_START)
            if self.buf.data == NULL:
                raise MemoryError()
            self.buf.cap = BATCH_START
        return 0

    def append(self, t):
        cdef Py_ssize_t mark = self.buf.size
        if not self.start():
            if not put_row(&self.buf, t):
                self.rows += 1
                return
            self.buf.size = mark  # drop the part of the row written
        self.kept.append(t)

    cdef int put_tree(self, uint64_t edge, object task, object stream, object values,
                      uint64_t root) except -1:
        """The row of a Tuple of one tree whose id is its edge, written from its parts,
        with no Tuple made: 0, or UNHANDLED (nothing written) where the caller must
        make the Tuple and :meth:`append` it."""
        cdef Py_ssize_t mark = self.buf.size
        if self.start():
            return UNHANDLED
        if put_tree_row(&self.buf, edge, task, stream, values, root):
            self.buf.size = mark  # drop the part of the row written
            return UNHANDLED
        self.rows += 1
        return 0

    def __len__(self):
        return self.rows + len(self.kept)

    def take(self):
        """What was appended since the last take, as data payloads in order: a
        :class:`PackedRows`, then the list of Tuples kept as they are (each if any)."""
        out = []
        if self.rows:
            out.append(PackedRows(self.rows, PyBytes_FromStringAndSize(self.buf.data, self.buf.size)))
            self.rows = 0
            self.buf.size = 0
            if self.buf.cap > BATCH_KEEP:
                PyMem_Free(self.buf.data)
                self.buf.data = NULL
                self.buf.cap = 0
        if self.kept:
            out.append(self.kept)
            self.kept = []
        return out


def encode(list messages):
    """``messages`` ([kind, task, payload] each) as one msgpack frame, or None when the
    generic encoder must do it (a value of a type handled only there, or one msgpack refuses)."""
    cdef Buf b
    b.cap = 8192
    b.size = 0
    b.data = <char*>PyMem_Malloc(b.cap)
    if b.data == NULL:
        raise MemoryError()
    try:
        if len(messages) > MAX_LEN32:
            return None
        put_header(&b, len(messages), 0x90, 16, 0, 0xdc, 0xdd)
        for message in messages:
            kind, task, payload = message
            if type(kind) is not str:
                return None
            put_byte(&b, 0x93)
            if put_str(&b, kind) or put_value(&b, task, 1):
                return None
            if kind == "data" and type(payload) is list:
                if put_rows(&b, payload):
                    return None
            elif kind == "data" and type(payload) is PackedRows:
                put_header(&b, (<PackedRows>payload).count, 0x90, 16, 0, 0xdc, 0xdd)
                put(&b, (<PackedRows>payload).data, len((<PackedRows>payload).data))
            elif kind == "tick":
                put_byte(&b, 0xc0)
            elif put_value(&b, payload, 1):
                return None
        return PyBytes_FromStringAndSize(b.data, b.size)
    finally:
        PyMem_Free(b.data)


cdef inline bint is_u64(object v):
    return type(v) is int and _PyLong_Sign(v) >= 0


cdef object new_tuple(object tid, object component, object stream, object src, object record,
                      list values, Py_ssize_t n, object anchors):
    """``Tuple(tid, component, stream, src, record(*values), anchors)``, filled in place."""
    tup = bare_tuple(tid, component, stream, src, filled_record(record, values, n))
    set_anchors(tup, anchors)
    return tup


def tuples(dict task_component, dict by_source, list rows):
    """The data rows of one message -> Tuples, checked as ``WireValidator._tuples``
    checks them; a str instead (the reason, one of wire.REASONS) for a row that fails.

    ``by_source``: source component -> stream -> (record type, field count), what
    the target task subscribes to.
    """
    cdef Py_ssize_t i, n_rows = len(rows), nfields = 0
    cdef list out = []
    cdef object last_src = None, last_stream = None, component = None, record = None
    for i in range(n_rows):
        row = <object>PyList_GET_ITEM(rows, i)
        if type(row) is not list or PyList_GET_SIZE(row) != 5:
            return "shape"
        tid = <object>PyList_GET_ITEM(row, 0)
        src = <object>PyList_GET_ITEM(row, 1)
        stream = <object>PyList_GET_ITEM(row, 2)
        values = <object>PyList_GET_ITEM(row, 3)
        anchors = <object>PyList_GET_ITEM(row, 4)
        if type(src) is not int or src != last_src or stream != last_stream:
            # Rows of a batch mostly share their source and stream: look up once per run.
            if type(src) is not int or type(stream) is not str:
                return "shape"
            component = task_component.get(src)
            streams = by_source.get(component) if component is not None else None
            entry = streams.get(stream) if streams is not None else None
            if entry is None:
                return "source"
            record, nfields = entry
            if not is_values_record(record):
                return None  # not a values record: allocating it as a tuple would be wrong
            last_src, last_stream = src, stream
        if type(values) is not list or PyList_GET_SIZE(values) != nfields:
            return "shape"
        if tid is not None and not is_u64(tid):
            return "shape"
        if anchors is not None:
            if type(anchors) is not dict:
                return "shape"
            for root, edge in (<dict>anchors).items():
                if not is_u64(root) or not is_u64(edge):
                    return "shape"
        out.append(new_tuple(tid, component, stream, src, record, values, nfields, anchors))
    return out


# -- decoding ----------------------------------------------------------------

class Decline(Exception):
    """The frame is left to the validator's msgpack path."""


cdef struct Reader:
    const unsigned char* data
    Py_ssize_t pos
    Py_ssize_t end


cdef inline const unsigned char* take(Reader* r, Py_ssize_t n) except NULL:
    cdef const unsigned char* at = r.data + r.pos
    if n < 0 or n > r.end - r.pos:
        raise Decline()  # truncated: msgpack refuses it, and the validator counts that
    r.pos += n
    return at


cdef inline uint64_t be(const unsigned char* p, int n):
    cdef uint64_t v = 0
    cdef int i
    for i in range(n):
        v = (v << 8) | p[i]
    return v


cdef Py_ssize_t array_len(Reader* r) except -1:
    cdef unsigned char c = take(r, 1)[0]
    if 0x90 <= c <= 0x9f:
        return c & 0x0f
    if c == 0xdc:
        return <Py_ssize_t>be(take(r, 2), 2)
    if c == 0xdd:
        return <Py_ssize_t>be(take(r, 4), 4)
    raise Decline()


cdef enum:
    # Short ASCII strings decoded lately, by a hash of their bytes: a word count's
    # words, stream and kind names.  A str found here is shared rather than decoded
    # and allocated again; a bolt counting it finds its hash already computed.
    STR_CACHE_SLOTS = 4096
    STR_CACHE_LONGEST = 24


cdef PyObject* str_cache[STR_CACHE_SLOTS]
memset(str_cache, 0, sizeof(str_cache))


cdef object read_str(Reader* r, Py_ssize_t n):
    cdef const unsigned char* p = take(r, n)
    cdef uint64_t h = 14695981039346656037u, w
    cdef Py_ssize_t i
    cdef PyObject* cached
    if n > STR_CACHE_LONGEST:
        return decode_str(p, n)
    if n <= 8:
        # A short word (nearly every one) hashed as one 64-bit word of its bytes, read
        # in one load unless the frame ends within 8 bytes: a byte-at-a-time hash was
        # a fifth of the receive thread's time.  Little-endian, as the load is on x86
        # and ARM; elsewhere the cache only hits less.
        if r.end - (r.pos - n) >= 8:
            memcpy(&w, p, 8)
            if n < 8:
                w &= ((<uint64_t>1) << (8 * n)) - 1
        else:
            w = 0
            for i in range(n):
                w |= (<uint64_t>p[i]) << (8 * i)
        h = (w + <uint64_t>n) * 0x9E3779B97F4A7C15u
        h = (h >> 40) & (STR_CACHE_SLOTS - 1)
    else:
        for i in range(n):  # FNV-1a
            h = (h ^ p[i]) * 1099511628211u
        h = (h ^ (h >> 29)) & (STR_CACHE_SLOTS - 1)
    cached = str_cache[h]
    if (cached != NULL and PyUnicode_GET_LENGTH(cached) == n
            and memcmp(PyUnicode_DATA(cached), p, n) == 0):
        return <object>cached
    s = decode_str(p, n)
    if PyUnicode_IS_COMPACT_ASCII(<PyObject*>s):  # its data is its bytes: the test above holds
        Py_INCREF(<PyObject*>s)
        Py_XDECREF(cached)
        str_cache[h] = <PyObject*>s
    return s


cdef object decode_str(const unsigned char* p, Py_ssize_t n):
    try:
        return PyUnicode_DecodeUTF8(<const char*>p, n, NULL)
    except UnicodeDecodeError:
        raise Decline()


cdef object read_value(Reader* r, int depth):
    """One msgpack object as ``msgpack.unpackb(raw=False, strict_map_key=False)`` gives it."""
    cdef unsigned char c = take(r, 1)[0]
    cdef Py_ssize_t n, i
    cdef uint64_t u
    cdef double d
    if c <= 0x7f:
        return <long>c
    if c >= 0xe0:
        return <long>(<signed char>c)
    if 0xa0 <= c <= 0xbf:
        return read_str(r, c & 0x1f)
    if c == 0xc0:
        return None
    if c == 0xc2:
        return False
    if c == 0xc3:
        return True
    if 0xcc <= c <= 0xcf:
        n = 1 << (c - 0xcc)
        return PyLong_FromUnsignedLongLong(be(take(r, n), <int>n))
    if 0xd0 <= c <= 0xd3:
        n = 1 << (c - 0xd0)
        u = be(take(r, n), <int>n)
        if n < 8 and u >> (8 * n - 1):
            u |= ~((<uint64_t>1 << (8 * n)) - 1)  # sign-extend
        return PyLong_FromLongLong(<long long>u)
    if c == 0xcb:
        u = be(take(r, 8), 8)
        memcpy(&d, &u, 8)
        return PyFloat_FromDouble(d)
    if c == 0xca:
        return PyFloat_FromDouble(<double>_float32(<unsigned int>be(take(r, 4), 4)))
    if 0xd9 <= c <= 0xdb:
        n = 1 << (c - 0xd9)
        return read_str(r, <Py_ssize_t>be(take(r, n), <int>n))
    if 0xc4 <= c <= 0xc6:
        n = 1 << (c - 0xc4)
        n = <Py_ssize_t>be(take(r, n), <int>n)
        return PyBytes_FromStringAndSize(<const char*>take(r, n), n)
    if depth >= MAX_DEPTH:
        raise Decline()
    if 0x90 <= c <= 0x9f or c == 0xdc or c == 0xdd:
        r.pos -= 1
        n = array_len(r)
        if n > r.end - r.pos:
            raise Decline()  # more items than bytes left: truncated or hostile
        out = []
        for i in range(n):
            out.append(read_value(r, depth + 1))
        return out
    if 0x80 <= c <= 0x8f or c == 0xde or c == 0xdf:
        if c <= 0x8f:
            n = c & 0x0f
        else:
            i = 2 if c == 0xde else 4
            n = <Py_ssize_t>be(take(r, i), <int>i)
        if n > r.end - r.pos:
            raise Decline()
        out = {}
        for i in range(n):
            key = read_value(r, depth + 1)
            if type(key) is list or type(key) is dict:
                raise Decline()  # unhashable: msgpack refuses the frame
            PyDict_SetItem(out, key, read_value(r, depth + 1))
        return out
    raise Decline()  # an extension type (a TransactionAttempt) or a reserved byte


cdef float _float32(unsigned int bits):
    cdef float f
    memcpy(&f, &bits, 4)
    return f


cdef inline bint repeats(Reader* r, Py_ssize_t at, Py_ssize_t n):
    """Whether the next ``n`` bytes are those of the value read earlier at ``at`` (then
    they are skipped): the same bytes are the same value, so its object can be shared."""
    if n > r.end - r.pos or memcmp(r.data + r.pos, r.data + at, n) != 0:
        return False
    r.pos += n
    return True


cdef list read_rows(Reader* r, dict task_component, dict by_source):
    """A data payload read into Tuples, or Decline where ``WireValidator`` would refuse a row."""
    cdef Py_ssize_t i, j, n_rows = array_len(r), nfields = 0
    cdef Py_ssize_t stream_len = -1, n, tid_at, tid_len
    cdef const unsigned char* stream_at = NULL
    cdef const unsigned char* p
    cdef unsigned char c
    cdef uint64_t tid_u64 = 0
    cdef bint tid_is_u64
    cdef Tuple tup
    cdef object last_src = None, component = None, record = None, stream = None
    cdef list out
    if n_rows > r.end - r.pos:
        raise Decline()
    # Its length known, the list is made once, not grown (a slot still empty when a row
    # declines is NULL, which a list's dealloc skips).
    out = PyList_New(n_rows)
    for i in range(n_rows):
        if take(r, 1)[0] != 0x95:
            raise Decline()
        tid_at = r.pos
        tid = None
        tid_is_u64 = read_u64(r, &tid_u64)  # an int is made only if the id is not the edge
        if not tid_is_u64:
            r.pos = tid_at
            tid = read_value(r, 1)
            if tid is not None and not is_u64(tid):
                raise Decline()
        tid_len = r.pos - tid_at
        src = read_value(r, 1)
        # The stream's name: the same bytes as the row before share its str.
        c = take(r, 1)[0]
        if 0xa0 <= c <= 0xbf:
            n = c & 0x1f
        elif c == 0xd9:
            n = take(r, 1)[0]
        else:
            raise Decline()
        p = take(r, n)
        if type(src) is not int:
            raise Decline()
        if n != stream_len or memcmp(p, stream_at, n) != 0 or (src is not last_src and src != last_src):
            r.pos -= n
            stream = read_str(r, n)
            component = task_component.get(src)
            streams = by_source.get(component) if component is not None else None
            entry = streams.get(stream) if streams is not None else None
            if entry is None:
                raise Decline()
            record, nfields = entry
            if not is_values_record(record):
                raise Decline()
            stream_at, stream_len, last_src = p, n, src
        if array_len(r) != nfields:
            raise Decline()
        vals = new_record(record, nfields)
        for j in range(nfields):
            item = read_value(r, 1)
            Py_INCREF(<PyObject*>item)
            PyTuple_SET_ITEM(vals, j, <PyObject*>item)
        track_unless_atomic(vals, nfields)
        tup = bare_tuple(None, component, stream, src, vals)
        if not (r.pos < r.end and r.data[r.pos] == 0x81 and one_root(r, tup, tid_is_u64, tid_u64, tid_at,
                                                                     tid_len)):
            set_anchors(tup, read_anchors(r))
        if not tup.id_is_edge:
            tup.tid = PyLong_FromUnsignedLongLong(tid_u64) if tid_is_u64 else tid
        Py_INCREF(<PyObject*>tup)  # the list's reference: SET_ITEM steals one
        PyList_SET_ITEM(out, i, tup)
    return out


cdef bint one_root(Reader* r, Tuple tup, bint tid_is_u64, uint64_t tid_u64, Py_ssize_t tid_at,
                   Py_ssize_t tid_len) except -1:
    """A one-entry anchors map read straight into ``tup``'s root and edge, with no int or
    dict made; an edge written as the row's id was (an emit's id is its only edge) makes
    the id read from the edge.  False, with the position back at the map, for a map of
    anything but two 64-bit ids (read the general way)."""
    cdef uint64_t root, edge
    cdef Py_ssize_t at = r.pos
    r.pos += 1
    if not read_u64(r, &root):
        r.pos = at
        return False
    if tid_is_u64 and repeats(r, tid_at, tid_len):
        edge = tid_u64
        tup.id_is_edge = True
    elif not read_u64(r, &edge):
        r.pos = at
        return False
    tup.form = ONE_ROOT
    tup.root = root
    tup.edge = edge
    return True


cdef object read_anchors(Reader* r):
    """A row's anchors read as msgpack reads them: None, or a map of 64-bit ids (else Decline)."""
    anchors = read_value(r, 1)
    if anchors is not None:
        if type(anchors) is not dict:
            raise Decline()
        for root, edge in (<dict>anchors).items():
            if not is_u64(root) or not is_u64(edge):
                raise Decline()
    return anchors


cdef bint read_u64(Reader* r, uint64_t* out) except -1:
    """A non-negative int as msgpack writes one (fixint, uint8..64) into ``out``; False,
    with the position anywhere, for anything else (read again the general way)."""
    cdef unsigned char c = take(r, 1)[0]
    cdef int n
    if c <= 0x7f:
        out[0] = c
        return True
    if 0xcc <= c <= 0xcf:
        n = 1 << (c - 0xcc)
        out[0] = be(take(r, n), n)
        return True
    return False


def decode(object frame, dict task_component, dict data_inputs):
    """``frame``'s messages: each data message checked and read into Tuples, as
    ``("data", task, tuples)``; any other as ``[kind, task, payload]`` for the
    validator to check.  None when the validator must read the whole frame itself.

    ``data_inputs``: target task -> source component -> stream -> (record type,
    field count), ``WireValidator.data_inputs``.
    """
    cdef Reader r
    cdef Py_ssize_t i, n
    if type(frame) is not bytes:
        return None
    r.data = <const unsigned char*>PyBytes_AS_STRING(frame)
    r.pos = 0
    r.end = PyBytes_GET_SIZE(frame)
    out = []
    try:
        n = array_len(&r)
        if n > r.end:
            return None
        for i in range(n):
            if take(&r, 1)[0] != 0x93:
                return None
            kind = read_value(&r, 1)
            task = read_value(&r, 1)
            if type(kind) is str and kind == "data" and type(task) is int:
                by_source = data_inputs.get(task)
                if by_source is None:
                    return None
                out.append(("data", task, read_rows(&r, task_component, by_source)))
            else:
                out.append([kind, task, read_value(&r, 1)])
        if r.pos != r.end:
            return None  # trailing bytes: msgpack calls that extra data
    except Decline:
        return None
    return out
