"""What an executor may ask of the runtime that hosts it: the executors' whole view of a worker.

Executors (spouts', bolts', the acker's) are built by :class:`~squall.worker.worker.Worker`,
which implements this interface; they import only this module, never the worker, so
the worker stands above its executors and nothing calls back up by name.  Local mode
runs the same :class:`Worker` per slot, so it needs no implementation of its own.

Every member is read once when an executor is built or set up, or once per batch
(``send_data``, ``send_control``), never per tuple.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from squall.clock import Clock
    from squall.metrics.registry import MetricsRegistry
    from squall.worker.backpressure import Backpressure
    from squall.worker.event_log import EventLog
    from squall.worker.executors.queues import ExecutorQueue
    from squall.worker.plan import TopologyPlan


class ExecutorHost(Protocol):
    plan: TopologyPlan
    node: str  # for logs
    address: str  # this worker's: for logs and the components' context
    clock: Clock  # what components time things by (tests drive it)
    active: bool  # whether spouts start active
    backpressure: Backpressure  # shared by the receive queues; spouts hold back while it is on
    local_tasks: Collection[int]  # the tasks of this worker (routing prefers them)
    resources: dict[str, Any]  # objects the tasks share (Storm's worker resources)
    capture: Callable[[str, str, Any], None] | None  # every emit, in tests; else None
    events: EventLog | None  # the worker's event logger, which samples emits (None: local mode)

    # -- sending (once per batch) ----------------------------------------------

    def send_data(self, task: int, batch: Any) -> None:
        """A batch of tuples for ``task``, in this worker or another."""

    def send_control(self, kind: str, task: int, payload: Any) -> None:
        """An acker or spout message (init, ack, fail, acked, failed) for ``task``."""

    def is_remote(self, task: int) -> bool:
        """Whether ``task`` lives in another worker (its tuples cross the wire)."""

    def load_of(self, task: int) -> float:
        """A local task's load, 0 to 1: the load-aware shuffle's input."""

    def bolt_queues(self) -> list[ExecutorQueue]:
        """The receive queues of this worker's bolts (spouts yield to them)."""

    # -- life and errors ---------------------------------------------------------

    def executor_ready(self) -> None:
        """This executor's components are initialized."""

    def die(self, exc: BaseException, component: str | None, task: int | None) -> None:
        """An error escaped an executor: the whole worker goes, as in Storm."""

    def report_error(self, exc: BaseException, component: str, task: int | None, fatal: bool) -> None:
        """A component error that does not kill the worker."""

    def metrics_of(self, component: str, task: int) -> MetricsRegistry:
        """The task's own metrics (Storm's registerMetric), kept across instances of it."""
