"""What a worker accepts from the wire: frames decoded and checked, never trusted.

CURVE keeps strangers out; this keeps a buggy or hostile insider (a process
holding the topology's key) from reaching an executor with anything the
executors would not have sent themselves.  Only these kinds cross workers:

- ``data`` to a task whose component subscribes to the row's source stream:
  rows ``[id, src_task, stream, values, anchors]``;
- ``init`` (items ``[root, val, spout_task]``), ``ack`` (``[root, xor]``) and
  ``fail`` (roots) to an acker task;
- ``acked`` / ``failed`` (roots) to a spout task;
- ``bp`` (``[address, congested]``) to :data:`WORKER_TASK`.

``activate``, ``deactivate``, ``tick`` and ``call`` come from the worker
itself, never from the wire.  Ids, roots and XOR values are 64-bit unsigned
ints (``type(x) is int``: no bools, no floats; msgpack decodes no int above
2**64 - 1, so only the sign is checked).

:meth:`WireValidator.decode` raises :class:`FrameRejected` for a frame it
cannot read at all and drops (and counts in :attr:`WireValidator.rejected`)
each message that fails; the rest of the frame is delivered.  Frames are read
by the wire's one decoder (squall/worker/wire/reader.py), which checks a data
message's rows as it reads them into Tuples, one ``type(...) is`` per field;
the other kinds are checked here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from squall.acker.ledger import PACKED_ACK
from squall.topology.tuple import record_type
from squall.worker.wire.reader import NotAFrame, RowsRefused, Undecodable, read_frame

if TYPE_CHECKING:
    from squall.worker.plan import TopologyPlan

WORKER_TASK = -1
WIRE_KINDS = frozenset({"data", "init", "ack", "fail", "acked", "failed", "timedout", "bp"})
# Reasons a message or frame is dropped, as counted in Transfer.stats()["rejected"].
REASONS = ("undecodable", "frame", "kind", "task", "shape", "source", "oversize")


class FrameRejected(Exception):  # noqa: N818 - a verdict, not an error of ours
    """A frame that is not a list of messages; ``reason`` is one of :data:`REASONS`."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


class _Bad(Exception):  # noqa: N818 - control flow inside decode only
    def __init__(self, reason: str) -> None:
        self.reason = reason


class WireValidator:
    """Decodes frames for one worker: knows its tasks and the topology's streams."""

    def __init__(self, plan: TopologyPlan, local_tasks: Iterable[int]) -> None:
        local = set(local_tasks)
        kinds = {name: cdef.kind for name, cdef in plan.components.items()}
        self.task_component: dict[int, str] = dict(plan.task_component)
        self.acker_tasks = frozenset(t for t in local if kinds.get(plan.task_component.get(t)) == "acker")
        self.spout_tasks = frozenset(t for t in local if kinds.get(plan.task_component.get(t)) == "spout")
        self.all_spout_tasks = frozenset(t for t, c in plan.task_component.items() if kinds[c] == "spout")
        # target task -> source component -> stream -> (record type, field count): what routing
        # may send that task (plan.subscribers is what the emitters route by).
        inputs: dict[str, dict[str, dict[str, tuple[type, int]]]] = {}
        for source, by_stream in plan.subscribers.items():
            declared = plan.components[source].streams
            for stream, subs in by_stream.items():
                if stream not in declared:
                    continue
                fields = tuple(declared[stream].fields)
                for target, _inp in subs:
                    if kinds.get(target) == "bolt":
                        inputs.setdefault(target, {}).setdefault(source, {})[stream] = (
                            record_type(fields), len(fields))
        self.data_inputs: dict[int, dict[str, dict[str, tuple[type, int]]]] = {
            t: inputs[c] for t in local if (c := plan.task_component.get(t)) in inputs}
        self.rejected: dict[str, int] = dict.fromkeys(REASONS, 0)
        self.total_rejected = 0

    def decode(self, frame: bytes) -> list[tuple[str, int, Any]]:
        """The valid messages of ``frame``; invalid ones are counted and left out."""
        try:
            messages = read_frame(frame, self.task_component, self.data_inputs)
        except (Undecodable, NotAFrame) as e:
            reason = "undecodable" if type(e) is Undecodable else "frame"
            self.rejected[reason] += 1
            self.total_rejected += 1
            raise FrameRejected(reason, str(e)) from None
        out: list[tuple[str, int, Any]] = []
        for message in messages:
            if type(message) is tuple:  # data, its rows read and checked by the reader
                out.append(message)
                continue
            try:
                if type(message) is RowsRefused:
                    raise _Bad(message.reason)
                out.append(self._message(message))
            except _Bad as bad:
                self.rejected[bad.reason] += 1
                self.total_rejected += 1
        return out

    def _message(self, message: Any) -> tuple[str, int, Any]:
        if type(message) is not list or len(message) != 3:
            raise _Bad("frame")
        kind, task, payload = message
        if type(kind) is not str or kind not in WIRE_KINDS:
            raise _Bad("kind")
        if type(task) is not int:
            raise _Bad("task")
        if kind == "ack" and type(payload) is bytes:  # pairs packed (squall.acker.ledger.PACKED_ACK)
            if task not in self.acker_tasks:
                raise _Bad("task")
            if len(payload) % PACKED_ACK.size:
                raise _Bad("shape")
            return kind, task, payload  # any 16 bytes are a root and a value
        if type(payload) is not list:
            raise _Bad("shape")
        if kind == "data":
            # The reader reads the rows of every data message to a task that takes some:
            # one left here goes to a task that takes none.
            raise _Bad("task")
        if kind == "ack":
            if task not in self.acker_tasks:
                raise _Bad("task")
            for item in payload:
                if type(item) is not list or len(item) != 2:
                    raise _Bad("shape")
                root, val = item
                if type(root) is not int or type(val) is not int or root < 0 or val < 0:
                    raise _Bad("shape")
            return kind, task, payload
        if kind == "init":
            if task not in self.acker_tasks:
                raise _Bad("task")
            spouts = self.all_spout_tasks
            for item in payload:
                if type(item) is not list or len(item) != 3:
                    raise _Bad("shape")
                root, val, spout = item
                if type(root) is not int or type(val) is not int or root < 0 or val < 0:
                    raise _Bad("shape")
                if type(spout) is not int or spout not in spouts:
                    raise _Bad("task")
            return kind, task, payload
        if kind == "bp":
            if task != WORKER_TASK:
                raise _Bad("task")
            if len(payload) != 2 or type(payload[0]) is not str or type(payload[1]) is not bool:
                raise _Bad("shape")
            return kind, task, payload
        # fail (to an acker), acked / failed / timedout (to a spout): a list of roots.
        if task not in (self.acker_tasks if kind == "fail" else self.spout_tasks):
            raise _Bad("task")
        for root in payload:
            if type(root) is not int or root < 0:
                raise _Bad("shape")
        return kind, task, payload
