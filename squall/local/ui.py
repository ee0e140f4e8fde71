"""The web UI and Storm's UI REST API for local mode: ``squall local FILE --ui``.

The app nimbus serves (squall.ui.app) serves the pages and Storm's API here too: it asks
the services of squall.ui.backend for a few things (views: ``now/resolve/view/
visualization/summary``; control: ``storm_action`` and the log levels; leadership:
``require_leader``, ``leader_url``).  :class:`LocalBackend` answers them all from a
:class:`~squall.local.cluster.LocalCluster` in this process, so that the pages and the
answers are those of a cluster, shaped by the same builders (squall.ui.storm_api).
Squall's own ``/api/v1/topologies`` API (submitting code) is nimbus's only.

In local mode a topology's id is its name; this process is the one supervisor
(host "localhost", a worker's "port" its index) and the one nimbus, the leader.
Statistics: every second a background thread ingests every worker's cumulative
counters into the runner's StatsBook, so the windows fill as nimbus's do, and samples this
process (every local worker is this process: they all show its memory, CPU and GC; their
queue depths, backpressure and frames are their own).
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import structlog

from squall.errors import InvalidRequest, NotFound
from squall.httpd.auth import RunToken
from squall.httpd.loopback import Loopback
from squall.httpd.server import HttpServer
from squall.local.cluster import LocalCluster
from squall.local.runner import LocalTopology
from squall.metrics.system import ProcessSampler
from squall.metrics.windows import ALL_TIME, WINDOW_IDS
from squall.topology.component import OPERATIONS_OPTION
from squall.ui import prometheus
from squall.ui import storm_api as api
from squall.ui.app import create_app
from squall.ui.backend import Backend
from squall.ui.storm_api import TopologyView
from squall.version import VERSION

log = structlog.get_logger("squall.local.ui")

HOST = "localhost"
INGEST_EVERY_SECS = 1.0
LOCAL_LOG_LEVELS = ("log levels are set on a cluster's running workers (squall set_log_level); "
                    "local mode's are its --log-level")
LOCAL_DEBUG = ("debug sampling writes to the events.log of a cluster's workers (squall debug); "
               "local mode has none")


class LocalBackend:
    """What the app asks (squall.ui.backend's views, control and leadership), from a LocalCluster."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.conf = cluster.conf
        self.url = ""  # set once the server has its port
        self.started = time.time()
        self._lock = threading.Lock()  # the runners' books: ingested by the timer, read by requests
        self._submitted: dict[str, float] = {}  # name -> wall time it started (see view)
        self._killing: set[str] = set()
        self.sampler = ProcessSampler()
        # This process's last two samples [previous or None, latest]: {"time": wall, "system": ...}.
        self._process: list[dict[str, Any] | None] = [None, None]

    # -- what the app calls ------------------------------------------------

    def now(self) -> float:
        # Wall time: errors are stamped with it; the windows use each runner's clock instead.
        return time.time()

    def require_leader(self) -> None:
        """This process is the only nimbus: always the leader."""

    def leader_url(self) -> str:
        return self.url

    def resolve(self, ident: str) -> str:
        """A topology's id, which in local mode is its name."""
        if ident not in self.cluster.topologies():
            msg = f"no topology with id or name {ident!r} is running"
            raise NotFound(msg)
        return ident

    def log_config(self, ident: str) -> dict[str, Any]:
        self.resolve(ident)
        raise NotFound(LOCAL_LOG_LEVELS)

    def set_log_config(self, ident: str, changes: dict[str, Any]) -> dict[str, Any]:
        self.resolve(ident)
        raise NotFound(LOCAL_LOG_LEVELS)

    def profile(self, ident: str, action: str, worker: str, timeout: str | None = None,
                fmt: str | None = None, locals_: bool = False, user: str | None = None) -> dict[str, Any]:
        self.resolve(ident)
        msg = ("local mode runs no workers to profile: `py-spy dump --pid` this process "
               f"({os.getpid()}) instead (docs/profiling.md)")
        raise NotFound(msg)

    def debug(self, ident: str, component: str | None, action: str, pct: str) -> dict[str, Any]:
        self.resolve(ident)
        raise NotFound(LOCAL_DEBUG)

    def _runner(self, name: str) -> LocalTopology:
        runner = self.cluster.topologies().get(name)
        if runner is None:
            msg = f"no topology with id or name {name!r} is running"
            raise NotFound(msg)
        return runner

    def view(self, name: str, details: bool = False) -> TopologyView:
        runner = self._runner(name)
        plan = runner.plan
        components = {c_name: {"kind": c.kind, "tasks": plan.component_tasks.get(c_name, []),
                               "executors": [e.id for e in plan.executors if e.component == c_name],
                               "inputs": [(i.component, i.stream) for i in c.inputs],
                               "streams": list(c.streams), "trident": c.options.get("trident"),
                             "operations": c.options.get(OPERATIONS_OPTION)}
                      for c_name, c in plan.components.items()}
        wall, mono = time.time(), runner.clock.now()
        workers = [{"node": runner.node, "host": HOST, "port": slot["index"],
                    "executors": [list(e) for e in slot["executors"]],
                    # The runner's clock is monotonic: its start times turned into wall time.
                    "since": wall - (mono - slot["started"])} for slot in runner.worker_slots()]
        status = "killing" if name in self._killing else ("active" if runner.active else "inactive")
        # Runners keep no submission time: their workers' first start, as first seen, stands for it.
        submitted = self._submitted.setdefault(name, min((w["since"] for w in workers), default=wall))
        view = TopologyView(id=name, name=name, status=status, submitted=submitted, conf=plan.conf,
                            components=components, workers=workers, samples=self._samples(runner))
        if details:
            slots = {address: i for i, address in enumerate(runner.addresses)}
            view.errors = [{**e.to_dict(), "node": runner.node, "port": slots.get(e.worker)}
                           for e in list(runner.errors)]
            with self._lock:
                for window in WINDOW_IDS:
                    view.stats[window] = runner.book.components(name, window, mono)
                    view.executor_stats[window] = runner.book.executors(name, window, mono)
        return view

    def _samples(self, runner: LocalTopology) -> dict[tuple[str, int], list[dict[str, Any] | None]]:
        """Per worker, as nimbus keeps them (storm_api.worker_system): this process's system
        samples, with the worker's own queue depth, backpressure and transfer."""
        previous, latest = self._process
        out: dict[tuple[str, int], list[dict[str, Any] | None]] = {}
        for index, worker in enumerate(list(runner.workers)):
            if worker is None or latest is None:
                continue
            transfer = worker.transfer.stats() if worker.transfer is not None else {}
            sample = {**latest, "system": {**latest["system"], "backpressure": worker.backpressure.active},
                      "transfer": transfer, "queue_depth": sum(e.queue.size for e in worker.executors)}
            out[runner.node, index] = [previous, sample]
        return out

    def visualization(self, ident: str, window: str, sys: bool = False) -> dict[str, Any]:
        """The graph, as squall.nimbus.views.TopologyViews.visualization draws it, from the
        runner's plan and book."""
        name = self.resolve(ident)
        runner = self._runner(name)
        view = self.view(name, details=True)
        with self._lock:
            span = runner.book.span(name, window, runner.clock.now())
        groupings = {(c_name, i.component, i.stream): {"type": i.grouping.type, "fields": i.grouping.fields}
                     for c_name, c in runner.plan.components.items() for i in c.inputs}
        return api.visualization(view, window, self.now(), sys, span, groupings)

    def storm_action(self, ident: str, action: str, wait: int = 0, body: Any = None) -> dict[str, Any]:
        name = self.resolve(ident)
        if action == "activate":
            self.cluster.activate(name)
        elif action == "deactivate":
            self.cluster.deactivate(name)
        elif action == "kill":
            # Storm answers at once and kills after the wait: the wait runs in a thread of its own.
            self._killing.add(name)
            threading.Thread(target=self._kill, args=(name, wait), name=f"local-ui-kill-{name}",
                             daemon=True).start()
        elif action == "rebalance":
            msg = "rebalance is not supported in local mode"
            raise InvalidRequest(msg)
        else:
            msg = f"no such action {action!r} (activate, deactivate, rebalance, kill)"
            raise NotFound(msg)
        return api.op_response(name, action)

    def _kill(self, name: str, wait: float) -> None:
        try:
            self.cluster.kill(name, wait)
        except Exception:  # noqa: BLE001 - killed meanwhile (by the CLI's end, say): nothing to do
            log.debug("local kill failed", topology=name, exc_info=True)
        finally:
            self._killing.discard(name)
            self._submitted.pop(name, None)

    # -- the summaries (on a cluster read from ZooKeeper) -------------------------

    def views(self) -> list[TopologyView]:
        out = []
        for name in sorted(self.cluster.topologies()):
            try:
                out.append(self.view(name))
            except NotFound:  # killed between the listing and the view
                continue
        return out

    def supervisors(self) -> tuple[dict[str, dict[str, Any]], set[tuple[str, int]]]:
        """This process as the one supervisor, with as many slots as the widest topology has
        workers (their indexes being the "ports"), and the slots in use."""
        runners = self.cluster.topologies().values()
        used = {(r.node, i) for r in runners for i in range(len(r.workers))}
        node = self.cluster.node
        ports = list(range(max((len(r.workers) for r in runners), default=1)))
        return {node: {"host": HOST, "ports": ports}}, used

    def summary(self, head: str) -> Any:
        now = self.now()
        supervisors, used = self.supervisors()
        if head == "supervisor":
            started = dict.fromkeys(supervisors, self.started)
            return api.supervisor_summary(supervisors, started, used, VERSION, now)
        if head == "nimbus":
            me = {"url": self.url, "started": self.started}
            return api.nimbus_summary([me], self.url, VERSION, now)
        if head == "cluster":
            return api.cluster_summary(self.views(), supervisors, used, VERSION)
        return api.topology_summary(self.views(), now)

    def prometheus_snapshot(self) -> dict[str, Any]:
        """What ``/metrics`` serves (squall.ui.prometheus), as nimbus's: this process as the one
        supervisor, each running topology's executors from its statistics book."""
        supervisors, used = self.supervisors()
        now = self.now()
        topologies = []
        for name, runner in sorted(self.cluster.topologies().items()):
            try:
                view = self.view(name)
            except NotFound:  # killed between the listing and the view
                continue
            mono = runner.clock.now()
            with self._lock:
                all_time = runner.book.executors(name, ALL_TIME, mono)
                recent = runner.book.executors(name, "600", mono)
                latest = {e: dict(v) for (t, e), v in runner.book.latest.items() if t == name}
            topologies.append(prometheus.topology_entry(view, now, all_time, recent, latest, []))
        ports = next(iter(supervisors.values()))["ports"]
        return {"supervisors": 1, "slots_total": len(ports), "slots_used": len(used),
                "topologies": topologies}

    def ingest(self) -> None:
        """Every running topology's statistics into its book, and a sample of this process
        (the timer's work)."""
        system = self.sampler.sample()
        if system:
            self._process = [self._process[1], {"time": time.time(), "system": system}]
        for runner in self.cluster.topologies().values():
            with self._lock:
                runner.ingest_stats()


class LocalUiServer:
    """The UI's HTTP server and the statistics timer, both daemon threads.

    Only for the developer who started it, though any page their browser opens can reach
    127.0.0.1: a random token for the run, which :attr:`sign_in_url` carries (the address
    ``squall local --ui`` prints), and the Host and Origin checks of squall.httpd.loopback."""

    def __init__(self, cluster: LocalCluster, host: str = "127.0.0.1", port: int = 8080) -> None:
        self.backend = LocalBackend(cluster)
        self.gate = RunToken()
        backend = Backend(cluster.conf, views=self.backend, control=self.backend, leadership=self.backend)
        # /metrics: the same series as nimbus's, from this process's topologies.
        metrics = prometheus.registry(self.backend.prometheus_snapshot)
        app = create_app(backend, registry=metrics, gate=self.gate)
        self.httpd = HttpServer(Loopback(app, self.gate), host, port, name="local-ui-http")
        self.backend.url = self.url.rstrip("/")
        self._stop = threading.Event()
        self._timer = threading.Thread(target=self._tick, name="local-ui-stats", daemon=True)

    @property
    def port(self) -> int:
        return self.httpd.port

    @property
    def url(self) -> str:
        return f"http://{self.httpd.host}:{self.port}/"

    @property
    def sign_in_url(self) -> str:
        """The UI's address with the run's token: opening it signs the browser in."""
        return f"{self.url}?token={self.gate.token}"

    def start(self) -> LocalUiServer:
        self.backend.ingest()  # the first report starts the windows
        self.httpd.start()
        self._timer.start()
        return self

    def _tick(self) -> None:
        while not self._stop.wait(INGEST_EVERY_SECS):
            try:
                self.backend.ingest()
            except Exception:  # noqa: BLE001 - a worker mid-restart: the next tick reads it
                log.warning("ingesting local statistics failed", exc_info=True)

    def stop(self) -> None:
        self._stop.set()
        self.httpd.stop()
        self._timer.join(5)
        self.backend.sampler.close()

    def __enter__(self) -> LocalUiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
