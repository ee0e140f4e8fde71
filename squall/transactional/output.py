"""What every part of a transactional topology emits through: batch tuples
counted per target task, and the count tuples that prove a batch complete.

Batch tuples go out untracked (no edge ids, no acker traffic): the counts
sent at the end of a batch say how many each task must receive.  The count
tuples are tracked, anchored to what the sending task held for the batch,
so one acker tree per batch covers the whole topology.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from squall.topology.component import DEFAULT_STREAM
from squall.transactional.attempt import TransactionAttempt

BATCH_STREAM = "$batch"  # coordinator -> emitters: (tx, meta, committed)
COMMIT_STREAM = "$commit"  # coordinator -> committers (and opaque emitters): (tx)
COUNT_STREAM = "$coord"  # task -> each downstream task: (tx, count), direct


def coordinator_name(spout: str) -> str:
    return f"{spout}/coordinator"


class NotTheAttempt(ValueError):
    """An emit whose first value is not the batch's attempt."""


class BatchOutput:
    """One task's emitting side.  ``current`` is the batch being worked on;
    ``emit`` (handed to user code) checks and counts against it."""

    def __init__(self, component: str, raw_emit: Callable[..., Any], count_targets: list[int]) -> None:
        self.component = component
        self.raw_emit = raw_emit
        self.count_targets = count_targets
        self.current: Any = None  # a Track (anything with .attempt and .sent)
        self.emit = self._make_emit()

    def _make_emit(self) -> Callable[..., Any]:
        raw = self.raw_emit
        seq = (list, tuple)
        holder = self
        component = self.component

        def emit(values: Any, stream: str | None = DEFAULT_STREAM, direct_task: int | None = None) -> Any:
            if stream is None:
                stream = DEFAULT_STREAM
            tr = holder.current
            if tr is None:
                msg = f"component {component!r} emitted outside a batch"
                raise NotTheAttempt(msg)
            if type(values) not in seq or not values or (values[0] is not tr.attempt
                                                         and values[0] != tr.attempt):
                first = values[0] if type(values) in seq and values else None
                msg = (f"component {component!r} emitted {values!r} on stream {stream!r}: the first value "
                       f"of every tuple in a transactional topology is the batch's attempt "
                       f"({tr.attempt!r}), got {first!r}")
                raise NotTheAttempt(msg)
            tasks = raw(values, None, stream, direct_task)
            sent = tr.sent
            for t in tasks:
                sent[t] = sent.get(t, 0) + 1
            return tasks

        return emit

    def send_counts(self, attempt: TransactionAttempt, sent: dict[int, int], anchor: Any) -> None:
        """Tell every downstream task how many tuples of this batch it got from
        this task, zero included: the zero is how a task that received nothing
        learns that its batch is complete."""
        raw = self.raw_emit
        for task in self.count_targets:
            raw([attempt, sent.get(task, 0)], anchor, COUNT_STREAM, task)


def count_targets(context: Any) -> list[int]:
    """Every task of every component subscribed to this component's count stream."""
    plan = context.plan
    targets: list[int] = []
    for target, _inp in plan.subscribers.get(context.component_id, {}).get(COUNT_STREAM, []):
        targets.extend(plan.component_tasks[target])
    return sorted(targets)


def count_sources(context: Any) -> dict[str, int]:
    """Upstream component -> its task count, for every component whose counts this one gets."""
    plan = context.plan
    cdef = plan.components[context.component_id]
    return {i.component: len(plan.component_tasks[i.component]) for i in cdef.inputs
            if i.stream == COUNT_STREAM}
