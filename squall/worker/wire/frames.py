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
each message that fails; the rest of the frame is delivered.  The checks are
inline, one ``type(...) is`` per field, on the hot path.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import msgpack

from squall.acker.ledger import PACKED_ACK
from squall.topology.tuple import Tuple, record_type
from squall.worker.wire.value_types import ext_hook

try:  # frames read in C (squall/worker/wire/fastwire.pyx), where it was built
    from squall.worker.wire.fastwire import decode as fast_decode
    from squall.worker.wire.fastwire import tuples as fast_tuples
except ImportError:
    fast_decode = fast_tuples = None

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
        if fast_decode is not None:
            parsed = fast_decode(frame, self.task_component, self.data_inputs)
            if parsed is not None:
                return self._checked(parsed)
        try:
            # Extension types registered by features (a TransactionAttempt); any other is refused.
            messages = msgpack.unpackb(frame, raw=False, strict_map_key=False, use_list=True,
                                       ext_hook=ext_hook(strict=True))
        except Exception as e:  # noqa: BLE001 - whatever msgpack makes of garbage
            self.rejected["undecodable"] += 1
            self.total_rejected += 1
            raise FrameRejected("undecodable", f"{type(e).__name__}: {e}") from None
        if type(messages) is not list:
            self.rejected["frame"] += 1
            self.total_rejected += 1
            raise FrameRejected("frame", f"a frame is a list of messages, got {type(messages).__name__}")
        return self._checked(messages)

    def _checked(self, messages: list[Any]) -> list[tuple[str, int, Any]]:
        out: list[tuple[str, int, Any]] = []
        for message in messages:
            if type(message) is tuple:  # data the C decoder read and checked
                out.append(message)
                continue
            try:
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
            by_source = self.data_inputs.get(task)
            if by_source is None:
                raise _Bad("task")
            if fast_tuples is not None:
                got = fast_tuples(self.task_component, by_source, payload)
                if type(got) is list:
                    return kind, task, got
                if got is not None:
                    raise _Bad(got)
            return kind, task, self._tuples(by_source, payload)
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

    def _tuples(self, by_source: dict[str, dict[str, tuple[type, int]]], rows: list[Any]) -> list[Tuple]:
        """Rows -> Tuples: the hot path, so every check is inline."""
        task_component = self.task_component
        new = tuple.__new__
        tuples = []
        append = tuples.append
        last_src = last_stream = None
        component = record = None
        nfields = 0
        for row in rows:
            if type(row) is not list or len(row) != 5:
                raise _Bad("shape")
            tid, src, stream, values, anchors = row
            if src != last_src or stream != last_stream or type(src) is not int:
                # Rows of a batch mostly share their source and stream: look up once per run.
                if type(src) is not int or type(stream) is not str:
                    raise _Bad("shape")
                component = task_component.get(src)
                streams = by_source.get(component) if component is not None else None
                entry = streams.get(stream) if streams is not None else None
                if entry is None:
                    raise _Bad("source")
                record, nfields = entry
                last_src, last_stream = src, stream
            if type(values) is not list or len(values) != nfields:
                raise _Bad("shape")
            if tid is not None and (type(tid) is not int or tid < 0):
                raise _Bad("shape")
            if anchors is not None:
                if type(anchors) is not dict:
                    raise _Bad("shape")
                for root, edge in anchors.items():
                    if type(root) is not int or type(edge) is not int or root < 0 or edge < 0:
                        raise _Bad("shape")
            append(Tuple(tid, component, stream, src, new(record, values), anchors))
        return tuples
