"""A worker: the executors of one topology placed on one slot.

The worker owns the executor threads, the task -> queue table, the system
timer that sends ``__tick``, and (when some tasks live in other workers) the
transfer threads.  An unhandled error in any of its threads kills the whole
worker, as in Storm; whoever supervises it restarts it.

Shutdown order: the timer first (no new ticks), then spouts (no new
tuples), then bolts and ackers, then the transfer threads, which flush what
was handed to them before the receive address is closed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import structlog

from squall import compiled
from squall.clock import Clock
from squall.lazy import Lazy
from squall.metrics.registry import MetricsRegistry
from squall.runtime.status import Status
from squall.topology.loading import resolve_class
from squall.topology.tuple import SYSTEM_COMPONENT, SYSTEM_TASK, TICK_STREAM, Tuple, record_type
from squall.worker.backpressure import Backpressure
from squall.worker.event_log import EventLog
from squall.worker.executors.acker import BUCKETS, AckerExecutor
from squall.worker.executors.bolt import BoltExecutor
from squall.worker.executors.executor import Executor
from squall.worker.executors.queues import ExecutorQueue
from squall.worker.executors.reporting import ErrorRecord, describe
from squall.worker.executors.spout import AUTOTUNE, SpoutExecutor
from squall.worker.executors.timer import SystemTimer
from squall.worker.gc_tuning import freeze_startup_objects, tune_gc
from squall.worker.plan import ExecutorDef, TopologyPlan
from squall.worker.wire.frames import WireValidator
from squall.worker.wire.transfer import Transfer
from squall.worker.wire.transport import Transport

log = structlog.get_logger("squall.worker.Worker")

LOAD_REFRESH_SECS = 1.0  # how often a task's CPU share is measured again for the load-aware shuffle

_EXECUTOR_TYPES: dict[str, type[Executor]] = {
    "spout": SpoutExecutor,
    "bolt": BoltExecutor,
    "acker": AckerExecutor,
}


class Worker:
    """Implements :class:`~squall.worker.executors.host.ExecutorHost`: all its executors see of it."""

    def __init__(
        self,
        plan: TopologyPlan,
        executors: list[ExecutorDef],
        address: str,
        task_address: dict[int, str],
        transport: Transport | None,
        clock: Clock,
        *,
        node: str = "local",
        active: bool = True,
        error_sink: Callable[[ErrorRecord], None] | None = None,
        on_death: Callable[[Worker], None] | None = None,
        capture: Callable[[str, str, Any], None] | None = None,
        events: EventLog | None = None,
        resources: dict[str, Any] | None = None,
        owns_process: bool = False,
    ) -> None:
        self.plan = plan
        # The process is this worker's alone (a cluster worker, not local mode): it may
        # freeze the process's heap once ready, which would keep a local-mode process
        # from ever collecting the cycles of a topology it kills later.
        self.owns_process = owns_process
        self.conf = plan.conf
        self.address = address
        self.node = node
        self.clock = clock
        self.active = active
        self.capture = capture
        self.events = events  # sampled emits -> events.log (squall.worker.event_log); its owner's to close
        # Shared by the worker's tasks through their context; a runtime may
        # seed it (local mode: the transactional state of the LocalCluster).
        self.resources: dict[str, Any] = resources if resources is not None else {}
        # (component, task) -> the task's MetricsRegistry: kept by the worker, so a
        # component made anew per batch (a transactional BatchBolt) shares its task's.
        self.metrics: dict[tuple[str, int], MetricsRegistry] = {}
        self.status = Status.INIT
        self.gc_tuned = False  # the collector is ours to tune (start() finds out)
        self.failure: BaseException | None = None
        self.backpressure = Backpressure()
        self._error_sink = error_sink
        self._on_death = on_death
        self._lock = threading.Lock()
        self._ready = 0
        self.ready = threading.Event()
        self.local_tasks = {t for e in executors for t in e.tasks}
        import_component_classes(plan, executors)
        self.executors: list[Executor] = [_EXECUTOR_TYPES[plan.components[e.component].kind](self, e)
                                          for e in executors]
        self._executor_of = {t: ex for ex in self.executors for t in ex.tasks}
        self.queues: dict[int, ExecutorQueue] = {t: ex.queue for t, ex in self._executor_of.items()}
        remote = {t: a for t, a in task_address.items() if t not in self.local_tasks}
        self.transfer: Transfer | None = None
        if remote:
            if transport is None:
                msg = f"worker {address} has remote tasks but no transport"
                raise ValueError(msg)
            # Nothing from another worker reaches an executor unchecked, in local mode too.
            self.transfer = Transfer(transport, address, remote, self.deliver,
                                     WireValidator(plan, self.local_tasks), self._transfer_died,
                                     backpressure=self.backpressure,
                                     bp_resend=self.conf["worker.backpressure.resend.secs"],
                                     capacity=self.conf["topology.transfer.buffer.size"])
            self.backpressure.on_change = self.transfer.local_congestion
        self.misrouted = 0
        self._cpu_seen: dict[int, tuple[float, float, float]] = {}  # task -> (clock, thread CPU secs, share)
        self.timer = SystemTimer(clock, name=f"timer-{address}")

    # -- lifecycle -----------------------------------------------------------

    def bind(self) -> None:
        if self.transfer is not None:
            self.transfer.bind()

    def start(self) -> None:
        if self.status is not Status.INIT:
            return
        self.status = Status.RUNNING
        self.gc_tuned = tune_gc(self.conf["worker.gc.gen0.threshold"])
        self._schedule_ticks()
        if self.transfer is not None:
            self.transfer.start()
        for executor in self.executors:
            executor.start()
        self.timer.start()
        log.info("worker started", worker=self.address, topology=self.plan.name,
                 executors=[e.thread.name for e in self.executors], hot_path=compiled.summary())

    def stop(self, reason: str, timeout: float | None = None, orderly: bool = False) -> None:
        """Stop every thread; ``orderly`` runs close/cleanup hooks."""
        if timeout is None:
            timeout = self.conf["worker.shutdown.timeout.secs"]
        with self._lock:
            if self.status in (Status.STOPPING, Status.STOPPED):
                return
            failed = self.status is Status.FAILED
            self.status = Status.STOPPING
        log.info("worker stopping", worker=self.address, reason=reason)
        # Joining threads is about real time, whatever clock drives the topology.
        deadline = time.monotonic() + timeout
        self.timer.stop()
        spouts = [e for e in self.executors if isinstance(e, SpoutExecutor)]
        others = [e for e in self.executors if not isinstance(e, SpoutExecutor)]
        for group in (spouts, others):
            for executor in group:
                executor.stop(orderly)
            for executor in group:
                if executor.thread.is_alive() and executor.thread is not threading.current_thread():
                    executor.thread.join(max(0.0, deadline - time.monotonic()))
        if self.transfer is not None:
            self.transfer.stop()
            self.transfer.join(max(0.0, deadline - time.monotonic()))
        self.timer.join(max(0.0, deadline - time.monotonic()))
        self._close_resources()
        stuck = [e.thread.name for e in self.executors if e.thread.is_alive()
                 and e.thread is not threading.current_thread()]
        if stuck:
            log.warning("executor threads did not stop in time", worker=self.address, threads=stuck)
        self.status = Status.FAILED if failed else Status.STOPPED

    def _close_resources(self) -> None:
        """Close what the worker made on demand (a ZooKeeper client); what a
        runtime handed in (local mode's state) outlives the worker."""
        for resource in self.resources.values():
            if isinstance(resource, Lazy):
                try:
                    resource.close()
                except Exception as e:  # noqa: BLE001 - stopping anyway
                    log.warning("closing a worker resource failed", error=str(e))

    def executor_ready(self) -> None:
        with self._lock:
            self._ready += 1
            if self._ready == len(self.executors):
                if self.gc_tuned and self.owns_process:
                    freeze_startup_objects()
                self.ready.set()

    def die(self, exc: BaseException, component: str | None, task: int | None) -> None:
        """An unhandled error in one of our threads: the whole worker goes."""
        with self._lock:
            if self.status is not Status.RUNNING:
                return
            self.status = Status.FAILED
            self.failure = exc
        self.report_error(exc, component or "__worker", task, fatal=True)
        # Signal every thread now; the supervisor joins and restarts.
        self.timer.stop()
        for executor in self.executors:
            executor.stop(orderly=False)
        if self.transfer is not None:
            self.transfer.stop()
        if self._on_death is not None:
            self._on_death(self)

    def _transfer_died(self, exc: BaseException) -> None:
        self.die(exc, getattr(exc, "component", None), getattr(exc, "task", None))

    def report_error(self, exc: BaseException, component: str, task: int | None, fatal: bool) -> None:
        text, trace = describe(exc)
        record = ErrorRecord(self.plan.name, component, task, text, trace, fatal, self.address, exception=exc)
        # The trace under the line as Python prints it (structlog's "exception"), as Storm's
        # worker.log has it: what the logviewer and `squall logs` show.
        if fatal:
            log.error("worker died", worker=self.address, component=component, task=task, error=text,
                      exception=trace)
        else:
            log.warning("component error", component=component, task=task, error=text, exception=trace)
        if self._error_sink is not None:
            self._error_sink(record)

    # -- control -------------------------------------------------------------

    def update_task_address(self, task_address: dict[int, str]) -> None:
        """Peer workers moved (a new assignment): route their tasks anew.
        This worker's own tasks stay where they are; moving them means a new worker."""
        if self.transfer is not None:
            self.transfer.set_routes({t: a for t, a in task_address.items() if t not in self.local_tasks})

    def set_active(self, active: bool) -> None:
        self.active = active
        kind = "activate" if active else "deactivate"
        for executor in self.executors:
            if isinstance(executor, SpoutExecutor):
                executor.queue.put_control(kind, executor.tasks[0], None)

    def set_max_pending(self, values: dict[str, Any]) -> None:
        """Self-regulation's max spout pending per spout component (absent: the conf's)."""
        for executor in self.executors:
            if isinstance(executor, SpoutExecutor):
                executor.queue.put_control("max_pending", executor.tasks[0], values.get(executor.component))

    # -- routing -------------------------------------------------------------

    def send_data(self, task: int, batch: list[Any]) -> None:
        queue = self.queues.get(task)
        if queue is not None:
            queue.put_data(task, batch)
        elif self.transfer is not None:
            self.transfer.put("data", task, batch)

    def send_control(self, kind: str, task: int, payload: Any) -> None:
        queue = self.queues.get(task)
        if queue is not None:
            queue.put_control(kind, task, payload)
        elif self.transfer is not None:
            self.transfer.put(kind, task, payload)

    def is_remote(self, task: int) -> bool:
        return self.transfer is not None and task not in self.local_tasks

    def bolt_queues(self) -> list[ExecutorQueue]:
        # Every executor exists before any starts (see start): these are all of them.
        return [e.queue for e in self.executors if self.plan.components[e.component].kind == "bolt"]

    def deliver(self, kind: str, task: int, payload: Any) -> None:
        """A message from another worker.  One for a task that is not ours (a
        sender with an old assignment) is dropped, never forwarded: two
        workers with stale tables could bounce it for ever."""
        queue = self.queues.get(task)
        if queue is None:
            self.misrouted += 1
        elif kind == "data":
            queue.put_data(task, payload)
        else:
            queue.put_control(kind, task, payload)

    def _record_of(self, component: str, stream: str) -> type:
        return record_type(self.plan.components[component].streams[stream].fields)

    # -- ticks ---------------------------------------------------------------

    def _schedule_ticks(self) -> None:
        timeout = self.conf["topology.message.timeout.secs"]
        for executor in self.executors:
            kind = self.plan.components[executor.component].kind
            queue = executor.queue
            if kind == "acker":
                self.timer.every(timeout / (BUCKETS - 1), _ticker(queue, executor.tasks[0], None))
            elif kind == "spout" and self.plan.tracking:
                self.timer.every(timeout, _ticker(queue, executor.tasks[0], None))
                if executor.conf["topology.max.spout.pending.autotune"]:
                    period = executor.conf["topology.max.spout.pending.autotune.secs"]
                    self.timer.every(period, _controller(queue, executor.tasks[0], AUTOTUNE))
            elif kind == "bolt":
                freq = executor.conf.get("topology.tick.tuple.freq.secs")
                if freq:
                    tup = Tuple(None, SYSTEM_COMPONENT, TICK_STREAM, SYSTEM_TASK,
                                record_type(("rate_secs",))(freq))
                    for task in executor.tasks:
                        self.timer.every(freq, _ticker(queue, task, tup))

    # -- observation ---------------------------------------------------------

    def idle(self) -> bool:
        """Nothing queued, nothing in transfer, every executor asleep."""
        if self.transfer is not None and not self.transfer.empty():
            return False
        return all(e.waiting and e.queue.empty() for e in self.executors)

    def metrics_of(self, component: str, task: int) -> MetricsRegistry:
        key = (component, task)
        registry = self.metrics.get(key)
        if registry is None:
            registry = self.metrics[key] = MetricsRegistry(f"{component}[{task}]")
        return registry

    def user_metrics(self) -> dict[str, dict[str, Any]]:
        """component -> task (as a string: JSON) -> the task's metrics snapshot."""
        out: dict[str, dict[str, Any]] = {}
        for (component, task), registry in list(self.metrics.items()):
            snap = registry.snapshot()
            if any(snap.values()):
                out.setdefault(component, {})[str(task)] = snap
        return out

    def load_of(self, task: int) -> float:
        """A local task's load, 0 to 1, the load-aware shuffle's input: its receive queue's fill
        (Storm's measure) or the share of a core its executor thread used over the last second,
        whichever is higher.  The second is Python's: a bolt that keeps its thread busy holds the
        worker's one GIL however short its queue (max spout pending keeps queues short), and only
        tasks in other workers, other processes, add a core to it."""
        queue = self.queues[task]
        return max(queue.size / queue.high, self._cpu_share(task))

    def _cpu_share(self, task: int) -> float:
        now = self.clock.now()
        seen = self._cpu_seen.get(task)
        if seen is not None and now - seen[0] < LOAD_REFRESH_SECS:
            return seen[2]
        executor = self._executor_of.get(task)
        ident = executor.thread.ident if executor is not None else None
        try:
            cpu = time.clock_gettime(time.pthread_getcpuclockid(ident)) if ident is not None else 0.0
        except OSError:  # the thread is gone
            cpu = 0.0
        share = 0.0
        if seen is not None and now > seen[0]:
            share = min(1.0, max(0.0, (cpu - seen[1]) / (now - seen[0])))
        self._cpu_seen[task] = (now, cpu, share)
        return share

    def executor_stats(self) -> list[dict[str, Any]]:
        """Every executor's cumulative statistics (see Executor.stats_snapshot)."""
        return [e.stats_snapshot() for e in self.executors]

    def stats(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for executor in self.executors:
            s = out.setdefault(executor.component, {"emitted": 0, "executed": 0, "acked": 0, "failed": 0,
                                                    "timed_out": 0, "pending": 0, "latencies": []})
            for key in ("emitted", "executed", "acked", "failed", "timed_out", "pending"):
                s[key] += getattr(executor, key, 0)
            samples = getattr(executor, "latencies", None)
            if samples:
                # The spout's own deque: whoever summarises copies it once (squall.worker.process.lifecycle).
                s["latencies"].append(samples)
        return out


def import_component_classes(plan: TopologyPlan, executors: list[ExecutorDef]) -> None:
    """Import the class of every component this worker runs, before anything can arrive from
    the wire.  A feature registers its wire types when its modules are imported
    (squall.worker.wire.value_types), and a feature's values reach only its own components (a
    transactional topology runs every bolt inside its BatchCoordinatedBolt), so the decoder knows
    every type it may meet; a worker that runs none of a feature's components never imports it.
    A class that does not load is left to its executor, which fails with it as it always has."""
    for component in sorted({e.component for e in executors}):
        cls = plan.components[component].cls
        if cls is not None:
            try:
                resolve_class(cls)
            except Exception:  # noqa: BLE001, S110 - reported by the executor that needs it
                pass


def _controller(queue: ExecutorQueue, task: int, kind: str) -> Callable[[], None]:
    return lambda: queue.put_control(kind, task, None)


def _ticker(queue: ExecutorQueue, task: int, payload: Any) -> Callable[[], None]:
    return lambda: queue.put_control("tick", task, payload)
