# The encoder's C declarations (Cython's pure-Python mode: codec.py is the one source, this
# file types it where it is compiled; the interpreter never reads it).  The cdef inline
# functions here are the few primitives that need C: a byte buffer written through a
# char*, a str's UTF-8 read in place, an int's sign and width read off its digits.
# codec.py defines the same names over a bytearray for the interpreter, and writes the
# msgpack grammar and the row layout once, over them.  squall/worker/executors/emit.pxd
# cimports RemoteBatch: an emit of one tree writes its row there with no Tuple made.
# Ids leave ints through PyLong_AsUnsignedLong (64 bits on LP64): 3.11's
# PyLong_AsUnsignedLongLong converts a multi-digit int byte by byte (_PyLong_AsByteArray).
from cpython.long cimport PyLong_AsLongLong, PyLong_AsUnsignedLong, PyLong_AsUnsignedLongLong
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from cpython.object cimport PyTypeObject
from libc.stdint cimport uint64_t
from libc.string cimport memcpy

from squall.topology.tuple cimport Tuple, edge_of, id_is_edge, id_of, root_of, roots_of, row_in_fields


cdef extern from "Python.h":
    int _PyLong_Sign(object v)
    size_t _PyLong_NumBits(object v) except? <size_t>-1
    long long PyLong_AsLongLongAndOverflow(object v, int* overflow) except? -1
    # Raises as msgpack's own packer does for a lone surrogate (it calls this too).
    const char* PyUnicode_AsUTF8AndSize(object s, Py_ssize_t* size) except NULL
    bint PyUnicode_IS_COMPACT_ASCII(object s)
    Py_ssize_t PyUnicode_GET_LENGTH(object s)
    void* PyUnicode_DATA(object s)
    bint PyBytes_Check(object o)
    char* PyBytes_AS_STRING(object b)
    Py_ssize_t PyBytes_GET_SIZE(object b)
    char* PyByteArray_AS_STRING(object b)
    Py_ssize_t PyByteArray_GET_SIZE(object b)
    object PyBytes_FromStringAndSize(const char* s, Py_ssize_t size)

# Typed module constants (codec.py gives their values): compared with a literal past 32
# bits, Cython would make a Python int of the other side and compare objects, every row.
cdef Py_ssize_t MAX_LEN32, FRAME_START, BATCH_KEEP
cdef uint64_t BELOW_64
cdef int NEST_LIMIT, FIELD_DEPTH


# -- the buffer -------------------------------------------------------------------------

cdef class Buf:
    cdef char* data
    cdef Py_ssize_t size, cap


cdef inline int grow(Buf b, Py_ssize_t need) except -1:
    # Doubling from 4 KB: a RemoteBatch's buffer is made at its first row, and a turn of a
    # few hundred rows fits in a few of them (the interpreter's bytearray grows itself).
    cdef Py_ssize_t cap = b.cap * 2 if b.cap else 4096
    while cap < b.size + need:
        cap *= 2
    cdef char* data = <char*>PyMem_Realloc(b.data, cap)
    if data == NULL:
        raise MemoryError()
    b.data = data
    b.cap = cap
    return 0


cdef inline Buf new_buffer(Py_ssize_t cap):
    """An empty buffer with room for ``cap`` bytes (none allocated for 0)."""
    cdef Buf b = Buf.__new__(Buf)
    b.data = NULL
    b.size = 0
    b.cap = 0
    if cap:
        grow(b, cap)
    return b


cdef inline void free_buffer(Buf b) noexcept:
    PyMem_Free(b.data)
    b.data = NULL
    b.size = b.cap = 0


cdef inline Py_ssize_t buffer_size(Buf b) noexcept:
    return b.size


cdef inline Py_ssize_t capacity_of(Buf b) noexcept:
    return b.cap


cdef inline void truncate(Buf b, Py_ssize_t size) noexcept:
    b.size = size


cdef inline bytes buffer_bytes(Buf b):
    return PyBytes_FromStringAndSize(b.data, b.size)


cdef inline int put(Buf b, const char* src, Py_ssize_t n) except -1:
    if b.size + n > b.cap:
        grow(b, n)
    memcpy(b.data + b.size, src, n)
    b.size += n
    return 0


cdef inline int put_byte(Buf b, unsigned char c) except -1:
    if b.size + 1 > b.cap:
        grow(b, 1)
    b.data[b.size] = <char>c
    b.size += 1
    return 0


