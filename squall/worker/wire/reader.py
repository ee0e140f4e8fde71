# cython: boundscheck=False, wraparound=False, initializedcheck=False
"""The wire's one decoder: a frame's msgpack read, its data rows straight into Tuples.

A frame is read as ``msgpack.unpackb(frame, raw=False, strict_map_key=False,
ext_hook=ext_hook(strict=True))`` reads it, and refused whole where msgpack
would refuse it (:class:`Undecodable`: truncated, trailing bytes, a reserved
byte, invalid UTF-8, an unknown extension type, an unhashable map key), with
one bound of its own: nesting deeper than :data:`MAX_DEPTH` (the emit check
refuses values nested past 64, so no worker sends one; the bound keeps the
reader's recursion, and the interpreter's stack, small).

A data message to a task of this worker is not built as msgpack would build
it (a list per row, a list per values, a dict per anchors map, a str per
stream name) but read row by row into the values record and the Tuple, each
row checked as it is read; its verdict is the first failing row's reason, and
the message is then read again, whole, only for what msgpack would refuse in
its remaining bytes.  Every other message is left, as msgpack reads it, to
the validator's checks (squall/worker/wire/frames.py), which also counts the
verdicts.

One source for both runs: the interpreter runs this file as it is, and
``python -m squall.compiled build`` compiles it with the C types of
``reader.pxd`` (Cython's pure-Python mode), where the frame is read through a
pointer, short strings come from a cache and records from tuple.pxd's free list.
"""

from __future__ import annotations

import struct
from typing import Any

import cython

from squall.worker.wire.value_types import ext_hook

if not cython.compiled:  # what reader.pxd defines in C, as the interpreter does it
    from squall.topology.tuple_fields import bare_tuple, set_anchors, tree_tuple

    _DOUBLE = struct.Struct(">d")
    _FLOAT = struct.Struct(">f")

    def data_of(frame: bytes) -> bytes:
        return frame

    def same_bytes(r: Reader, a: int, b: int, n: int) -> bool:
        return r.data[a:a + n] == r.data[b:b + n]

    def str_at(r: Reader, at: int, n: int) -> str:
        return r.data[at:at + n].decode()  # (invalid UTF-8 raises: see read_frame)

    def bytes_at(r: Reader, at: int, n: int) -> bytes:
        return r.data[at:at + n]

    def double_of(bits: int) -> float:
        return _DOUBLE.unpack(bits.to_bytes(8, "big"))[0]

    def float_of(bits: int) -> float:
        return _FLOAT.unpack(bits.to_bytes(4, "big"))[0]

    def signed_of(u: int, n: int) -> int:
        return u - (1 << (8 * n)) if u >> (8 * n - 1) else u

    def new_fields(record: type, n: int) -> list[Any]:
        return [None] * n

    def set_field(fields: list[Any], j: int, value: Any) -> None:
        fields[j] = value

    def end_fields(record: type, fields: list[Any], n: int) -> Any:
        return tuple.__new__(record, fields)


MAX_DEPTH = 128  # nesting past this refuses the frame (see above)
NESTING_BOUND = MAX_DEPTH  # the same, for Python to read (built, MAX_DEPTH is a C variable)


class Undecodable(Exception):  # noqa: N818 - a verdict on the frame, not an error of ours
    """Bytes msgpack would not read (or nested past MAX_DEPTH): the whole frame is refused."""


class NotAFrame(Exception):  # noqa: N818
    """Well-formed msgpack whose top level is not an array of messages."""


