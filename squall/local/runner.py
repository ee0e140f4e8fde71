"""One topology in local mode: its workers in this process, kept alive.

Workers talk through the in-process transport (msgpack frames, as on the
wire).  A worker that dies is restarted with exponential backoff, as Storm's
supervisor restarts a dead worker: fresh component instances, fresh queues;
the tuples it held time out and reliable spouts replay them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from queue import Empty, SimpleQueue
from typing import Any

import structlog

from squall.clock import Clock
from squall.metrics.book import StatsBook, window_id
from squall.nimbus.placement import colocations, spread
from squall.worker.executors.reporting import ErrorRecord
from squall.worker.executors.spout import summarise_latencies
from squall.worker.plan import TopologyPlan
from squall.worker.wire.transport import InprocTransport
from squall.worker.worker import Worker

log = structlog.get_logger("squall.local.LocalTopology")


class LocalTopology:
    def __init__(self, plan: TopologyPlan, clock: Clock, *, node: str = "local",
                 capture: Callable[[str, str, Any], None] | None = None,
                 resources: dict[str, Any] | None = None) -> None:
        self.plan = plan
        self.name = plan.name
        self.clock = clock
        self.node = node
        self.capture = capture
        self.resources = dict(resources or {})  # seeds each worker's (a restart gets a fresh copy)
        self.errors: list[ErrorRecord] = []
        self.book = StatsBook()  # windows of the workers' statistics (filled when read)
        self.restarts = 0
        self.active = True
        self.transport = InprocTransport()
        n = plan.conf["topology.workers"]
        self.placement = spread(plan.executors, n, colocations(plan)[0])
        self.addresses = [f"inproc://{plan.name}/worker-{i}" for i in range(n)]
        self.task_address = {t: self.addresses[i] for i, execs in enumerate(self.placement)
                             for e in execs for t in e.tasks}
        self.workers: list[Worker | None] = [None] * n
        self._failures = [0] * n
        self._started_at = [0.0] * n
        self._deaths: SimpleQueue[tuple[int, float]] = SimpleQueue()
        self._stop = threading.Event()
        self._monitor = threading.Thread(target=self._watch, name=f"local-supervisor-{plan.name}",
                                         daemon=True)

    def start(self) -> None:
        workers = [self._create(slot) for slot in range(len(self.workers))]
        for worker in workers:
            worker.bind()
        for worker in workers:
            worker.start()
        self._monitor.start()

    def _launch(self, slot: int) -> None:
        self._create(slot).start()

    def _create(self, slot: int) -> Worker:
        worker = Worker(
            self.plan, self.placement[slot], self.addresses[slot], self.task_address, self.transport,
            self.clock, node=self.node, active=self.active, error_sink=self.errors.append,
            on_death=lambda w, slot=slot: self._deaths.put((slot, self.clock.now())), capture=self.capture,
            resources=dict(self.resources),
        )
        self.workers[slot] = worker
        self._started_at[slot] = self.clock.now()
        return worker

    def _watch(self) -> None:
        conf = self.plan.conf
        initial = conf["supervisor.worker.restart.backoff.initial.secs"]
        ceiling = conf["supervisor.worker.restart.backoff.max.secs"]
        while not self._stop.is_set():
            try:
                slot, died_at = self._deaths.get(timeout=0.2)
            except Empty:
                continue
            dead = self.workers[slot]
            if dead is not None:
                dead.stop("worker-died")
            # A worker that ran longer than the ceiling was healthy: start afresh.
            if died_at - self._started_at[slot] > ceiling:
                self._failures[slot] = 0
            delay = min(initial * (2 ** self._failures[slot]), ceiling)
            self._failures[slot] += 1
            log.warning("restarting worker", topology=self.name, worker=self.addresses[slot],
                        backoff_secs=delay, failures=self._failures[slot])
            # Back off from the moment of death, not from when we got to it.
            if not self.clock.sleep_until(died_at + delay, self._stop):
                return
            self.restarts += 1
            self._launch(slot)

    def wait_ready(self, timeout: float) -> bool:
        return all(w is not None and w.ready.wait(timeout) for w in self.workers)

    def set_active(self, active: bool) -> None:
        self.active = active
        for worker in self.workers:
            if worker is not None:
                worker.set_active(active)

    def stop(self, reason: str, orderly: bool = True) -> None:
        self._stop.set()
        if self._monitor.is_alive():
            self._monitor.join(5)
        for worker in self.workers:
            if worker is not None:
                worker.stop(reason, orderly=orderly)

    def idle(self) -> bool:
        return all(w is not None and w.idle() for w in self.workers)

    def component_stats(self, window: str = "600") -> dict[str, dict[str, Any]]:
        """component -> Storm's statistics over ``window``, as nimbus serves them."""
        now = self.clock.now()
        for worker in self.workers:
            if worker is not None:
                self.book.ingest(self.name, id(worker), worker.executor_stats(), now)
        return self.book.components(self.name, window_id(window), now)

    def ingest_stats(self) -> float:
        """Read every live worker's cumulative statistics into the book at ``clock.now()``
        (a restarted worker is a new incarnation, counting from zero); that instant."""
        now = self.clock.now()
        for worker in self.workers:
            if worker is not None:
                self.book.ingest(self.name, id(worker), worker.executor_stats(), now)
        return now

    def worker_slots(self) -> list[dict[str, Any]]:
        """Per worker, by index: its address, its executors and when (``clock``) it last started."""
        return [{"index": i, "address": self.addresses[i], "executors": [e.id for e in self.placement[i]],
                 "started": self._started_at[i]} for i in range(len(self.workers))]

    def metrics(self) -> dict[str, dict[str, Any]]:
        """component -> task -> that task's own metrics (counters, gauges, histograms)."""
        out: dict[str, dict[str, Any]] = {}
        for worker in self.workers:
            if worker is not None:
                for component, tasks in worker.user_metrics().items():
                    out.setdefault(component, {}).update(tasks)
        return out

    def stats(self) -> dict[str, dict[str, Any]]:
        """Per component: emitted, executed, acked, failed, pending, complete latency."""
        total: dict[str, dict[str, Any]] = {}
        for worker in self.workers:
            if worker is None:
                continue
            for component, s in worker.stats().items():
                t = total.setdefault(component, {"emitted": 0, "executed": 0, "acked": 0, "failed": 0,
                                                 "timed_out": 0, "pending": 0, "latencies": []})
                for key, value in s.items():
                    t[key] += value
        for t in total.values():
            summary = summarise_latencies(t.pop("latencies"))  # the spout tasks' deques
            if summary is not None:
                t["complete_latency_ms"] = summary
        return total
