"""What a child's commands mean: the protocol state of one shell bolt or spout.

The sessions are pure: no threads, pipes or clocks.  They turn the
child's messages into calls on the component (emit, ack, fail, log,
report) and tell the I/O side what to write, through callbacks.  Protocol
faults Storm treats as fatal raise :class:`ProtocolError`; the owner then
kills the child, fails what was in flight and starts a new one.

Storm's rules, and where Squall differs on purpose:

* bolt ``ack``/``fail`` of an id that is not in flight (never sent, or
  already settled) is fatal in Storm.  Here it is reported and ignored:
  nothing is in flight under that id, so nothing can be lost, and an input
  is never acked twice.
* an emit anchored to an id not in flight is fatal (as in Storm): the
  tuple would escape its tree.
* an emit Squall refuses (undeclared stream, wrong arity, a value the wire
  cannot carry) is reported, and the inputs it was anchored to fail when
  the child acks them, as when an in-process bolt raises; a spout emit
  with a message id is failed back to the child.  The child still gets its
  task ids (``[]``), so it does not hang waiting for them.
* unknown bolt commands are ignored (Storm); for a spout they are fatal.
* a known command with a field of the wrong type (``anchors`` that are not
  tuple ids, a non-string ``stream``, a non-integer ``task``, a ``tuple``
  that is not a list, an ``ack`` id that is not a string or an integer, a
  non-string log ``msg``) is fatal, as Storm's casts are.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable
from typing import Any

from squall.errors import SerializationError
from squall.multilang import protocol
from squall.multilang.errors import ProtocolError, ShellProcessError
from squall.topology.component import DEFAULT_STREAM

# Errors an emit can raise for what the child sent (not for a Squall bug).
EMIT_ERRORS = (ValueError, TypeError, SerializationError)


class Common:
    """log, error and metrics: the same for bolts and spouts."""

    def __init__(self, *, log: Callable[[str, str], None], report: Callable[[BaseException], None],
                 metrics: dict[str, Any], registered: frozenset[str] | None, registry: Any = None) -> None:
        self._log = log
        self._report = report
        self.metrics = metrics
        self.registered = registered
        # The task's MetricsRegistry, where a child's metrics join the component's own.
        self.registry = registry if hasattr(registry, "counter") else None

    def on_log(self, message: dict[str, Any]) -> None:
        self._log(protocol.log_level(message.get("level")), protocol.text_field(message, "msg"))

    def on_error(self, message: dict[str, Any]) -> None:
        self._report(ShellProcessError(f"Shell Process Exception: {protocol.text_field(message, 'msg')}"))

    def on_metrics(self, message: dict[str, Any]) -> None:
        """CountShellMetric semantics for numbers (``null`` is +1); other values are kept as sent."""
        name = message.get("name")
        if type(name) is not str or not name:
            self._report(ProtocolError(f"metrics command without a metric name: {message!r}"))
            return
        if self.registered is not None and name not in self.registered:
            self._report(ProtocolError(f"Could not find metric by name[{name}] "
                                       f"(registered: {sorted(self.registered)})"))
            return
        params = message.get("params")
        if params is None:
            params = 1
        old = self.metrics.get(name, 0)
        numeric = (int, float)
        if type(params) in numeric and type(old) in numeric:
            self.metrics[name] = old + params
        else:
            self.metrics[name] = params
        self._log("debug", f"metric {name} = {self.metrics[name]!r}")
        if self.registry is not None:
            try:
                if type(params) in numeric and params >= 0:
                    self.registry.counter(name).inc(params)
                else:
                    self.registry.gauge(name).set(params)
            except ValueError as e:  # a name used before as another kind, or a bad name
                self._report(ProtocolError(f"metric {name!r}: {e}"))


class BoltSession(Common):
    """One bolt child's tuples in flight (wire id -> Tuple) and its commands."""

    def __init__(self, *, emit: Callable[..., Any], ack: Callable[[Any], None], fail: Callable[[Any], None],
                 reply: Callable[[list[int]], None], **common: Any) -> None:
        super().__init__(**common)
        self._emit = emit
        self._ack = ack
        self._fail = fail
        self._reply = reply
        self.inputs: dict[str, Any] = {}
        # Inputs an emit anchored to them was refused for: acking them fails them.
        self.doomed: set[str] = set()
        # Wire ids count up from a random signed 64-bit start (Storm draws each at
        # random): unique in the session with no lookup, as unguessable at the start.
        self._ids = itertools.count(protocol.id_start())

    def tuple_message(self, tup: Any) -> dict[str, Any]:
        """Register ``tup`` as in flight; the message that sends it to the child."""
        tid = str(next(self._ids))
        self.inputs[tid] = tup
        return {"id": tid, "comp": tup.component, "stream": tup.stream, "task": tup.task, "tuple": tup.values}

    def forget(self, tid: str) -> None:
        self.inputs.pop(tid, None)

    def lost(self) -> list[Any]:
        """Every input still in flight (the child is gone); the session is emptied."""
        out = list(self.inputs.values())
        self.inputs.clear()
        self.doomed.clear()
        return out

    def handle_many(self, messages: list[Any]) -> None:
        """:meth:`handle` each message, the common emits and acks inline (the hot path)."""
        inputs = self.inputs
        emit = self._emit
        ack = self._ack
        reply = self._reply
        handle = self.handle
        doomed = self.doomed
        for m in messages:
            if type(m) is dict:
                command = m.get("command")
                if command == "ack":
                    tid = m.get("id")
                    if not doomed and type(tid) is str:
                        tup = inputs.pop(tid, None)
                        if tup is not None:
                            ack(tup)
                            continue
                elif command == "emit":
                    # Only well-typed fields take this path: the full one checks and says what is wrong.
                    values = m.get("tuple")
                    ids = m.get("anchors", ())
                    stream = m.get("stream", DEFAULT_STREAM)
                    need = m.get("need_task_ids")
                    if (type(values) is list and type(ids) in (list, tuple) and type(stream) is str
                            and (need is None or type(need) is bool) and "task" not in m):
                        anchors = []
                        for aid in ids:
                            tup = inputs.get(aid) if type(aid) is str else None
                            if tup is None:
                                break  # the full path says why
                            anchors.append(tup)
                        else:
                            try:
                                tasks = emit(values, anchors, stream or DEFAULT_STREAM)
                            except EMIT_ERRORS as e:
                                self._report(e)
                                doomed.update(ids)
                                tasks = ()
                            if need is None or need:
                                reply(list(tasks))
                            continue
            handle(m)

    def handle(self, message: Any) -> None:
        if type(message) is not dict:
            msg = f"expected an object from the child, got {message!r}"
            raise ProtocolError(msg)
        command = message.get("command")
        if command == "emit":
            self.on_emit(message)
        elif command == "ack":
            self.on_settle(message, True)
        elif command == "fail":
            self.on_settle(message, False)
        elif command == "sync":
            pass
        elif command == "log":
            self.on_log(message)
        elif command == "error":
            self.on_error(message)
        elif command == "metrics":
            self.on_metrics(message)
        elif command is None:
            msg = f"message without a 'command': {message!r}"
            raise ProtocolError(msg)
        # Anything else: ignored, as Storm's ShellBolt does.

    def on_emit(self, message: dict[str, Any]) -> None:
        values = protocol.emitted_values(message)
        task = protocol.direct_task(message)
        stream = protocol.stream_of(message, DEFAULT_STREAM)
        ids = protocol.anchor_ids(message.get("anchors"))
        wants = protocol.wants_task_ids(message, task)
        inputs = self.inputs
        anchors = []
        for aid in ids:
            tup = inputs.get(aid)
            if tup is None:
                msg = f"Anchored onto {aid} after ack/fail (or an id never sent)"
                raise ProtocolError(msg)
            anchors.append(tup)
        try:
            tasks = self._emit(values, anchors=anchors, stream=stream, direct_task=task)
        except EMIT_ERRORS as e:
            self._report(e)
            self.doomed.update(ids)
            tasks = ()
        if wants:
            self._reply(list(tasks))

    def on_settle(self, message: dict[str, Any], ok: bool) -> None:
        tid = protocol.settled_id(message)
        tup = self.inputs.pop(tid, None)
        if tup is None:
            verb = "Acked" if ok else "Failed"
            self._report(ProtocolError(f"{verb} a non-existent or already acked/failed id: {tid}"))
            return
        if tid in self.doomed:
            self.doomed.discard(tid)
            ok = False
        if ok:
            self._ack(tup)
        else:
            self._fail(tup)


