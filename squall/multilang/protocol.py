"""Storm's multilang messages and the parent's end of one child's pipes.

:class:`ShellConnection` works over any pair of binary streams (pipes in
production, ``BytesIO`` in tests): it frames messages with a codec,
performs the handshake and reads whatever the child wrote.  It holds no
threads and no clock; :mod:`squall.multilang.process` adds those.

Message shapes follow Storm as it really behaves (see multilang.md): the
bolt tuple ``{"id", "comp", "stream", "task", "tuple"}`` with a string id,
heartbeats with ``comp: null``, spout commands that always carry ``id``
(``""`` for next/activate/deactivate), task-id replies as bare arrays.
"""

from __future__ import annotations

import os
import random
from typing import Any, BinaryIO

from squall.multilang.codec import CHUNK, JsonCodec, MsgpackCodec
from squall.multilang.errors import OutputClosed, ProtocolError

HEARTBEAT_STREAM = "__heartbeat"

# Storm's log levels (STORM-414); anything else is INFO.
LOG_LEVELS = {0: "trace", 1: "debug", 2: "info", 3: "warning", 4: "error"}

_rng = random.Random(int.from_bytes(os.urandom(16), "little"))


def new_id() -> str:
    """A wire id as Storm makes them: ``Long.toString(rand.nextLong())``, a string
    because JavaScript cannot hold 64-bit integers."""
    return str(_rng.getrandbits(64) - (1 << 63))


def id_start() -> int:
    """Where a session's counted wire ids start: random, with 2**40 ids to go before
    they would leave the signed 64-bit range (JavaScript children parse them as strings)."""
    return _rng.randrange(-(1 << 63), (1 << 63) - (1 << 40))


def handshake_message(conf: dict[str, Any], context: dict[str, Any], pid_dir: str) -> dict[str, Any]:
    return {"conf": conf, "pidDir": pid_dir, "context": context}


def bolt_tuple(tid: str, component: str | None, stream: str, task: int, values: Any) -> dict[str, Any]:
    return {"id": tid, "comp": component, "stream": stream, "task": task, "tuple": values}


def heartbeat() -> dict[str, Any]:
    return bolt_tuple(new_id(), None, HEARTBEAT_STREAM, -1, [])


def spout_command(command: str, msg_id: Any = "") -> dict[str, Any]:
    return {"command": command, "id": msg_id}


def parse_pid(message: Any) -> int:
    if type(message) is not dict or type(message.get("pid")) is not int:
        msg = f"expected {{\"pid\": <int>}} as the child's first message, got {message!r}"
        raise ProtocolError(msg)
    return message["pid"]


def shown(value: Any, limit: int = 200) -> str:
    """``repr(value)`` cut to ``limit`` characters, for error messages about a child's input."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def log_level(value: Any) -> str:
    """Storm's mapping of a ``log`` command's level; missing or odd values are INFO."""
    if type(value) is int:
        return LOG_LEVELS.get(value, "info")
    return "info"


def text_field(message: dict[str, Any], field: str) -> str:
    """The ``msg`` of a ``log`` or ``error`` command: a string, or absent (empty)."""
    value = message.get(field)
    if value is None:
        return ""
    if type(value) is not str:
        msg = f"{message.get('command')} with a non-string {field!r}: {shown(value)}"
        raise ProtocolError(msg)
    return value


def _is_id(value: Any) -> bool:
    return type(value) is str or type(value) is int


def anchor_ids(value: Any) -> list[str]:
    """``anchors`` as a child sends it: absent, one tuple id, or a list of ids.

    An id is a string (what Squall sends) or an integer (a child that parsed
    it); anything else -- a nested list, an object, a float, a boolean -- is
    a protocol fault.
    """
    if value is None:
        return []
    if type(value) is list:
        for a in value:
            if not _is_id(a):
                msg = f"emit with an anchor that is not a tuple id (string or integer): {shown(a)}"
                raise ProtocolError(msg)
        return [a if type(a) is str else str(a) for a in value]
    if _is_id(value):
        return [value if type(value) is str else str(value)]
    msg = f"emit with 'anchors' neither a tuple id nor a list of them: {shown(value)}"
    raise ProtocolError(msg)


def settled_id(message: dict[str, Any]) -> str:
    """The tuple id of a bolt's ``ack`` or ``fail``: a string (an integer is taken as one)."""
    tid = message.get("id")
    if type(tid) is str:
        return tid
    if type(tid) is int:
        return str(tid)
    msg = f"{message.get('command')} without a tuple id (string or integer): 'id' is {shown(tid)}"
    raise ProtocolError(msg)


