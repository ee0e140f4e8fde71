# The reader's C declarations and primitives (Cython's pure-Python mode: reader.py is the
# one source, this file types it where it is compiled; the interpreter never reads it, and
# runs instead the Python versions reader.py defines under ``if not cython.compiled``).
from libc.stdint cimport uint64_t
from libc.string cimport memcmp, memcpy

from squall.topology.tuple cimport (
    Tuple,
    bare_tuple,
    is_values_record,
    new_record,
    set_anchors,
    track_unless_atomic,
    tree_tuple,
)

cdef extern from "Python.h":
    ctypedef struct PyObject
    char* PyBytes_AS_STRING(object b)
    object PyBytes_FromStringAndSize(const char* s, Py_ssize_t size)
    object PyUnicode_DecodeUTF8(const char* s, Py_ssize_t size, const char* errors)
    bint PyUnicode_IS_COMPACT_ASCII(PyObject* o)
    Py_ssize_t PyUnicode_GET_LENGTH(PyObject* o)
    void* PyUnicode_DATA(PyObject* o)
    void PyTuple_SET_ITEM(object o, Py_ssize_t i, PyObject* v)
    void Py_INCREF(PyObject* o)
    void Py_XDECREF(PyObject* o)

cdef Py_ssize_t MAX_DEPTH


cdef class Reader:
    cdef object frame, hook
    cdef const unsigned char* data
    cdef Py_ssize_t pos, end
    cdef uint64_t number


cdef Py_ssize_t take(Reader r, Py_ssize_t n) except -1
cdef uint64_t be(Reader r, Py_ssize_t at, int n) noexcept
cdef Py_ssize_t array_len(Reader r) except -2
cdef Py_ssize_t str_len(Reader r) except -2
cdef bint read_u64(Reader r) except -1
cdef object read_ext(Reader r, Py_ssize_t n)
cdef bint is_u64(object v) except -1
cdef object read_value(Reader r, int depth)
cdef object read_rows(Reader r, dict task_component, dict by_source)
cdef list read_messages(Reader r, dict task_component, dict data_inputs)


# -- primitives -----------------------------------------------------------------------

cdef inline const unsigned char* data_of(bytes frame) noexcept:
    return <const unsigned char*>PyBytes_AS_STRING(frame)


cdef inline bint same_bytes(Reader r, Py_ssize_t a, Py_ssize_t b, Py_ssize_t n) noexcept:
    return memcmp(r.data + a, r.data + b, n) == 0


cdef inline object bytes_at(Reader r, Py_ssize_t at, Py_ssize_t n):
    return PyBytes_FromStringAndSize(<const char*>(r.data + at), n)


cdef inline double double_of(uint64_t bits) noexcept:
    cdef double d
    memcpy(&d, &bits, 8)
    return d


cdef inline double float_of(uint64_t bits) noexcept:
    cdef float f
    cdef unsigned int b32 = <unsigned int>bits
    memcpy(&f, &b32, 4)
    return f


cdef inline long long signed_of(uint64_t u, int n) noexcept:
    """The ``n``-byte two's complement integer whose bits are ``u``."""
    if n < 8 and u >> (8 * n - 1):
        u |= ~((<uint64_t>1 << (8 * n)) - 1)  # sign-extend
    return <long long>u


# A values record filled in place, from tuple.pxd's free list: no list of its values made.

cdef inline object new_fields(type record, Py_ssize_t n):
    return new_record(record, n)


cdef inline int set_field(object fields, Py_ssize_t j, object value) except -1:
    Py_INCREF(<PyObject*>value)
    PyTuple_SET_ITEM(fields, j, <PyObject*>value)
    return 0


cdef inline object end_fields(type record, object fields, Py_ssize_t n):
    track_unless_atomic(fields, n)
    return fields


# Short ASCII strings decoded lately, by a hash of their bytes: a word count's words,
# stream and kind names.  A str found here is shared rather than decoded and allocated
# again; a bolt counting it finds its hash already computed.
cdef enum:
    STR_CACHE_SLOTS = 4096
    STR_CACHE_LONGEST = 24

cdef extern from *:
    """
    static PyObject* squall_str_cache[4096];
    """
    PyObject* str_cache "squall_str_cache"[STR_CACHE_SLOTS]


cdef inline object str_at(Reader r, Py_ssize_t at, Py_ssize_t n):
    cdef const unsigned char* p = r.data + at
    cdef uint64_t h = 14695981039346656037u, w
    cdef Py_ssize_t i
    cdef PyObject* cached
    if n > STR_CACHE_LONGEST:
        return decode_str(p, n)
    if n <= 8:
        # A short word (nearly every one) hashed as one 64-bit word of its bytes, read in
        # one load unless the frame ends within 8 bytes: a byte-at-a-time hash was a fifth
        # of the receive thread's time.  Little-endian, as the load is on x86 and ARM;
        # elsewhere the cache only hits less.
        if r.end - at >= 8:
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


cdef inline object decode_str(const unsigned char* p, Py_ssize_t n):
    return PyUnicode_DecodeUTF8(<const char*>p, n, NULL)  # (invalid UTF-8 raises: see read_frame)
