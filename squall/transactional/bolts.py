"""Batch bolts: the user's side of a transactional topology's bolts.

A :class:`BatchBolt` sees one batch: a fresh instance is made for every
transaction attempt, ``process`` gets every tuple of the batch meant for
this task, and ``finish_batch`` runs once all of them have arrived (Squall
knows because every upstream task reports how many it sent).  A committer
(``class C(Committer, BatchBolt)`` or ``spec(..., committer=True)``) has
``finish_batch`` run in the commit phase, strictly in txid order.

No acking or anchoring: Squall does it.  ``raise FailedException`` fails the
batch, which is replayed; any other exception is reported and fails it too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from squall.topology.component import DEFAULT_STREAM, Component, ComponentSpec
from squall.transactional.attempt import TransactionAttempt


class BatchBolt(Component):
    @classmethod
    def spec(cls, name: str | None = None, inputs: Any = None, par: int = 1, tasks: int | None = None,
             config: Mapping[str, Any] | None = None, committer: bool = False,
             **options: Any) -> ComponentSpec:
        outputs = options.pop("outputs", None)
        spec = ComponentSpec(cls, "bolt", name=name, inputs=inputs, par=par, tasks=tasks, config=config,
                             outputs=outputs, options=options)
        spec.committer = bool(committer) or issubclass(cls, Committer)  # type: ignore[attr-defined]
        return spec

    def initialize(self, conf: dict[str, Any], context: Any, attempt: TransactionAttempt) -> None:  # type: ignore[override]
        """Called on this batch's fresh instance before its first tuple."""

    def process(self, tup: Any) -> None:
        """One tuple of the batch."""

    def finish_batch(self) -> None:
        """Every tuple of the batch for this task has been processed."""

    @classmethod
    def task_cleanup(cls, context: Any) -> None:
        """The task is stopping (once, not per batch): let go of what it kept across batches."""

    def emit(self, values: Any, stream: str = DEFAULT_STREAM, direct_task: int | None = None) -> Any:
        msg = f"{type(self).__name__}.emit called outside a running transactional topology"
        raise RuntimeError(msg)


class Committer:
    """Marker: this batch bolt's ``finish_batch`` belongs to the commit phase (Storm's ICommitter)."""

    # True for a committer that skips a txid it has committed before, whole (Storm's
    # transactional rule): exact only when a replay carries the same batch, so a
    # topology pairing it with an opaque spout, whose replays may differ, is refused.
    skips_replayed_txids = False
