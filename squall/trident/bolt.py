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

# What each task made once: (component, task) -> its Program (operations prepared, states made).
_PROGRAMS: dict[tuple[str, int], tuple[Program, dict[str, Any]]] = {}


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
    program = Program(group["nodes"], exits, states, reporter, index, n)
    _PROGRAMS[key] = (program, group)
    return program, group


class TridentBolt(BatchBolt):
    """One group's operations over one batch attempt."""

    def initialize(self, conf: dict[str, Any], context: Any, attempt: Any) -> None:  # type: ignore[override]
        self.program, self.group = task_program(self.options, conf, context, self._report)
        self.attempt = attempt
        self.targets = {name: context.component_tasks[name] for name in self.group["targets"]}
        self.index = context.this_task_index
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
        if chunked:  # a spout's rows, many to a tuple
            for row in tup.values[1]:
                self.run.receive(node, row, side)
        else:
            self.run.receive(node, list(tup.values[1:]), side)

    def finish_batch(self) -> None:
        self.run.finish()

    def _send(self, node: Any, values: list[Any]) -> None:
        for stream, kind, target in self.group["exits"][node.id]:
            if kind == "identity":
                tasks = self.targets[target]
                self.emit([self.attempt, *values], stream=stream, direct_task=tasks[self.index % len(tasks)])
            elif kind == "batch_global":
                tasks = self.targets[target]
                pick = zlib.crc32(str(self.attempt.txid).encode()) % len(tasks)
                self.emit([self.attempt, *values], stream=stream, direct_task=tasks[pick])
            else:
                self.emit([self.attempt, *values], stream=stream)


class TridentCommitterBolt(Committer, TridentBolt):
    """A group that updates a state: its batches finish in the commit phase, in txid order."""
