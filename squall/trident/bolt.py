"""The batch bolt that runs one group of Trident operations (squall.trident.execution) inside
the transactional core's coordinated bolt: a fresh instance per batch attempt, the task's
prepared operations and states kept across batches.

``options["group"]`` (encoded): the group's nodes (their parents outside the group cut to
the fields they carry), its entries (stream -> node, side) and exits (node -> streams and
how each is partitioned).
"""

from __future__ import annotations

import zlib
from typing import Any

from squall.transactional.bolts import BatchBolt, Committer
from squall.trident.execution import BatchRun, Program
from squall.trident.spout import decode
from squall.worker.executors import routing

# What each task made once: (component, task) -> its Program (operations prepared, states made).
_PROGRAMS: dict[tuple[str, int], tuple[Program, dict[str, Any]]] = {}
CHUNK = 256  # rows to a tuple between two groups


def task_routes(group: dict[str, Any], context: Any) -> dict[int, list[tuple[str, Any]]]:
    """node id -> (stream, choose(values, attempt) -> target tasks) for each of its exits."""
    out: dict[int, list[tuple[str, Any]]] = {}
    for node_id, exits in group["exits"].items():
        for stream, kind, target, key in exits:
            tasks = sorted(context.component_tasks[target])
            out.setdefault(node_id, []).append((stream, chooser(kind, tasks, key, context.this_task_index)))
    return out


def chooser(kind: str, tasks: list[int], key: list[int], index: int) -> Any:
    """An edge's grouping as squall.worker.executors.routing's groupings pick (the same hash for fields,
    so a state's writer and its queries agree on partitions), given the row and the attempt."""
    if kind == "fields":
        pick = routing.fields(tasks, key)
        return lambda values, attempt: pick(values, None)
    if kind in ("all", "global", "identity"):
        chosen = tuple(tasks) if kind == "all" else (tasks[0],) if kind == "global" else (
            tasks[index % len(tasks)],)
        return lambda values, attempt: chosen
    if kind == "batch_global":  # a whole batch to one task, by its txid
        return lambda values, attempt: (tasks[zlib.crc32(str(attempt.txid).encode()) % len(tasks)],)
    spread = routing.shuffle(tasks)  # shuffle, local_or_shuffle
    return lambda values, attempt: spread(values, None)


def task_program(options: dict[str, Any], conf: dict[str, Any], context: Any,
                 reporter: Any) -> tuple[Program, dict[str, Any]]:
    key = (context.component_id, context.task_id)
    found = _PROGRAMS.get(key)
    if found is not None and found[1].get("_source") is options["group"]:
        return found
    group = decode(options["group"])
    group["_source"] = options["group"]
    states = {}
    index, n = context.this_task_index, len(context.this_component_tasks)
    for node in group["nodes"]:
        if node.op is not None and hasattr(node.op, "prepare"):
            node.op.prepare(conf, context)
        if node.state is not None:
            states[node.id] = node.state.factory.make_state(conf, context, index, n)
    exits = {node_id: True for node_id in group["exits"]}
    program = Program(group["nodes"], exits, states, reporter, index)
    _PROGRAMS[key] = (program, group)
    return program, group


class TridentBolt(BatchBolt):
    """One group's operations over one batch attempt."""

    def initialize(self, conf: dict[str, Any], context: Any, attempt: Any) -> None:  # type: ignore[override]
        self.program, self.group = task_program(self.options, conf, context, self._report)
        self.attempt = attempt
        self.index = context.this_task_index
        self.routes = task_routes(self.group, context)
        self.buffers: dict[tuple[str, int], list[list[Any]]] = {}
        self.run = BatchRun(self.program, attempt, self._send)

    @classmethod
    def task_cleanup(cls, context: Any) -> None:
        """The task stops: its operations' ``cleanup()`` and its states' ``close()``."""
        found = _PROGRAMS.pop((context.component_id, context.task_id), None)
        if found is None:
            return
        program = found[0]
        for node in program.nodes:
            if node.op is not None and hasattr(node.op, "cleanup"):
                node.op.cleanup()
        for state in program.states.values():
            close = getattr(state, "close", None)
            if callable(close):
                close()

    def _report(self, exc: BaseException) -> None:
        reporter = getattr(self, "report_error", None)
        if callable(reporter):
            reporter(exc)

    def process(self, tup: Any) -> None:
        node, side, chunked = self.group["entries"][f"{tup.component}/{tup.stream}"]
        if chunked:  # rows, many to a tuple
            push = self.run.input(node, side)
            for row in tup.values[1]:
                push(row)
        else:
            self.run.receive(node, list(tup.values[1:]), side)

    def finish_batch(self) -> None:
        self.run.finish()
        for (stream, task), rows in self.buffers.items():
            if rows:
                self.emit([self.attempt, rows], stream=stream, direct_task=task)
        self.buffers = {}

    def _send(self, node: Any, values: list[Any]) -> None:
        """A row out of the group: to the tasks its stream's partitioning picks, CHUNK rows to
        a tuple (the rest when the batch finishes)."""
        for stream, choose in self.routes[node.id]:
            for task in choose(values, self.attempt):
                rows = self.buffers.setdefault((stream, task), [])
                rows.append(values)
                if len(rows) >= CHUNK:
                    self.emit([self.attempt, rows], stream=stream, direct_task=task)
                    self.buffers[(stream, task)] = []


class TridentCommitterBolt(Committer, TridentBolt):
    """A group that updates a state: its batches finish in the commit phase, in txid order."""
