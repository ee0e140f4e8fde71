"""Squall's Python adapter for multilang children: write a subprocess bolt or
spout without pystorm.  It speaks Storm's protocol, so it runs under Storm too.

    from squall.multilang.child import Bolt

    class Split(Bolt):
        def process(self, tup):
            for word in tup.values.sentence.split():
                self.emit([word])          # anchored to tup; tup acked after process()

    if __name__ == "__main__":
        Split().run()

or, without a ``__main__`` block: ``python -m squall.multilang.child mymodule:Split``.

The API follows pystorm's (``process``, ``process_tick``, ``emit``, ``ack``,
``fail``, ``log``, ``next_tuple``, ``auto_ack``/``auto_anchor``/``auto_fail``).
Differences: an exception in ``process`` fails the tuple and is reported,
and the child keeps going (as an in-process Squall bolt does; set
``exit_on_exception = True`` for pystorm's exit); output is written in
batches, flushed whenever the child is about to wait for input; and
``print()`` goes to stderr, which the parent logs, so it cannot corrupt
the protocol.  The serializer is the parent's (it says which in the
``SQUALL_MULTILANG_SERIALIZER`` environment variable), else JSON.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import select
import sys
import time
import traceback
from collections import deque, namedtuple
from typing import Any

from squall.multilang.codec import codec_for
from squall.multilang.errors import ParentWentAway, ProtocolError

EXIT_OK = 0
EXIT_PARENT_WENT_AWAY = 0  # stdin closed: the parent is shutting us down
EXIT_ERROR = 1  # an exception with exit_on_exception, or in initialize
EXIT_PROTOCOL = 3  # the parent sent something that is not the protocol

SERIALIZER_ENV = "SQUALL_MULTILANG_SERIALIZER"
CHUNK = 1 << 20
FLUSH_BYTES = 1 << 16
FLUSH_SECS = 0.05
# Storm's spout protocol is one command at a time, each a round trip, and waking a
# process whose CPU went idle costs ~25 us on a virtual machine: polling briefly
# first took this adapter's spout from 6.4K to 9.3K tuples/s.  Bolts do not poll:
# their input comes in batches, and an idle bolt would spin for nothing.
SPIN_SECS = 0.0002
SYNC = {"command": "sync"}
_LEVELS = {"trace": 0, "debug": 1, "info": 2, "warn": 3, "warning": 3, "error": 4, "critical": 4}

Tuple = namedtuple("Tuple", "id component stream task values")


class Pipe:
    """The child's end: decoded input set apart into commands and task-id replies,
    output gathered and written in batches."""

    def __init__(self, serializer: str, in_fd: int, out_fd: int) -> None:
        codec = codec_for(serializer)
        self.encode = codec.encode
        self.decoder = codec.decoder()
        self.in_fd = in_fd
        self.out_fd = out_fd
        self.inbox: deque[Any] = deque()
        self.commands: deque[Any] = deque()
        self.task_ids: deque[Any] = deque()
        self.out: list[bytes] = []
        self.out_bytes = 0
        self.flushed_at = time.monotonic()
        # A spout polls up to SPIN_SECS for the parent's next command before it blocks,
        # while the parent's commands come that fast (see SPIN_SECS).
        self.spin = False
        self.answers_fast = True

    def send(self, message: Any) -> None:
        data = self.encode(message)
        self.out.append(data)
        self.out_bytes += len(data)
        if self.out_bytes >= FLUSH_BYTES or time.monotonic() - self.flushed_at > FLUSH_SECS:
            self.flush()

    def flush(self) -> None:
        self.flushed_at = time.monotonic()
        if not self.out:
            return
        data = b"".join(self.out) if len(self.out) > 1 else self.out[0]
        self.out.clear()
        self.out_bytes = 0
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self.out_fd, view):]
        except (BrokenPipeError, ConnectionResetError) as e:
            raise ParentWentAway(str(e)) from e

    def maybe_flush(self) -> None:
        if self.out and time.monotonic() - self.flushed_at > FLUSH_SECS:
            self.flush()

    def _fill(self) -> None:
        self.flush()  # about to wait: the parent must have everything we said
        started = time.perf_counter()
        if self.spin and self.answers_fast:
            while not select.select([self.in_fd], [], [], 0)[0] and time.perf_counter() - started < SPIN_SECS:
                pass
        data = os.read(self.in_fd, CHUNK)
        self.answers_fast = time.perf_counter() - started < 2 * SPIN_SECS
        if not data:
            raise ParentWentAway("end of file on stdin")
        self.inbox.extend(self.decoder.feed(data))

    def next_message(self) -> Any:
        while not self.inbox:
            self._fill()
        return self.inbox.popleft()

    def next_command(self) -> dict[str, Any]:
        if self.commands:
            return self.commands.popleft()
        while True:
            message = self.next_message()
            if type(message) is list:
                self.task_ids.append(message)
            else:
                return message

    def next_task_ids(self) -> list[int]:
        if self.task_ids:
            return self.task_ids.popleft()
        while True:
            message = self.next_message()
            if type(message) is list:
                return message
            self.commands.append(message)


class ParentLogHandler(logging.Handler):
    """Python logging records sent to the parent as ``log`` commands."""

    def __init__(self, component: Component) -> None:
        super().__init__()
        self.component = component

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.component.log(self.format(record), level=record.levelname.lower())
        except Exception:  # noqa: BLE001 - logging must not kill the component
            self.handleError(record)


class Component:
    exit_on_exception = False

    def __init__(self, serializer: str | None = None, input_fd: int = 0, output_fd: int = 1) -> None:
        self.serializer = serializer or os.environ.get(SERIALIZER_ENV) or "json"
        self.input_fd = input_fd
        self.output_fd = output_fd
        self.pipe: Pipe | None = None
        self.conf: dict[str, Any] = {}
        self.context: dict[str, Any] = {}
        self.task_id: int | None = None
        self.component_name: str | None = None
        self.pid = os.getpid()
        self.logger = logging.getLogger(f"squall.multilang.child.{type(self).__name__}")

    # -- what users override -------------------------------------------------

    def initialize(self, conf: dict[str, Any], context: dict[str, Any]) -> None:
        """Called once after the handshake."""

    # -- what users call -----------------------------------------------------

    def log(self, message: str, level: str = "info") -> None:
        self._send({"command": "log", "msg": str(message), "level": _LEVELS.get(level, 2)})

    def report_error(self, message: str) -> None:
        """Reported by the parent as a component error; the component keeps running."""
        self._send({"command": "error", "msg": str(message)})

    def report_metric(self, name: str, value: Any = None) -> None:
        self._send({"command": "metrics", "name": name, "params": value})

    def send_message(self, message: dict[str, Any]) -> None:
        """Send a raw protocol message (for what the helpers above do not cover)."""
        self._send(message)

    # -- the loop ------------------------------------------------------------

    def run(self) -> None:
        """Handshake, then serve the parent until it goes away; exits the process."""
        sys.exit(self.serve())

    def serve(self) -> int:
        out_fd = self.output_fd
        if out_fd == 1:
            # Keep the real stdout for the protocol; print() and stray writes go to stderr.
            out_fd = os.dup(1)
            os.dup2(2, 1)
        self.pipe = Pipe(self.serializer, self.input_fd, out_fd)
        self.pipe.spin = isinstance(self, Spout)  # see SPIN_SECS
        try:
            self._handshake()
            try:
                self.initialize(self.conf, self.context)
            except Exception:  # noqa: BLE001
                self.report_error(f"initialize failed:\n{traceback.format_exc()}")
                self.pipe.flush()
                return EXIT_ERROR
            while True:
                self._serve_one()
        except ParentWentAway:
            return EXIT_PARENT_WENT_AWAY
        except ProtocolError as e:
            print(f"multilang protocol error: {e}", file=sys.stderr)
            return EXIT_PROTOCOL
        except _Exit as e:
            return e.code

    def _handshake(self) -> None:
        assert self.pipe is not None
        setup = self.pipe.next_command()
        self.conf = setup.get("conf") or {}
        self.context = setup.get("context") or {}
        self.task_id = self.context.get("taskid")
        self.component_name = self.context.get("componentid") or \
            self.context.get("task->component", {}).get(str(self.task_id))
        pid_dir = setup.get("pidDir")
        if pid_dir:
            open(os.path.join(pid_dir, str(self.pid)), "w").close()
        self._send({"pid": self.pid})
        self.pipe.flush()
        handler = ParentLogHandler(self)
        handler.setLevel(logging.INFO)
        self.logger.addHandler(handler)
        self.logger.setLevel(logging.DEBUG if self.conf.get("topology.debug") else logging.INFO)
        self.logger.propagate = False

    def _serve_one(self) -> None:
        raise NotImplementedError

    def _send(self, message: Any) -> None:
        if self.pipe is None:
            msg = f"{type(self).__name__} is not running (call run())"
            raise RuntimeError(msg)
        self.pipe.send(message)

    def _send_emit(self, message: dict[str, Any], direct_task: int | None,
                   need_task_ids: bool) -> list[int] | None:
        """Send a bolt's or spout's emit; the task ids when asked for (a direct
        emit knows its one task; any other waits for the parent's reply)."""
        if direct_task is not None:
            message["task"] = direct_task
            self._send(message)
            return [direct_task] if need_task_ids else None
        if not need_task_ids:
            message["need_task_ids"] = False
            self._send(message)
            return None
        self._send(message)
        assert self.pipe is not None
        return self.pipe.next_task_ids()

    def _failed(self, what: str) -> None:
        self.report_error(f"{what}\n{traceback.format_exc()}")
        if self.exit_on_exception:
            assert self.pipe is not None
            self.pipe.flush()
            raise _Exit(EXIT_ERROR)


class _Exit(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class Bolt(Component):
    auto_ack = True
    auto_anchor = True
    auto_fail = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._current: Tuple | None = None
        self._types: dict[tuple[str, str], type] = {}

    def process(self, tup: Tuple) -> None:
        raise NotImplementedError

    def process_tick(self, tup: Tuple) -> None:
        """A ``__tick`` tuple (``topology.tick.tuple.freq.secs``)."""

    def emit(self, values: Any, stream: str | None = None, anchors: Any = None,
             direct_task: int | None = None, need_task_ids: bool = False) -> list[int] | None:
        """Emit ``values``; anchored to the current tuple unless ``anchors`` says otherwise.

        With ``need_task_ids`` returns the task ids the tuple went to (a
        round trip to the parent; the default sends ``need_task_ids: false``).
        """
        message: dict[str, Any] = {"command": "emit", "tuple": list(values)}
        if stream is not None:
            message["stream"] = stream
        if anchors is None:
            anchors = [self._current] if self.auto_anchor and self._current is not None else []
        message["anchors"] = [a.id if isinstance(a, Tuple) else a for a in anchors]
        return self._send_emit(message, direct_task, need_task_ids)

    def ack(self, tup: Tuple | str) -> None:
        self._send({"command": "ack", "id": tup.id if isinstance(tup, Tuple) else tup})

    def fail(self, tup: Tuple | str) -> None:
        self._send({"command": "fail", "id": tup.id if isinstance(tup, Tuple) else tup})

    def _handshake(self) -> None:
        super()._handshake()
        for source, streams in (self.context.get("source->stream->fields") or {}).items():
            for stream, fields in streams.items():
                try:
                    self._types[(source, stream)] = namedtuple("Values", fields)  # type: ignore[misc]
                except ValueError:
                    continue  # field names Python cannot take: plain tuples

    def _serve_one(self) -> None:
        pipe = self.pipe
        assert pipe is not None
        message = pipe.next_command()
        comp = message.get("comp")
        stream = message.get("stream")
        task = message.get("task")
        if task == -1 and stream == "__heartbeat":
            pipe.send(SYNC)
            return
        values = message.get("tuple") or []
        record = self._types.get((comp, stream))
        tup = Tuple(message.get("id"), comp, stream, task,
                    record(*values) if record is not None and len(values) == len(record._fields)
                    else tuple(values))
        self._current = tup
        try:
            if comp == "__system" and stream == "__tick":
                self.process_tick(tup)
            else:
                self.process(tup)
        except _Exit:
            raise
        except Exception:  # noqa: BLE001 - the user's code: fail the tuple, report, go on
            if self.auto_fail:
                self.fail(tup)
            self._current = None
            self._failed(f"{type(self).__name__} raised while processing {tup!r}")
            return
        self._current = None
        if self.auto_ack:
            self.ack(tup)
        pipe.maybe_flush()


class Spout(Component):
    def next_tuple(self) -> None:
        """Emit zero or more tuples; the parent calls again soon after (sooner if it emitted)."""

    def ack(self, tup_id: Any) -> None:
        """The tuple tree of ``tup_id`` completed."""

    def fail(self, tup_id: Any) -> None:
        """The tuple tree of ``tup_id`` failed or timed out."""

    def activate(self) -> None:
        """The topology became active."""

    def deactivate(self) -> None:
        """The topology was deactivated."""

    def emit(self, values: Any, tup_id: Any = None, stream: str | None = None, direct_task: int | None = None,
             need_task_ids: bool = False) -> list[int] | None:
        """Emit ``values``; with ``tup_id`` the tuple is tracked and acked or failed back."""
        message: dict[str, Any] = {"command": "emit", "tuple": list(values)}
        if tup_id is not None:
            message["id"] = tup_id
        if stream is not None:
            message["stream"] = stream
        return self._send_emit(message, direct_task, need_task_ids)

    def _serve_one(self) -> None:
        pipe = self.pipe
        assert pipe is not None
        message = pipe.next_command()
        command = message.get("command")
        try:
            if command == "next":
                self.next_tuple()
            elif command == "ack":
                self.ack(message.get("id"))
            elif command == "fail":
                self.fail(message.get("id"))
            elif command == "activate":
                self.activate()
            elif command == "deactivate":
                self.deactivate()
            else:
                self.log(f"unknown command from the parent: {message!r}", level="warning")
        except _Exit:
            raise
        except Exception:  # noqa: BLE001
            self._failed(f"{type(self).__name__}.{command} raised")
        pipe.send(SYNC)


def load(ref: str) -> type[Component]:
    module_name, _, qualname = ref.partition(":")
    if not module_name or not qualname:
        msg = f"expected module:Class, got {ref!r}"
        raise SystemExit(msg)
    obj: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m squall.multilang.child",
        description="Run a squall.multilang.child component as a multilang child.")
    parser.add_argument("-s", "--serializer", choices=["json", "msgpack"], default=None,
                        help=f"default: ${SERIALIZER_ENV}, else json")
    parser.add_argument("component", help="module:Class of a Bolt or Spout subclass")
    # Storm may hand the whole command over as one string.
    args = parser.parse_args(argv[0].split() if argv and len(argv) == 1 else argv)
    sys.path.insert(0, os.getcwd())
    cls = load(args.component)
    return cls(serializer=args.serializer).serve()


if __name__ == "__main__":
    sys.exit(main())
