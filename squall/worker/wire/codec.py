# cython: boundscheck=False, wraparound=False, initializedcheck=False
"""What may cross the wire, and the one encoder of its frames (msgpack, never pickle).

msgpack's own types cross, and the types features register as extensions
(:mod:`squall.worker.wire.value_types`: a TransactionAttempt).

``check_values`` runs on every emit: a type test per value, deep only for
containers, so an unserializable value is caught where it was emitted, in
every mode, not when it first happens to cross workers.

:func:`encode` writes a batch's frame: exactly the bytes ``msgpack.packb(...,
use_bin_type=True, default=pack_ext)`` writes for the same messages, a data
message's Tuples as rows ``[id, src_task, stream, values, anchors]``
(tests/worker/test_codec.py holds it to msgpack itself), but read off the Tuples
and written straight into one buffer, with no row made first.  Every tuple
that crosses workers is packed by it, and in a GIL'd worker the packing
thread's time is time the executors do not get.  A value msgpack would refuse
raises :class:`SerializationError` naming whoever emitted it (the cheap
emit-time check lets through a few, such as lone surrogates).

A :class:`RemoteBatch` packs earlier still: an executor's rows for a task of
another worker are written as they are emitted, in the emitting thread, and
:func:`encode` copies them into the frame as they are (:class:`PackedRows`).

One source for both runs: the interpreter runs this file as it is, and
``python -m squall.compiled build`` compiles it with the C types of
``codec.pxd`` (Cython's pure-Python mode).  The grammar, the row layout and
every decision are written here once; what needs C (the buffer, a str's UTF-8
read in place, an int's sign and width, a Tuple's C fields) is a handful of
primitives, codec.pxd's and tuple.pxd's, that this file defines again for the
interpreter over a bytearray and the Tuple's slots.
"""

from __future__ import annotations

import struct
from typing import Any

import cython
import msgpack
from msgpack import ExtType, Timestamp

from squall.errors import SerializationError
from squall.worker.wire.value_types import PLAIN_TYPES, pack_ext, registered

# msgpack's scalars and the registered extension types (a TransactionAttempt, the
# first value of every tuple of a transactional topology): the registry's own set.
_SCALARS = PLAIN_TYPES
_INT_MIN = -(1 << 63)
_INT_MAX = (1 << 64) - 1


def _ok(value: Any, depth: int = 0) -> bool:
    t = type(value)
    if t in _SCALARS:
        return True
    if t is int:
        return _INT_MIN <= value <= _INT_MAX
    if depth > 64:
        return False
    if t is list or t is tuple:
        return all(_ok(v, depth + 1) for v in value)
    if t is dict:
        return all(_ok(k, depth + 1) and _ok(v, depth + 1) for k, v in value.items())
    return t is bytearray


def check_values(values: Any, fields: tuple[str, ...], component: str, stream: str) -> None:
    """Raise :class:`SerializationError` naming the field and type at fault."""
    for value in values:
        t = type(value)
        if t in _SCALARS or (t is int and _INT_MIN <= value <= _INT_MAX):
            continue
        if not _ok(value):
            _refuse(values, fields, component, stream)


def _refuse(values: Any, fields: tuple[str, ...], component: str, stream: str) -> None:
    for name, value in zip(fields, values, strict=False):
        if not _ok(value):
            what = type(value).__name__
            if type(value) is int:
                what = f"int {value} (outside the 64-bit range)"
            extensions = "".join(f" and a {entry.cls.__name__}" for entry in registered())
            msg = (
                f"component {component!r} emitted {what} in field {name!r} of stream {stream!r}; "
                "only None, bool, int (64-bit), float, str, bytes, list, tuple, dict"
                f"{extensions} can be emitted"
            )
            raise SerializationError(msg)


def try_serialize(values: Any, fields: tuple[str, ...], component: str, stream: str) -> None:
    """The full check (``topology.testing.always.try.serialize``): really pack it."""
    check_values(values, fields, component, stream)
    try:
        msgpack.packb(list(values), use_bin_type=True, default=pack_ext)
    except Exception as e:
        msg = f"component {component!r} emitted values on stream {stream!r} that msgpack cannot pack: {e}"
        raise SerializationError(msg) from e


