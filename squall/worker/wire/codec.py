"""What may cross the wire, and how batches are encoded (msgpack, never pickle).

msgpack's own types cross, and the types features register as extensions
(:mod:`squall.worker.wire.value_types`: a TransactionAttempt).

``check_values`` runs on every emit: a type test per value, deep only for
containers, so an unserializable value is caught where it was emitted, in
every mode, not when it first happens to cross workers.
"""

from __future__ import annotations

from typing import Any

import msgpack

from squall.errors import SerializationError
from squall.worker.wire.value_types import PLAIN_TYPES, pack_ext, registered

try:  # the same bytes from C (squall/worker/wire/fastwire.pyx), where it was built
    from squall.worker.wire.fastwire import PackedRows
    from squall.worker.wire.fastwire import encode as fast_encode
except ImportError:
    fast_encode = None
    PackedRows = None

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


# A batch on the wire: a list of messages [kind, task, payload].
# Data payload: rows [id, src_task, stream, values, anchors].

def encode(messages: list[tuple[str, int, Any]]) -> bytes:
    if fast_encode is not None:
        frame = fast_encode(messages)
        if frame is not None:
            return frame
    return generic_encode(messages)


def generic_encode(messages: list[tuple[str, int, Any]]) -> bytes:
    """:func:`encode` for every value that may cross, and the error that names the emitter."""
    out = []
    packed = False
    for kind, task, payload in messages:
        if kind == "data":
            if type(payload) is PackedRows:
                packed = True  # rows packed as they were emitted (fastwire.RemoteBatch)
            else:
                # A values record is a tuple: msgpack writes it as the array it is, no copy.
                payload = [(t.id, t.task, t.stream, t.values, t.anchors) for t in payload]
        elif kind == "tick":
            payload = None
        out.append((kind, task, payload))
    try:
        if not packed:
            return msgpack.packb(out, use_bin_type=True, default=pack_ext)
        # A frame is an array of messages, so it can be written a message at a time,
        # and the packed rows' bytes copied in after their message's header.
        packer = msgpack.Packer(use_bin_type=True, default=pack_ext)
        parts = [packer.pack_array_header(len(out))]
        for kind, task, payload in out:
            if type(payload) is PackedRows:
                parts += [packer.pack_array_header(3), packer.pack(kind), packer.pack(task),
                          packer.pack_array_header(payload.count), payload.data]
            else:
                parts.append(packer.pack((kind, task, payload)))
        return b"".join(parts)
    except Exception as e:
        raise _culprit(messages, e) from e


def _culprit(messages: list[tuple[str, int, Any]], error: Exception) -> SerializationError:
    """Name the emitter of what could not be packed (the cheap emit-time check
    lets through a few values msgpack refuses, such as lone surrogates)."""
    for kind, _task, payload in messages:
        if kind != "data" or type(payload) is PackedRows:
            continue  # packed rows were packed: they are not what failed
        for t in payload:
            try:
                msgpack.packb(list(t.values), use_bin_type=True, default=pack_ext)
            except Exception as e:  # noqa: BLE001 - this is the one
                err = SerializationError(
                    f"component {t.component!r} emitted values on stream {t.stream!r} that msgpack "
                    f"cannot pack: {e}")
                err.component = t.component
                err.task = t.task
                return err
    return SerializationError(f"cannot serialize a batch for the wire: {error}")
