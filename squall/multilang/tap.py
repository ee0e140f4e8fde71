"""A recording of the bytes between a shell component and its child.

Set ``topology.multilang.tap.dir`` and every child gets a file there,
``<component>-<task>-<n>.tap`` (n counts the children of that task), holding
each write and read exactly as it crossed the pipes, with the time.  Read
it back with :func:`read_tap`, or as messages with :func:`transcript`.
"""

from __future__ import annotations

import struct
import threading
import time
from typing import Any, BinaryIO

_RECORD = struct.Struct(">cdI")


class Tap:
    """Records every byte written to and read from a child, for debugging and tests.

    Each record is a direction byte (``P`` parent to child, ``C`` child to
    parent), the monotonic time as a big-endian double, a 4-byte length,
    then the bytes, exactly as they crossed the pipe.
    """

    def __init__(self, path: str) -> None:
        self._file: BinaryIO = open(path, "ab")  # noqa: SIM115 - closed by close()
        self._lock = threading.Lock()

    def record(self, direction: bytes, data: bytes) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.write(_RECORD.pack(direction, time.monotonic(), len(data)) + data)
                self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()


def read_tap(path: str) -> list[tuple[str, float, bytes]]:
    """The records of a tap file, in order: ``(direction, time, bytes)``, direction ``"P"`` or ``"C"``."""
    out = []
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    size = _RECORD.size
    while pos + size <= len(data):
        direction, when, n = _RECORD.unpack_from(data, pos)
        out.append((direction.decode(), when, data[pos + size:pos + size + n]))
        pos += size + n
    return out


def transcript(path: str, codec: Any) -> list[tuple[str, float, Any]]:
    """The messages of a tap file, in order: ``(direction, time, message)``."""
    decoders = {"P": codec.decoder(), "C": codec.decoder()}
    return [(d, when, m) for d, when, data in read_tap(path) for m in decoders[d].feed(data)]