def stream_of(message: dict[str, Any], default: str) -> str:
    """The ``stream`` of an emit: a string; absent, null or empty means ``default``."""
    stream = message.get("stream")
    if stream is None or stream == "":
        return default
    if type(stream) is not str:
        msg = f"emit with a non-string stream: {shown(stream)}"
        raise ProtocolError(msg)
    return stream


def direct_task(message: dict[str, Any]) -> int | None:
    """The ``task`` of a direct emit: any integer (Storm >= 2.6 wrongly demands a Long)."""
    task = message.get("task")
    if task is None:
        return None
    if type(task) is not int:
        msg = f"emit with a non-integer direct task {shown(task)}"
        raise ProtocolError(msg)
    return task


def wants_task_ids(message: dict[str, Any], task: int | None) -> bool:
    """A reply is owed for a non-direct emit unless ``need_task_ids`` is false (absent means true).

    ``need_task_ids`` is a boolean (Storm casts it to one), checked for direct emits too.
    """
    need = message.get("need_task_ids")
    if need is not None and type(need) is not bool:
        msg = f"emit with a non-boolean need_task_ids: {shown(need)}"
        raise ProtocolError(msg)
    if task is not None:
        return False
    return need is None or need


def emitted_values(message: dict[str, Any]) -> list[Any]:
    values = message.get("tuple")
    if type(values) is not list:
        msg = f"emit without a 'tuple' list: {shown(message)}"
        raise ProtocolError(msg)
    return values


class ShellConnection:
    """The parent's end of a child's stdin/stdout, over any binary streams.

    ``reader.read(n)`` must return what is available (one ``read`` call of
    an unbuffered pipe, or a ``BytesIO``), and ``b""`` only at end of file.
    """

    def __init__(self, codec: JsonCodec | MsgpackCodec, reader: BinaryIO, writer: BinaryIO,
                 max_message_bytes: int | None = None) -> None:
        self.codec = codec
        self.reader = reader
        self.writer = writer
        self.decoder = codec.decoder(max_message_bytes)
        self._pending: list[Any] = []

    # -- writing -------------------------------------------------------------

    def encode(self, message: Any) -> bytes:
        return self.codec.encode(message)

    def write(self, data: bytes) -> None:
        """Write all of ``data`` (an unbuffered pipe may take it in parts)."""
        view = memoryview(data)
        while view:
            n = self.writer.write(view)
            if n is None:  # a non-blocking stream that took nothing
                n = 0
            view = view[n:]
        self.writer.flush()

    def send(self, message: Any) -> None:
        self.write(self.encode(message))

    # -- reading -------------------------------------------------------------

    def read_available(self) -> list[Any]:
        """One read: the messages it completed (maybe none).

        Raises :class:`OutputClosed` (a ChildWentAway) at end of file and
        :class:`ProtocolError` on bytes that are not the protocol.
        """
        if self._pending:
            out, self._pending = self._pending, []
            return out
        data = self.reader.read(CHUNK)
        if not data:
            raise OutputClosed
        return self.decoder.feed(data)

    def read(self) -> Any:
        """The next whole message, reading as much as it takes."""
        while not self._pending:
            self._pending = self.decoder.feed(self._read_some())
        return self._pending.pop(0)

    def _read_some(self) -> bytes:
        data = self.reader.read(CHUNK)
        if not data:
            raise OutputClosed
        return data

    def take_pending(self) -> list[Any]:
        """Messages already decoded but not yet returned (read past the handshake)."""
        out, self._pending = self._pending, []
        return out

    # -- handshake -----------------------------------------------------------

    def send_handshake(self, conf: dict[str, Any], context: dict[str, Any], pid_dir: str) -> None:
        self.send(handshake_message(conf, context, pid_dir))

    def handshake(self, conf: dict[str, Any], context: dict[str, Any], pid_dir: str) -> int:
        """Send the setup message and block until ``{"pid": N}``; returns N.

        Anything the child wrote after its pid (pystorm logs at once) stays
        available through :meth:`take_pending`.
        """
        self.send_handshake(conf, context, pid_dir)
        return parse_pid(self.read())