# -- the encoder ---------------------------------------------------------------------------
# A batch on the wire: a list of messages [kind, task, payload].
# Data payload: rows [id, src_task, stream, values, anchors].

MAX_LEN32 = 0xFFFF_FFFF  # msgpack's longest array, map, str, bin or ext
BELOW_64 = 0x1_0000_0000  # the smallest uint msgpack writes in 8 bytes
# msgpack's packer refuses an object nested deeper than this (the frame itself is at 0).
NEST_LIMIT = 1024
FIELD_DEPTH = 4  # a row's fields: in the row, in the payload, in the message, in the frame
FRAME_START = 8192  # the first buffer of a frame
BATCH_KEEP = 1 << 16  # a RemoteBatch's buffer grown past this is let go at take(), not kept:
# a worker has a batch per executor and remote task, and a turn of a few hundred rows fits

if not cython.compiled:  # codec.pxd's C primitives, in the interpreter: the buffer is a bytearray
    from squall.topology.tuple import Tuple
    from squall.topology.tuple_fields import edge_of, id_is_edge, id_of, root_of, roots_of, row_in_fields

    Buf = bytearray
    buffer_size = len
    buffer_bytes = bytes
    put_byte = bytearray.append
    put_bytes = bytearray.extend
    capacity_of = bytearray.__alloc__
    _HEADED = {1: struct.Struct(">BB").pack, 2: struct.Struct(">BH").pack, 4: struct.Struct(">BI").pack,
               8: struct.Struct(">BQ").pack}
    _LOW = {1: 0xFF, 2: 0xFFFF, 4: 0xFFFF_FFFF, 8: 0xFFFF_FFFF_FFFF_FFFF}
    _F64 = struct.Struct(">d")
    _U64 = struct.Struct(">Q")
    _MAX_U64 = 0xFFFF_FFFF_FFFF_FFFF
    _MIN_I64 = -(1 << 63)

    def new_buffer(cap: int) -> bytearray:
        return bytearray()

    def truncate(b: bytearray, size: int) -> None:
        del b[size:]

    def put_be(b: bytearray, head: int, v: int, nbytes: int) -> None:
        b += _HEADED[nbytes](head, v & _LOW[nbytes])

    def utf8_size(s: str) -> int:
        return len(s) if str.isascii(s) else len(str.encode(s))

    def put_utf8(b: bytearray, s: str, n: int) -> None:
        b += str.encode(s)

    def float_bits(d: float) -> int:
        return _U64.unpack(_F64.pack(d))[0]

    def not_negative(v: int) -> bool:
        return v >= 0

    def fits_u64(v: int) -> bool:
        return v <= _MAX_U64

    def fits_i64(v: int) -> bool:
        return v >= _MIN_I64

    def plain_tuple(t: type) -> bool:
        return t is tuple or t.__base__ is tuple

    def as_u64(v: Any) -> Any:
        return v

    as_i64 = as_tuple = as_u64


if cython.compiled:

    @cython.final
    @cython.freelist(8)
    @cython.cclass
    class Buf:
        """Bytes being written, in C memory that codec.pxd's primitives grow and fill."""

        def __dealloc__(self) -> None:
            free_buffer(self)  # noqa: F821 - codec.pxd's, as the class is built only


# -- msgpack's grammar -------------------------------------------------------------------


def put_header(b: Buf, n: int, fix: int, fixmax: int, h8: int, h16: int, h32: int) -> int:
    """A length header: the fix form below ``fixmax``, else the smallest of 8, 16 and 32
    bits (``h8`` 0 where the type has no 8-bit form)."""
    if n < fixmax:
        return put_byte(b, fix | n)
    if h8 and n < 0x100:
        return put_be(b, h8, n, 1)
    if n < 0x10000:
        return put_be(b, h16, n, 2)
    if n <= MAX_LEN32:
        return put_be(b, h32, n, 4)
    raise ValueError(f"{n} items or bytes, more than msgpack can hold")