class SpoutSession(Common):
    """A spout child's command queue: one command at a time, each ended by ``sync``.

    The queue outlives a child: acks and fails that were waiting, or that
    the child never answered, go to the next one, and a new child is
    activated first if the topology is active.
    """

    def __init__(self, *, emit: Callable[..., Any], send: Callable[[dict[str, Any]], None],
                 reply: Callable[[list[int]], None], **common: Any) -> None:
        super().__init__(**common)
        self._emit = emit
        self._send = send
        self._reply = reply
        self.commands: deque[tuple[str, Any]] = deque()
        self.awaiting: tuple[str, Any] | None = None
        self.attached = False
        self.active = False
        # The last next was answered with no emit: the owner waits a moment before the
        # next one, as Storm's spout wait strategy does after an empty nextTuple.
        self.idle = False
        self._emits = 0

    def want(self, command: str, msg_id: Any = "") -> None:
        if command in ("activate", "deactivate"):
            self.active = command == "activate"
        self.commands.append((command, msg_id))
        self.pump()

    def next(self) -> bool:
        """Ask for tuples if the child is free; True if a ``next`` went out."""
        if not self.attached or self.awaiting is not None:
            return False
        if self.commands:
            self.pump()
            return False
        self._write(("next", ""))
        return True

    def pump(self) -> None:
        if self.attached and self.awaiting is None and self.commands:
            self._write(self.commands.popleft())

    def _write(self, command: tuple[str, Any]) -> None:
        self.awaiting = command
        if command[0] == "next":
            self._emits = 0
            self.idle = False
        self._send(protocol.spout_command(*command))

    def attach(self) -> None:
        """A new child is ready: activate it if the topology is active, then resume the queue."""
        kept = [c for c in self.commands if c[0] in ("ack", "fail")]
        self.commands = deque(kept)
        if self.active:
            self.commands.appendleft(("activate", ""))
        self.attached = True
        self.pump()

    def detach(self) -> None:
        """The child is gone; an ack or fail it may not have seen goes to the next one."""
        self.attached = False
        if self.awaiting is not None and self.awaiting[0] in ("ack", "fail"):
            self.commands.appendleft(self.awaiting)
        self.awaiting = None

    def handle_many(self, messages: list[Any]) -> None:
        for message in messages:
            self.handle(message)

    def handle(self, message: Any) -> None:
        if type(message) is not dict:
            msg = f"expected an object from the child, got {message!r}"
            raise ProtocolError(msg)
        command = message.get("command")
        if command == "emit":
            self.on_emit(message)
        elif command == "sync":
            if self.awaiting is not None and self.awaiting[0] == "next":
                self.idle = self._emits == 0
            self.awaiting = None
            self.pump()
        elif command == "log":
            self.on_log(message)
        elif command == "error":
            self.on_error(message)
        elif command == "metrics":
            self.on_metrics(message)
        else:
            msg = (f"Unknown command received: {command!r} (a spout child may send emit, sync, log, "
                   f"error and metrics)")
            raise ProtocolError(msg)

    def on_emit(self, message: dict[str, Any]) -> None:
        self._emits += 1
        values = protocol.emitted_values(message)
        task = protocol.direct_task(message)
        stream = protocol.stream_of(message, DEFAULT_STREAM)
        wants = protocol.wants_task_ids(message, task)
        msg_id = message.get("id")  # any value: it only goes back to the child
        try:
            tasks = self._emit(values, tup_id=msg_id, stream=stream, direct_task=task)
        except EMIT_ERRORS as e:
            self._report(e)
            tasks = ()
            if msg_id is not None:
                self.commands.append(("fail", msg_id))
        if wants:
            self._reply(list(tasks))