cdef inline int put_be(Buf b, unsigned char head, uint64_t v, int nbytes) except -1:
    """A type byte followed by the low ``nbytes`` bytes of ``v``, big-endian."""
    cdef int i
    if b.size + 1 + nbytes > b.cap:
        grow(b, 1 + nbytes)
    # Through a local pointer: a store through b.data could be to b itself, for all the C
    # compiler knows, and it would load b.data and b.size again for every byte.
    cdef char* at = b.data + b.size
    at[0] = <char>head
    for i in range(nbytes, 0, -1):
        at[i] = <char>(v & 0xff)
        v >>= 8
    b.size += 1 + nbytes
    return 0


cdef inline int put_bytes(Buf b, object data) except -1:
    """The bytes of a bytes or bytearray (or of a subclass of either)."""
    if PyBytes_Check(data):
        return put(b, PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))
    return put(b, PyByteArray_AS_STRING(data), PyByteArray_GET_SIZE(data))


cdef inline Py_ssize_t utf8_size(object s) except -1:
    """How many bytes ``s`` is in UTF-8: an ASCII str's length, read inline (nearly every
    str a tuple carries), else what CPython makes and keeps in the str."""
    cdef Py_ssize_t n
    if PyUnicode_IS_COMPACT_ASCII(s):
        return PyUnicode_GET_LENGTH(s)
    PyUnicode_AsUTF8AndSize(s, &n)
    return n


cdef inline int put_utf8(Buf b, object s, Py_ssize_t n) except -1:
    if PyUnicode_IS_COMPACT_ASCII(s):  # its characters are its UTF-8
        return put(b, <const char*>PyUnicode_DATA(s), n)
    return put(b, PyUnicode_AsUTF8AndSize(s, &n), n)


cdef inline uint64_t float_bits(double d) noexcept:
    cdef uint64_t bits
    memcpy(&bits, &d, 8)
    return bits


# -- an int's range, read off its digits --------------------------------------------------

cdef inline bint not_negative(object v) noexcept:
    return _PyLong_Sign(v) >= 0


cdef inline bint fits_u64(object v) except -1:
    return _PyLong_NumBits(v) <= 64  # (of an int not negative)


cdef inline uint64_t as_u64(object v) except? <uint64_t>-1:
    if sizeof(unsigned long) >= 8:
        return PyLong_AsUnsignedLong(v)
    return PyLong_AsUnsignedLongLong(v)


cdef inline bint fits_i64(object v) except -1:
    cdef int overflow = 0
    PyLong_AsLongLongAndOverflow(v, &overflow)
    return not overflow


cdef inline long long as_i64(object v) except? -1:
    return PyLong_AsLongLong(v)


# -- a tuple, and a values record -------------------------------------------------------

cdef inline bint plain_tuple(type t) noexcept:
    """A tuple, or a direct subclass of it (a values record's namedtuple), never an ExtType
    (a subclass of its own namedtuple): one msgpack writes as an array."""
    return t is tuple or (<PyTypeObject*>t).tp_base == <PyTypeObject*>tuple


cdef inline tuple as_tuple(object v):
    return <tuple>v  # (of a tuple or a subclass: the items are read as a tuple's)


# -- the grammar and the rows (codec.py) ----------------------------------------------------

cdef int put_header(Buf b, Py_ssize_t n, unsigned char fix, Py_ssize_t fixmax,
                    unsigned char h8, unsigned char h16, unsigned char h32) except -1
cdef int put_uint(Buf b, uint64_t v) except -1
cdef int put_negative(Buf b, long long v) except -1
cdef int put_int(Buf b, object v) except -1
cdef int put_str(Buf b, object s) except -1
cdef int put_bin(Buf b, object data) except -1
cdef int put_ext(Buf b, long code, object data) except -1
cdef int put_registered(Buf b, object v) except -1
cdef int put_value(Buf b, object v, int depth) except -1
cdef int put_tuple(Buf b, tuple items, int depth) except -1
cdef int put_items(Buf b, object items, int depth) except -1
cdef int put_map(Buf b, object d, int depth) except -1
cdef int put_other(Buf b, object v, int depth) except -1
cdef int put_tree_row(Buf b, uint64_t edge, object task, object stream, object values,
                      uint64_t root) except -1
cdef int put_tree_rest(Buf b, object task, object stream, object values, uint64_t root,
                       uint64_t edge) except -1
cdef int put_row(Buf b, object t) except -1
cdef int put_rows(Buf b, list rows) except -1
cdef object refusal(object t, object error)


cdef class PackedRows:
    cdef readonly Py_ssize_t count
    cdef readonly bytes data


cdef class RemoteBatch:
    cdef Buf buf
    cdef Py_ssize_t rows
    cdef list kept

    cdef bint ready(self) noexcept
    # cpdef: emit.py calls it from the interpreter too, run from its edited source beside this build
    cpdef int put_tree(self, uint64_t edge, object task, object stream, object values,
                       uint64_t root) except -1