def put_uint(b: Buf, v: int) -> int:
    if v < 0x80:
        return put_byte(b, v)
    if v < 0x100:
        return put_be(b, 0xCC, v, 1)
    if v < 0x10000:
        return put_be(b, 0xCD, v, 2)
    if v < BELOW_64:
        return put_be(b, 0xCE, v, 4)
    return put_be(b, 0xCF, v, 8)


def put_negative(b: Buf, v: int) -> int:
    if v >= -32:
        return put_byte(b, v & 0xFF)
    if v >= -128:
        return put_be(b, 0xD0, v, 1)
    if v >= -32768:
        return put_be(b, 0xD1, v, 2)
    if v >= -2147483648:
        return put_be(b, 0xD2, v, 4)
    return put_be(b, 0xD3, v, 8)


def put_int(b: Buf, v: int) -> int:
    if not_negative(v):
        if fits_u64(v):
            return put_uint(b, as_u64(v))
    elif fits_i64(v):
        return put_negative(b, as_i64(v))
    return put_registered(b, v)  # past 64 bits msgpack tries its default hook, which refuses it


@cython.locals(n=cython.Py_ssize_t)
def put_str(b: Buf, s: str) -> int:
    n = utf8_size(s)  # a lone surrogate raises, as it does in msgpack
    put_header(b, n, 0xA0, 32, 0xD9, 0xDA, 0xDB)
    return put_utf8(b, s, n)


def put_bin(b: Buf, data: Any) -> int:
    put_header(b, len(data), 0, 0, 0xC4, 0xC5, 0xC6)
    return put_bytes(b, data)


@cython.locals(n=cython.Py_ssize_t)
def put_ext(b: Buf, code: int, data: bytes) -> int:
    n = len(data)
    if n == 1:  # fixext 1, 2, 4, 8 and 16
        put_byte(b, 0xD4)
    elif n == 2:
        put_byte(b, 0xD5)
    elif n == 4:
        put_byte(b, 0xD6)
    elif n == 8:
        put_byte(b, 0xD7)
    elif n == 16:
        put_byte(b, 0xD8)
    elif n < 0x100:
        put_be(b, 0xC7, n, 1)
    elif n < 0x10000:
        put_be(b, 0xC8, n, 2)
    elif n <= MAX_LEN32:
        put_be(b, 0xC9, n, 4)
    else:
        raise ValueError("EXT data is too large")
    put_byte(b, code & 0xFF)
    return put_bytes(b, data)


def put_registered(b: Buf, v: Any) -> int:
    """``v`` through msgpack's ``default`` hook, pack_ext: a registered type's extension,
    a TypeError for anything else."""
    ext = pack_ext(v)
    return put_ext(b, ext.code, ext.data)


@cython.locals(t=type)
def put_value(b: Buf, v: Any, depth: int) -> int:
    """``v``, found at ``depth`` in the frame: the exact types rows carry first, then the rest
    in the order msgpack's packer tests them."""
    if depth > NEST_LIMIT:
        raise ValueError("recursion limit exceeded.")
    t = type(v)
    if t is str:
        return put_str(b, v)
    if t is int:
        return put_int(b, v)
    if v is None:
        return put_byte(b, 0xC0)
    if t is bool:
        return put_byte(b, 0xC3 if v else 0xC2)
    if t is float:
        return put_be(b, 0xCB, float_bits(v), 8)
    if t is bytes:
        return put_bin(b, v)
    if t is list:
        return put_items(b, v, depth)
    if t is dict:
        return put_map(b, v, depth)
    if plain_tuple(t):  # a values record too
        return put_tuple(b, as_tuple(v), depth)
    return put_other(b, v, depth)


def put_tuple(b: Buf, items: tuple, depth: int) -> int:
    put_header(b, len(items), 0x90, 16, 0, 0xDC, 0xDD)
    for item in items:
        put_value(b, item, depth + 1)
    return 0


def put_items(b: Buf, items: Any, depth: int) -> int:
    """A list, or another sequence msgpack writes as an array."""
    put_header(b, len(items), 0x90, 16, 0, 0xDC, 0xDD)
    for item in items:
        put_value(b, item, depth + 1)
    return 0


