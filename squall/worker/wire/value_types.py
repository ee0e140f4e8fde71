"""Types beyond msgpack's own that may cross the wire, registered by the features that define them.

The engine knows msgpack's types only.  A feature whose values cross workers
(transactional: a ``TransactionAttempt`` leads every tuple of its topologies)
calls :func:`register` when its module is imported, giving a msgpack
extension code and the class's pack and unpack; the serializer, the wire
decoder and the emit-time check then take it like a scalar.  The engine never
imports a feature to learn its types: a worker imports the classes of its
components before it receives anything (``Worker``), and every component a
feature's values reach is that feature's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import msgpack


class WireType(NamedTuple):
    code: int  # msgpack extension type code, 0-127 (the application's range)
    cls: type
    pack: Callable[[Any], bytes]  # a value -> the extension's payload
    # A fresh unpack (payload -> value) for each decoded frame: it may hand equal
    # payloads of one frame the same object (the transactional bolts test identity).
    unpacker: Callable[[], Callable[[bytes], Any]]


# Values of these types need no deeper check to cross: msgpack's scalars and every
# registered class.  A set grown in place, never replaced: the emitters and
# check_values hold this very object, so a registration reaches them whenever it
# happens and the hot path's check stays one set lookup, as with a frozenset.
PLAIN_TYPES: set[type] = {str, float, bool, type(None), bytes}

_by_code: dict[int, WireType] = {}
_by_class: dict[type, WireType] = {}


def register(code: int, cls: type, pack: Callable[[Any], bytes],
             unpacker: Callable[[], Callable[[bytes], Any]]) -> None:
    """Let ``cls`` cross the wire as msgpack extension ``code``.  Registering the same
    class again (a module reloaded) replaces it; another class under a taken code raises."""
    if type(code) is not int or not 0 <= code <= 127:
        msg = f"a msgpack extension code is an int from 0 to 127, got {code!r}"
        raise ValueError(msg)
    held = _by_code.get(code)
    if held is not None and _name(held.cls) != _name(cls):
        msg = f"msgpack extension code {code} is taken by {_name(held.cls)}, cannot give it to {_name(cls)}"
        raise ValueError(msg)
    if held is not None:
        _by_class.pop(held.cls, None)
        PLAIN_TYPES.discard(held.cls)
    entry = WireType(code, cls, pack, unpacker)
    _by_code[code] = entry
    _by_class[cls] = entry
    PLAIN_TYPES.add(cls)


def registered() -> list[WireType]:
    return sorted(_by_code.values(), key=lambda entry: entry.code)


def _name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def pack_ext(value: Any) -> Any:
    """msgpack's ``default`` hook: a registered type as its extension; anything else is refused."""
    entry = _by_class.get(type(value))
    if entry is None:
        msg = f"cannot serialize {type(value).__name__}"
        raise TypeError(msg)
    return msgpack.ExtType(entry.code, entry.pack(value))


def ext_hook(strict: bool) -> Callable[[int, bytes], Any]:
    """msgpack's ``ext_hook`` for one frame.  An unregistered code raises ValueError when
    ``strict`` (the wire validator: such a frame is refused), else stays an ``ExtType``."""
    unpacks: dict[int, Callable[[bytes], Any]] = {}

    def hook(code: int, data: bytes) -> Any:
        unpack = unpacks.get(code)
        if unpack is None:
            entry = _by_code.get(code)
            if entry is None:
                if strict:
                    msg = f"unknown msgpack extension type {code}"
                    raise ValueError(msg)
                return msgpack.ExtType(code, data)
            unpack = unpacks[code] = entry.unpacker()
        return unpack(data)

    return hook