class RowsRefused:
    """A data message whose rows failed a check: the first failing row's reason."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


@cython.final
@cython.cclass
class Reader:
    """A position in one frame."""

    def __init__(self, frame: bytes) -> None:
        self.frame = frame  # kept alive: ``data`` points into it, built
        self.data = data_of(frame)
        self.pos = 0
        self.end = len(frame)
        self.number = 0  # the value of the last read_u64 that read one
        self.hook = None  # the frame's extension hook (one object per frame and value), once needed


@cython.locals(at=cython.Py_ssize_t)
def take(r: Reader, n: int) -> int:
    """Where the next ``n`` bytes start; they are consumed."""
    at = r.pos
    if n < 0 or n > r.end - at:
        raise Undecodable("truncated")
    r.pos = at + n
    return at


@cython.locals(v=cython.ulonglong, i=cython.int)
def be(r: Reader, at: int, n: int) -> int:
    """The ``n`` bytes at ``at`` as a big-endian unsigned integer."""
    v = 0
    for i in range(n):
        v = (v << 8) | r.data[at + i]
    return v


@cython.locals(c=cython.uchar)
def array_len(r: Reader) -> int:
    c = r.data[take(r, 1)]
    if 0x90 <= c <= 0x9f:
        return c & 0x0F
    if c == 0xDC:
        return be(r, take(r, 2), 2)
    if c == 0xDD:
        return be(r, take(r, 4), 4)
    r.pos -= 1
    return -1  # not an array


@cython.locals(c=cython.uchar, n=cython.Py_ssize_t)
def str_len(r: Reader) -> int:
    """The length of the str header read, or -1 (nothing read) if the next value is no str."""
    c = r.data[take(r, 1)]
    if 0xA0 <= c <= 0xBF:
        return c & 0x1F
    if 0xD9 <= c <= 0xDB:
        n = 1 << (c - 0xD9)
        return be(r, take(r, n), n)
    r.pos -= 1
    return -1


@cython.locals(c=cython.uchar, n=cython.int)
def read_u64(r: Reader) -> bool:
    """A non-negative int as msgpack writes one (fixint, uint 8 to 64), into ``r.number``;
    False, the position anywhere, for anything else (to be read again the general way)."""
    c = r.data[take(r, 1)]
    if c <= 0x7F:
        r.number = c
        return True
    if 0xCC <= c <= 0xCF:
        n = 1 << (c - 0xCC)
        r.number = be(r, take(r, n), n)
        return True
    return False


@cython.locals(n=cython.Py_ssize_t, at=cython.Py_ssize_t)
def read_ext(r: Reader, n: int) -> Any:
    at = take(r, 1)
    code = signed_of(r.data[at], 1)
    at = take(r, n)
    if r.hook is None:
        r.hook = ext_hook(strict=True)
    try:
        return r.hook(code, bytes_at(r, at, n))
    except Exception as e:  # noqa: BLE001 - an unknown type, or a registered one's bad bytes
        raise Undecodable(f"{type(e).__name__}: {e}") from None


def is_u64(v: Any) -> bool:
    return type(v) is int and v >= 0


@cython.locals(c=cython.uchar, n=cython.Py_ssize_t, i=cython.Py_ssize_t, _item=cython.Py_ssize_t,
               u=cython.ulonglong)
def read_value(r: Reader, depth: int) -> Any:
    """One msgpack object, as msgpack reads it."""
    c = r.data[take(r, 1)]
    if c <= 0x7F:
        return c
    if c >= 0xE0:
        return c - 256
    if 0xA0 <= c <= 0xBF:
        n = c & 0x1F
        return str_at(r, take(r, n), n)
    if c == 0xC0:
        return None
    if c == 0xC2:
        return False
    if c == 0xC3:
        return True
    if 0xCC <= c <= 0xCF:
        n = 1 << (c - 0xCC)
        u = be(r, take(r, n), n)
        return u
    if 0xD0 <= c <= 0xD3:
        n = 1 << (c - 0xD0)
        return signed_of(be(r, take(r, n), n), n)
    if c == 0xCB:
        return double_of(be(r, take(r, 8), 8))
    if c == 0xCA:
        return float_of(be(r, take(r, 4), 4))
    if 0xD9 <= c <= 0xDB:
        n = 1 << (c - 0xD9)
        n = be(r, take(r, n), n)
        return str_at(r, take(r, n), n)
    if 0xC4 <= c <= 0xC6:
        n = 1 << (c - 0xC4)
        n = be(r, take(r, n), n)
        return bytes_at(r, take(r, n), n)
    if 0xD4 <= c <= 0xD8:  # fixext 1, 2, 4, 8, 16
        return read_ext(r, 1 << (c - 0xD4))
    if 0xC7 <= c <= 0xC9:  # ext 8, 16, 32
        n = 1 << (c - 0xC7)
        return read_ext(r, be(r, take(r, n), n))
    if depth >= MAX_DEPTH:
        raise Undecodable(f"nested deeper than {MAX_DEPTH}")
    if 0x90 <= c <= 0x9F or c == 0xDC or c == 0xDD:
        r.pos -= 1
        n = array_len(r)
        if n > r.end - r.pos:
            raise Undecodable("truncated")  # more items than bytes left
        out = []
        for _item in range(n):
            out.append(read_value(r, depth + 1))
        return out
    if 0x80 <= c <= 0x8F or c == 0xDE or c == 0xDF:
        if c <= 0x8F:
            n = c & 0x0F
        else:
            i = 2 if c == 0xDE else 4
            n = be(r, take(r, i), i)
        if n > r.end - r.pos:
            raise Undecodable("truncated")
        d = {}
        for _item in range(n):
            key = read_value(r, depth + 1)
            value = read_value(r, depth + 1)
            try:
                d[key] = value
            except TypeError:
                raise Undecodable(f"an unhashable map key: {type(key).__name__}") from None
        return d
    raise Undecodable(f"reserved byte 0x{c:02x}")


@cython.locals(_row=cython.Py_ssize_t, j=cython.Py_ssize_t, n_rows=cython.Py_ssize_t,
               nfields=cython.Py_ssize_t, n=cython.Py_ssize_t, at=cython.Py_ssize_t,
               stream_at=cython.Py_ssize_t,
               stream_len=cython.Py_ssize_t, tid_at=cython.Py_ssize_t, anchors_at=cython.Py_ssize_t,
               tid_u64=cython.ulonglong, root=cython.ulonglong, edge=cython.ulonglong,
               tid_is_u64=cython.bint, one=cython.bint, fresh=cython.bint, out=list)
def read_rows(r: Reader, task_component: dict, by_source: dict) -> Any:
    """A data payload's rows ``[id, src_task, stream, values, anchors]`` read into Tuples;
    or, for the first row that fails a check, its reason (the rest left unread).

    ``by_source``: source component -> stream -> (record type, field count), what the
    target task subscribes to (record types of ``record_type``: built, a record is
    allocated and filled as a tuple is).  The checks, in this order: a row is an array of five;
    its source task an int, its stream a str; a stream the target subscribes to
    ("source"); values of the stream's field count; an id None or a 64-bit unsigned
    int; anchors None or a map of those ("shape" for each other).
    """
    n_rows = array_len(r)
    if n_rows < 0:
        return "shape"
    if n_rows > r.end - r.pos:
        raise Undecodable("truncated")
    out = []
    stream_len = -1
    stream_at = at = 0
    nfields = 0
    last_src = component = record = stream = None
    for _row in range(n_rows):
        if array_len(r) != 5:
            return "shape"
        tid = None
        tid_at = r.pos
        tid_is_u64 = read_u64(r)  # an int is made only if the id is not the edge
        tid_u64 = r.number
        if not tid_is_u64:
            r.pos = tid_at
            tid = read_value(r, 4)
        src = read_value(r, 4)
        # The stream's name: the same bytes as the row before's share its str, and with the
        # same source its lookup.
        n = str_len(r)
        if n < 0:
            stream = read_value(r, 4)  # no str: refused below
            fresh = True
        else:
            at = take(r, n)
            fresh = n != stream_len or not same_bytes(r, at, stream_at, n)
            if fresh:
                stream = str_at(r, at, n)
        if type(src) is not int or type(stream) is not str:
            return "shape"
        if fresh or (src is not last_src and src != last_src):
            component = task_component.get(src)
            streams = by_source.get(component) if component is not None else None
            entry = streams.get(stream) if streams is not None else None
            if entry is None:
                return "source"
            record, nfields = entry
            stream_at, stream_len, last_src = at, n, src
        if array_len(r) != nfields:
            return "shape"
        vals = new_fields(record, nfields)
        for j in range(nfields):
            set_field(vals, j, read_value(r, 5))
        vals = end_fields(record, vals, nfields)
        if not tid_is_u64 and tid is not None and not is_u64(tid):
            return "shape"
        # Anchors: a map of one root to one edge read with no dict or int made.
        one = False
        anchors_at = r.pos
        if r.data[take(r, 1)] == 0x81 and read_u64(r):
            root = r.number
            if read_u64(r):
                edge = r.number
                one = True
        if one:
            if tid_is_u64 and tid_u64 == edge:  # an emit's row: its id is its only edge
                out.append(tree_tuple(component, stream, src, vals, root, edge))
                continue
            anchors = {root: edge}
        else:
            r.pos = anchors_at
            anchors = read_value(r, 4)
            if anchors is not None:
                if type(anchors) is not dict:
                    return "shape"
                for key, value in anchors.items():
                    if not is_u64(key) or not is_u64(value):
                        return "shape"
        tup = bare_tuple(tid_u64 if tid_is_u64 else tid, component, stream, src, vals)
        set_anchors(tup, anchors)
        out.append(tup)
    return out


def read_frame(frame: bytes, task_component: dict, data_inputs: dict) -> list[Any]:
    """``frame``'s messages, in order: a data message to a task in ``data_inputs`` as
    ``("data", task, tuples)``, or :class:`RowsRefused` if a row failed a check; any other
    as the list ``[kind, task, payload]`` msgpack reads, or the value it reads if that is
    no array of three, for the validator's checks.  Raises :class:`Undecodable` or
    :class:`NotAFrame` for a frame refused whole.

    ``data_inputs``: target task -> source component -> stream -> (record type, field
    count), ``WireValidator.data_inputs``.
    """
    if type(frame) is not bytes:
        frame = bytes(frame)
    try:
        return read_messages(Reader(frame), task_component, data_inputs)
    except UnicodeDecodeError as e:  # a str of invalid UTF-8, anywhere in the frame
        raise Undecodable(str(e)) from None


@cython.locals(_message=cython.Py_ssize_t, n=cython.Py_ssize_t, at=cython.Py_ssize_t)
def read_messages(r: Reader, task_component: dict, data_inputs: dict) -> list[Any]:
    n = array_len(r)
    if n < 0:
        top = read_value(r, 0)
        if r.pos != r.end:
            raise Undecodable("extra data after the frame")
        raise NotAFrame(f"a frame is a list of messages, got {type(top).__name__}")
    if n > r.end - r.pos:
        raise Undecodable("truncated")
    out = []
    for _message in range(n):
        at = r.pos
        if array_len(r) != 3:
            r.pos = at
            out.append(read_value(r, 1))  # no message: the validator refuses it
            continue
        kind = read_value(r, 2)
        task = read_value(r, 2)
        at = r.pos
        rows_to_read = type(kind) is str and kind == "data" and type(task) is int and task in data_inputs
        if rows_to_read and array_len(r) >= 0:
            r.pos = at
            rows = read_rows(r, task_component, data_inputs[task])
            if type(rows) is list:
                out.append(("data", task, rows))
                continue
            r.pos = at
            read_value(r, 2)  # the rest of a refused message, read only for what msgpack refuses
            out.append(RowsRefused(rows))
        else:
            r.pos = at
            out.append([kind, task, read_value(r, 2)])
    if r.pos != r.end:
        raise Undecodable("extra data after the frame")
    return out
