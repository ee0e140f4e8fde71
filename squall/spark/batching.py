"""When a Spark bolt sends a batch: a pure core, no threads, no clock.

The executor thread asks the :class:`Batcher` after every tuple, tick and
finished job, passing the time; the answer is one :class:`Action`:

* ``SEND``: hand the pending tuples to the job thread now -- the batch is
  full (``spark.bolt.batch.size``), old (``spark.bolt.batch.ms``), or a tick
  asked for a flush, and no job is running;
* ``BLOCK``: a job is running and the next batch reached
  ``spark.bolt.batch.max.size``: wait for the job, then send (the receive
  queue fills up behind us and the spouts slow down);
* ``NONE``: keep gathering.

One job runs at a time and the next batch fills while it runs: Spark's cost
per batch barely depends on its size (spark.md: 100 and 10,000 rows cost
about the same), so when Spark is slower than the input the batches grow
instead of the queue, and acking keeps up.
"""

from __future__ import annotations

import enum
from typing import Any


class Action(enum.Enum):
    NONE = "none"
    SEND = "send"
    BLOCK = "block"


class Batcher:
    def __init__(self, size: int, max_age: float, max_size: int) -> None:
        max_size = max(max_size, size)
        self.size = size
        self.max_age = max_age
        self.max_size = max_size
        self.pending: list[Any] = []
        self.first_at: float | None = None
        self.in_flight = False
        self.flush_requested = False

    def add(self, item: Any, now: float) -> Action:
        if not self.pending:
            self.first_at = now
        self.pending.append(item)
        return self.decide(now)

    def tick(self, now: float) -> Action:
        """A tick tuple: flush what is pending, now or when the running job ends."""
        if self.pending:
            self.flush_requested = True
        return self.decide(now)

    def decide(self, now: float) -> Action:
        n = len(self.pending)
        if not n:
            return Action.NONE
        due = (self.flush_requested or n >= self.size
               or (self.first_at is not None and now - self.first_at >= self.max_age))
        if not due:
            return Action.NONE
        if not self.in_flight:
            return Action.SEND
        if n >= self.max_size:
            return Action.BLOCK
        return Action.NONE

    def deadline(self) -> float | None:
        """When the pending batch becomes due by age (None: nothing pending)."""
        if not self.pending or self.first_at is None:
            return None
        return self.first_at + self.max_age

    def take(self) -> tuple[list[Any], float]:
        """The pending tuples and when the first arrived; the job is now in flight."""
        items, first = self.pending, self.first_at
        self.pending = []
        self.first_at = None
        self.flush_requested = False
        self.in_flight = True
        return items, first if first is not None else 0.0

    def done(self) -> None:
        self.in_flight = False


def budget_warnings(plan: Any) -> list[str]:
    """Spark bolt settings that will misbehave (submit-time check).

    A tuple waits up to ``spark.bolt.batch.ms`` in its batch, then up to one
    running job, then its own job: ``batch.ms + 2 x spark.bolt.expected.job.ms``.
    Above half of ``topology.message.timeout.secs`` a slow batch or a server
    restart turns into timeouts and replays, so say so before it runs.  And
    a batch larger than the spouts may have pending never fills.
    """
    warnings = []
    for name, cdef in plan.components.items():
        if not (getattr(cdef, "options", None) or {}).get("spark_bolt"):
            continue
        conf = plan.component_conf(name)
        timeout_ms = conf["topology.message.timeout.secs"] * 1000.0
        budget_ms = conf["spark.bolt.batch.ms"] + 2 * conf["spark.bolt.expected.job.ms"]
        if budget_ms >= 0.5 * timeout_ms:
            warnings.append(
                f"Spark bolt {name!r}: spark.bolt.batch.ms ({conf['spark.bolt.batch.ms']}) + 2 x "
                f"spark.bolt.expected.job.ms ({conf['spark.bolt.expected.job.ms']}) = {budget_ms:.0f} ms is "
                f"{budget_ms / timeout_ms:.0%} of topology.message.timeout.secs "
                f"({conf['topology.message.timeout.secs']} s): batches will time out and replay; lower the "
                f"batch age or raise the message timeout")
        pending = conf["topology.max.spout.pending"]
        spout_tasks = sum(c.tasks for c in plan.components.values() if c.kind == "spout")
        if pending is not None and pending * spout_tasks < conf["spark.bolt.batch.size"]:
            warnings.append(
                f"Spark bolt {name!r}: spark.bolt.batch.size ({conf['spark.bolt.batch.size']}) is more "
                f"than the spouts may have pending ({spout_tasks} x topology.max.spout.pending "
                f"{pending}): batches will only ever be sent by age")
    return warnings


def check_submission(plan: Any, hosts: Any) -> list[str]:
    """The submit check (see squall.plugins): :func:`budget_warnings`, which nimbus and local mode log."""
    return budget_warnings(plan)