def put_map(b: Buf, d: Any, depth: int) -> int:
    put_header(b, len(d), 0x80, 16, 0, 0xDE, 0xDF)
    for key, value in d.items():
        put_value(b, key, depth + 1)
        put_value(b, value, depth + 1)
    return 0


def put_other(b: Buf, v: Any, depth: int) -> int:
    """A value of no exact type :func:`put_value` takes (a subclass, an extension type),
    tested in msgpack's order."""
    if isinstance(v, int):
        return put_int(b, v)
    if isinstance(v, float):
        return put_be(b, 0xCB, float_bits(v), 8)
    if isinstance(v, (bytes, bytearray)):
        return put_bin(b, v)
    if isinstance(v, str):
        return put_str(b, v)
    if isinstance(v, dict):
        return put_map(b, v, depth)
    if isinstance(v, ExtType):
        return put_ext(b, v.code, v.data)
    if type(v) is Timestamp:
        return put_ext(b, -1, v.to_bytes())
    if isinstance(v, (list, tuple)):
        return put_items(b, v, depth)
    if isinstance(v, memoryview):
        if not v.c_contiguous:
            raise BufferError("memoryview: underlying buffer is not C-contiguous")
        return put_bin(b, v.tobytes())
    return put_registered(b, v)


# -- rows ----------------------------------------------------------------------------------


def put_tree_row(b: Buf, edge: int, task: Any, stream: Any, values: Any, root: int) -> int:
    """The row of a tuple of one tree whose id is its edge, from its parts."""
    put_byte(b, 0x95)
    put_uint(b, edge)
    return put_tree_rest(b, task, stream, values, root, edge)


def put_tree_rest(b: Buf, task: Any, stream: Any, values: Any, root: int, edge: int) -> int:
    """What follows the id in the row of a tuple of one tree."""
    put_value(b, task, FIELD_DEPTH)
    put_value(b, stream, FIELD_DEPTH)
    put_value(b, values, FIELD_DEPTH)
    put_byte(b, 0x81)  # the map msgpack writes for {root: edge}, with no dict made
    put_uint(b, root)
    return put_uint(b, edge)


@cython.locals(tup=Tuple)
def put_row(b: Buf, t: Any) -> int:
    """One data row ``[id, src_task, stream, values, anchors]`` of a tuple."""
    if row_in_fields(t):  # nearly every row, built: read off the Tuple's C fields
        tup = t
        if id_is_edge(tup):
            return put_tree_row(b, edge_of(tup), tup.task, tup.stream, tup.values, root_of(tup))
        put_byte(b, 0x95)
        put_value(b, id_of(tup), FIELD_DEPTH)
        return put_tree_rest(b, tup.task, tup.stream, tup.values, root_of(tup), edge_of(tup))
    put_byte(b, 0x95)
    put_value(b, t.id, FIELD_DEPTH)
    put_value(b, t.task, FIELD_DEPTH)
    put_value(b, t.stream, FIELD_DEPTH)
    put_value(b, t.values, FIELD_DEPTH)
    return put_value(b, roots_of(t), FIELD_DEPTH)


def put_rows(b: Buf, rows: list) -> int:
    """A data payload: a row per tuple; the error for one msgpack refuses names its emitter."""
    put_header(b, len(rows), 0x90, 16, 0, 0xDC, 0xDD)
    t = None
    try:
        for t in rows:
            put_row(b, t)
    except Exception as e:
        raise refusal(t, e) from e
    return 0


def refusal(t: Any, error: Exception) -> SerializationError:
    component, stream = getattr(t, "component", None), getattr(t, "stream", None)
    err = SerializationError(f"component {component!r} emitted values on stream {stream!r} that msgpack "
                             f"cannot pack: {error}")
    err.component = component
    err.task = getattr(t, "task", None)
    return err


@cython.final
@cython.cclass
class PackedRows:
    """Data rows already packed (by a :class:`RemoteBatch`): ``count`` rows, the bytes
    msgpack writes for them one after the other, without the array header."""

    if not cython.compiled:
        __slots__ = ("count", "data")

    def __init__(self, count: int, data: bytes) -> None:
        self.count = count
        self.data = data

    def __len__(self) -> int:
        return self.count


