"""The executor thread: one component, one or more tasks, one receive queue.

Each loop turn serves every control message first (acker traffic, ticks,
activation), then up to ``MAX_TURN_TUPLES`` data tuples, then lets the
subclass do its own work (a spout calls next_tuple), and flushes what the
turn emitted as one batch per target task.  When nothing is to be done it
sleeps on the queue's wake-up event, so an idle executor costs nothing and
a tuple arriving at an idle one is picked up at once.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

import structlog

from squall.worker.executors.emit import random_ids
from squall.worker.executors.queues import ExecutorQueue
from squall.worker.executors.reporting import ErrorThrottle
from squall.worker.wire.codec import check_values, try_serialize

if TYPE_CHECKING:
    from squall.worker.executors.host import ExecutorHost
    from squall.worker.plan import ExecutorDef

MAX_TURN_TUPLES = 2048
IDLE_WAIT_SECS = 0.2


class Executor:
    def __init__(self, host: ExecutorHost, edef: ExecutorDef) -> None:
        self.host = host  # the worker, seen through the narrow interface it implements
        self.plan = host.plan
        self.component = edef.component
        self.tasks = edef.tasks
        self.conf = self.plan.component_conf(edef.component)
        self.queue = ExecutorQueue(self.conf["topology.executor.receive.buffer.size"], host.backpressure)
        self.running = False
        self.orderly = False
        self.waiting = False
        self.tracking = self.plan.tracking
        self.acker_tasks = self.plan.acker_tasks
        # Batches being built this turn, one per possible target task (a list, or
        # for a task of another worker a RemoteBatch, its rows packed as they come),
        # and the bound appends the emitters call.
        self.out: dict[int, Any] = {}
        self.appends: dict[int, Any] = {}
        self.control_out: list[tuple[str, int, Any]] = []
        # Statistics (read by the worker's stats snapshot from another thread:
        # plain numbers, read racily, which is fine for counters).
        self.busy_secs = 0.0  # time spent in on_data: capacity = busy / window
        self.started = time.monotonic()  # counters count from here (their reader needs the span)
        self.stream_outs: list[Any] = []  # every StreamOut of this executor's tasks
        self.rand64 = random_ids()  # random 64-bit tuple ids, this executor's own generator
        self.always_check = self.conf["topology.testing.always.try.serialize"]
        self.check = try_serialize if self.always_check else check_values
        self.errors = ErrorThrottle(self.conf["topology.max.error.report.per.interval"],
                                    self.conf["topology.error.throttle.interval.secs"], host.clock.now)
        self.log = structlog.get_logger(f"squall.worker.{type(self).__name__}")
        name = f"executor-{self.component}-{self.tasks[0]}"
        self.thread = threading.Thread(target=self._main, name=name, daemon=True)

    # -- lifecycle -----------------------------------------------------------

    def start(self) -> None:
        self.running = True
        self.thread.start()

    def stop(self, orderly: bool) -> None:
        """Signal only; the owner joins."""
        self.orderly = orderly
        self.running = False
        self.queue.wakeup.set()

    def stopping(self) -> bool:
        """Thread-safe: the executor was told to stop (or never started)."""
        return not self.running

    def _main(self) -> None:
        structlog.contextvars.bind_contextvars(
            node=self.host.node, topology=self.plan.name, worker=self.host.address,
            component=self.component, task=self.tasks[0],
        )
        try:
            self.setup()
            self.host.executor_ready()
            self.run_loop()
            if self.orderly:
                self.teardown()
        except BaseException as e:  # noqa: BLE001 - any escape kills the worker, as in Storm
            self.host.die(e, self.component, self.tasks[0])
        finally:
            self.queue.release()

    def setup(self) -> None:
        """Create and initialize the tasks' components (in this thread)."""

    def teardown(self) -> None:
        """Orderly shutdown hooks (close/cleanup)."""

    # -- the loop ------------------------------------------------------------

    def run_loop(self) -> None:
        q = self.queue
        control = q.control
        on_control = self.on_control
        on_data = self.on_data
        pop_data = q.pop_data
        # Real time, not the worker's clock: this measures work, it times nothing out.
        perf = time.perf_counter
        while self.running:
            busy = False
            while control:
                kind, task, payload = control.popleft()
                on_control(kind, task, payload)
                busy = True
            done = 0
            while done < MAX_TURN_TUPLES and not control and self.running:
                item = pop_data()
                if item is None:
                    break
                t0 = perf()
                on_data(item[0], item[1])
                self.busy_secs += perf() - t0
                done += len(item[1])
            if self.turn() or done:
                busy = True
            if busy:
                self.flush()
                continue
            q.wakeup.clear()
            if q.empty():
                self.waiting = True
                q.wakeup.wait(self.idle_wait())
                self.waiting = False

    def idle_wait(self) -> float:
        return IDLE_WAIT_SECS

    def turn(self) -> bool:
        """Own work after the queue is served; True if anything was done."""
        return False

    def on_data(self, task: int, tuples: list[Any]) -> None:
        msg = f"{self.component} does not accept data tuples"
        raise RuntimeError(msg)

    def on_control(self, kind: str, task: int, payload: Any) -> None:
        if kind == "call":
            payload()
            return
        msg = f"{self.component}: unknown control message {kind!r}"
        raise RuntimeError(msg)

    def call_soon(self, fn: Any) -> None:
        """Run ``fn()`` in this executor's thread, before any further data.

        Thread-safe: how a component's helper thread (a multilang reader, a
        Spark job) hands results back, since emit/ack/fail belong to the
        executor thread.  An exception escaping ``fn`` kills the worker.
        """
        self.queue.put_control("call", self.tasks[0], fn)

    def flush(self) -> None:
        send_data = self.host.send_data
        out = self.out
        for task, batch in out.items():
            if batch:
                if type(batch) is list:
                    # Copy and clear, keeping the list: the emitters hold its append.
                    send_data(task, batch[:])
                    batch.clear()
                else:  # a RemoteBatch, packed as it was emitted
                    for payload in batch.take():
                        send_data(task, payload)
        if self.control_out:
            send_control = self.host.send_control
            pending, self.control_out = self.control_out, []
            for kind, task, payload in pending:
                send_control(kind, task, payload)

    # -- errors --------------------------------------------------------------

    def stats_snapshot(self) -> dict[str, Any]:
        """Cumulative statistics of this executor, as plain data (Storm's names).

        ``emitted``/``transferred`` per output stream (transferred counts a
        copy per target task); ``busy_secs`` the time spent executing.
        Subclasses add what they count.
        """
        emitted: dict[str, int] = {}
        transferred: dict[str, int] = {}
        for so in list(self.stream_outs):
            emitted[so.name] = emitted.get(so.name, 0) + so.counts[0]
            transferred[so.name] = transferred.get(so.name, 0) + so.counts[1]
        return {"component": self.component, "executor": list(self.tasks[:1] + self.tasks[-1:]),
                "emitted": emitted, "transferred": transferred, "busy_secs": self.busy_secs,
                "queue_depth": self.queue.size, "backpressure_secs": self.queue.backpressure_secs(),
                "uptime_secs": round(time.monotonic() - self.started, 3), "cpu_secs": self.cpu_secs()}

    def cpu_secs(self) -> float | None:
        """The CPU its thread has used: with busy_secs, whether it computes or waits
        (self-regulation's diagnosis).  None where the platform has no thread clocks."""
        ident = self.thread.ident
        if ident is None or not hasattr(time, "pthread_getcpuclockid"):
            return None
        try:
            return round(time.clock_gettime(time.pthread_getcpuclockid(ident)), 4)
        except OSError:  # the thread has ended
            return None

    def report(self, exc: BaseException, task: int) -> None:
        if self.errors.allow():
            self.host.report_error(exc, self.component, task, fatal=False)