@cython.final
@cython.cclass
class RemoteBatch:
    """The rows one executor emits to one task of another worker, packed as they are emitted.

    The executor's emitters call :meth:`append` (a list's ``append`` for a
    task in this worker).  Packing here, in the emitting thread, instead of on the
    send thread, means the Tuple is read while it is still in cache and freed at
    once, and the send thread only copies bytes: it used to spend a third of
    its time freeing the Tuples, records and anchor maps it had packed, made
    milliseconds before by another thread and cold by then.

    A Tuple whose row msgpack refuses (a lone surrogate among its values) is
    kept as it is, and so is every Tuple after it until :meth:`take`, so that
    the rows still reach the target in the order they were emitted, and
    :func:`encode` names its emitter.
    """

    if not cython.compiled:
        __slots__ = ("buf", "kept", "rows")

    def __init__(self) -> None:
        self.buf = new_buffer(0)  # allocated at the first row: many batches never get one
        self.rows = 0
        self.kept = []

    def ready(self) -> bool:
        """Whether the next row may be packed: not once one is kept, so that the rows
        stay in order, nor past msgpack's longest array."""
        return not self.kept and self.rows < MAX_LEN32

    @cython.locals(mark=cython.Py_ssize_t)
    def append(self, t: Any) -> None:
        if self.ready():
            mark = buffer_size(self.buf)
            try:
                put_row(self.buf, t)
            except Exception:  # noqa: BLE001 - kept as it is: encode names its emitter
                truncate(self.buf, mark)  # drop the part of the row written
            else:
                self.rows += 1
                return
        self.kept.append(t)

    @cython.locals(mark=cython.Py_ssize_t)
    def put_tree(self, edge: int, task: Any, stream: Any, values: Any, root: int) -> int:
        """The row of a tuple of one tree whose id is its edge, written from its parts with
        no Tuple made: 0, or 1 (nothing written) where the caller must make the Tuple and
        :meth:`append` it."""
        if not self.ready():
            return 1
        mark = buffer_size(self.buf)
        try:
            put_tree_row(self.buf, edge, task, stream, values, root)
        except Exception:  # noqa: BLE001 - the caller appends the Tuple, kept as it is
            truncate(self.buf, mark)
            return 1
        self.rows += 1
        return 0

    def __len__(self) -> int:
        return self.rows + len(self.kept)

    def take(self) -> list[Any]:
        """What was appended since the last take, as data payloads in order: a
        :class:`PackedRows`, then the list of Tuples kept as they are (each if any)."""
        out: list[Any] = []
        if self.rows:
            out.append(PackedRows(self.rows, buffer_bytes(self.buf)))
            self.rows = 0
            if capacity_of(self.buf) > BATCH_KEEP:
                self.buf = new_buffer(0)
            else:
                truncate(self.buf, 0)
        if self.kept:
            out.append(self.kept)
            self.kept = []
        return out


@cython.locals(b=Buf, packed=PackedRows)
def encode(messages: list[tuple[str, int, Any]]) -> bytes:
    """``messages`` ([kind, task, payload] each) as one frame; a data payload is a list of
    Tuples or a :class:`PackedRows`, a tick's is written None."""
    b = new_buffer(FRAME_START)
    try:
        put_header(b, len(messages), 0x90, 16, 0, 0xDC, 0xDD)
        for kind, task, payload in messages:
            put_byte(b, 0x93)
            put_value(b, kind, 2)
            put_value(b, task, 2)
            if kind != "data":
                put_value(b, None if kind == "tick" else payload, 2)
            elif type(payload) is PackedRows:
                packed = payload  # rows packed as they were emitted: copied as they are
                put_header(b, packed.count, 0x90, 16, 0, 0xDC, 0xDD)
                put_bytes(b, packed.data)
            else:
                put_rows(b, payload if type(payload) is list else list(payload))
    except SerializationError:
        raise
    except Exception as e:
        raise SerializationError(f"cannot serialize a batch for the wire: {e}") from e
    return buffer_bytes(b)
