"""The supervisor daemon: one per node, running the workers nimbus assigns to it.

Split by role as Storm's supervisor is:

* wiring and timers (:class:`Supervisor`, here): start, stop, the ZooKeeper
  session and registration, the logviewer, and the three timers below;
* reading assignments (:mod:`squall.supervisor.assignments`): what this node
  should run, from the cluster state;
* the localizer (:mod:`squall.supervisor.localizer`): topology code, environments,
  the secrets handed to workers, and sweeping what is no longer used;
* the launcher (:mod:`squall.supervisor.launcher`): the slots, run-as users and
  sandbox, starting and stopping worker processes.

Storm's three timers:

* heartbeat (``supervisor.heartbeat.frequency.secs``): refresh this node's
  ephemeral registration, and publish its workers' heartbeats and stats in
  one ZooKeeper write (so ZooKeeper load grows with nodes, not executors),
  and forward component errors;
* sync assignments (``supervisor.assignments.sync.secs``, and at once when
  the set of topologies changes): read what nimbus assigned to this node,
  download and unpack the code of new topologies;
* sync processes (``supervisor.monitor.frequency.secs``): classify every
  slot's worker as valid, timed out, not started or disallowed, and kill or
  (re)launch accordingly (the decisions: :mod:`squall.supervisor.sync`).

The supervisor keeps no state but its local directory: stopping it leaves
workers running, and a restarted supervisor adopts them.

Security: everything under ``storm.local.dir`` is this user's only (umask 077
while the supervisor runs, its directories 0700); a worker's environment is
an allow-list (``supervisor.worker.env.allow`` plus the topology's
``topology.environment``); a code package is unpacked within
``nimbus.code.max.uncompressed.bytes`` and ``nimbus.code.max.entries``.  In a
secure cluster (``squall.secure``) the supervisor authenticates to ZooKeeper
with the keyring's credentials, writes each worker's ``secrets.json`` (the
topology's CURVE keypair and those credentials), and refuses to launch the
workers of a topology without a CURVE keypair.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import structlog

from squall.cluster.session import Session
from squall.cluster.state import ClusterState
from squall.cluster.watches import ChildrenWatch
from squall.cluster.zookeeper import cluster_credentials, connect, disconnect, is_secure, make_client
from squall.runtime.status import Status
from squall.supervisor import logfiles
from squall.supervisor.assignments import Assignments
from squall.supervisor.health import HealthCheck
from squall.supervisor.launcher import Launcher, Slot
from squall.supervisor.localizer import Localizer
from squall.supervisor.logviewer import Logviewer, start_logviewer
from squall.supervisor.memory import MEMORY_LIMIT, MIB, MemoryWatch
from squall.supervisor.profiler import WorkerProfiler
from squall.supervisor.sync import NOT_RUNNING, Action, Kill, Launch, ProcessSync, WriteAssignment
from squall.supervisor.workers import UMASK, error_record, private_dir
from squall.topology.topology import definition_from_dict
from squall.worker.plan import plan_topology

log = structlog.get_logger("squall.supervisor.Supervisor")


def capacity(conf: dict[str, Any]) -> dict[str, float]:
    """What this node offers the resource-aware scheduler: supervisor.memory.capacity.mb (the
    machine's memory) and supervisor.cpu.capacity (100 per core it may use)."""
    memory = conf.get("supervisor.memory.capacity.mb")
    cpu = conf.get("supervisor.cpu.capacity")
    if memory is None:
        memory = psutil.virtual_memory().total // MIB
    if cpu is None:
        cores = conf.get("supervisor.cpu.cores") or os.sched_getaffinity(0)
        cpu = 100 * len(cores)
    return {"memory_mb": float(memory), "cpu": float(cpu)}


def components_of(want: dict[str, Any]) -> list[str]:
    """The components a worker of ``want`` runs (system ones last), from its topology's plan."""
    try:
        plan = plan_topology(definition_from_dict(want["topology"]), overrides=want.get("conf"))
        names = {plan.task_component[first] for first, _last in want["executors"]}
    except Exception:  # noqa: BLE001 - a definition this supervisor cannot plan: said without components
        return [""]
    return sorted(names, key=lambda n: (n.startswith("__"), n)) or [""]


def node_id(local_dir: Path) -> str:
    """Stable across restarts: kept in the local directory."""
    path = local_dir / "node-id"
    try:
        return path.read_text().strip()
    except OSError:
        node = f"{socket.gethostname()}-{os.urandom(4).hex()}"
        private_dir(local_dir)
        with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            f.write(node)
        return node


class Supervisor:
    """The wiring of one node's supervisor: its ZooKeeper session, its three timers and
    its logviewer, over the three roles (module docstring) that do the work."""

    def __init__(self, conf: dict[str, Any], now: Callable[[], float] = time.time,
                 local: Callable[[], float] = time.monotonic) -> None:
        self.conf = conf
        self.now = now
        self.local = local  # what workers' ages are measured on (squall.supervisor.sync)
        self.status = Status.INIT
        self.local_dir = private_dir(Path(conf["storm.local.dir"]).resolve())
        self.node = node_id(self.local_dir)
        self.host = conf["storm.local.hostname"]
        self.launcher = Launcher(conf, self.node, self.local_dir)
        # Secure: ZooKeeper credentials from the keyring (a ConfigError now if there is none).
        self.secure = is_secure(conf)
        self.zk_credentials = cluster_credentials(conf)
        self.zk = make_client(conf, self.zk_credentials)
        self._umask: int | None = None
        self.state = ClusterState(self.zk, conf["storm.zookeeper.root"])
        # Ephemeral nodes are re-created by the next heartbeat: a lost session needs no recovery.
        self.session = Session(self.zk, "supervisor", on_lost=self._on_session_lost,
                               on_connected=self._on_connected)
        self._assignments_watch: ChildrenWatch | None = None
        self.process_sync = ProcessSync(conf["supervisor.worker.timeout.secs"],
                                        conf["supervisor.worker.start.timeout.secs"])
        self._error_offsets: dict[int, int] = {}
        # Workers held to their memory limits (squall.supervisor.memory, docs/scheduling.md).
        self.memory = MemoryWatch(conf["supervisor.worker.memory.limit.samples"])
        self.capacity = capacity(conf)
        self._stop = threading.Event()
        self._sync_now = threading.Event()
        self._threads: list[threading.Thread] = []
        # The node's Spark Connect server (squall.spark.node), only if asked for: a JVM.
        self.spark: Any = None
        if conf.get("supervisor.spark.connect.enabled"):
            from squall.spark.node import NodeServer

            self.spark = NodeServer(conf, self.local_dir)
        self.localizer = Localizer(conf, self.local_dir, now, on_built=self._sync_now.set)
        self.health = HealthCheck(conf.get("storm.health.check.dir"), conf["storm.health.check.timeout.ms"],
                                  self.node, self.local_dir)
        self.unhealthy: str | None = None  # why the last health check failed
        self.assignments = Assignments(
            conf, self.node, self.host, self.state, localizer=self.localizer, launcher=self.launcher,
            wake=self._sync_now, now=now, secure=self.secure, credentials=self.zk_credentials or [],
            worker_extras=dict if self.spark is None else self.spark.worker_conf)
        self.logviewer: Logviewer | None = None
        # Stack dumps, profiles and restarts nimbus asks of this node's workers (its own thread).
        self.profiler = WorkerProfiler(conf, self.node, self.local_dir, self.state, self.launcher, now, local)

    # -- lifecycle -----------------------------------------------------------

    def start(self) -> None:
        if self.status is not Status.INIT:
            return
        # Process-wide, for the daemon's life (restored by stop() for in-process use).
        self._umask = os.umask(UMASK)
        for sub in ("workers", "code", "state", logfiles.ARTIFACTS):
            private_dir(self.local_dir / sub)
        self.logviewer = start_logviewer(self.conf, self.local_dir)
        run_as = self.launcher.run_as
        run_as.enabled = run_as.decide()
        if self.spark is not None and run_as.enabled:
            # The node's Spark server runs UDFs of every topology: a user of its own, not root.
            self.spark.server.identity = run_as.spark_identity
            self.spark.server.shared = run_as.shared
        self.session.start()
        connect(self.zk, self.conf, "supervisor")
        self.state.setup(fix_acls=False)  # the leader nimbus re-ACLs the tree
        if self.logviewer is not None:
            self.logviewer.follow(self.state)  # the keys of the tokens nimbus mints for it
        self._register()
        self._assignments_watch = self.state.watch_assignments(self._on_assignments_changed)
        self.profiler.start()
        loops = [(self._heartbeat_loop, "heartbeat"), (self._assignments_loop, "sync-assignments"),
                 (self._processes_loop, "sync-processes")]
        if self.health.directory is not None:
            self.check_health()  # before any worker is placed here
            loops.append((self._health_loop, "health"))
        for target, name in loops:
            thread = threading.Thread(target=target, name=f"supervisor-{name}", daemon=True)
            self._threads.append(thread)
            thread.start()
        if self.spark is not None:
            self.spark.start()  # in the background: workers do not wait for the JVM
        self.status = Status.RUNNING
        log.info("supervisor started", node=self.node, host=self.host, ports=self.launcher.ports,
                 local_dir=str(self.local_dir))

    def stop(self, reason: str = "stop", kill_workers: bool = False) -> None:
        """Stop the daemon; its workers keep running unless ``kill_workers``."""
        if self.status is not Status.RUNNING:
            return
        log.info("supervisor stopping", reason=reason, kill_workers=kill_workers)
        self._stop.set()
        self._sync_now.set()
        if self._assignments_watch is not None:
            self._assignments_watch.stop()
        self.assignments.stop()
        self.profiler.stop()
        for thread in self._threads:
            thread.join(10)
        if kill_workers:
            self.launcher.kill_all(reason)
        if self.spark is not None:
            # After the workers: their bolts must not see the server die first.
            # Without them it keeps running for the workers; the next supervisor adopts it.
            self.spark.stop(kill=kill_workers, reason=reason)
        if self.logviewer is not None:
            self.logviewer.stop()
        self.session.close()
        disconnect(self.zk)
        if self._umask is not None:
            os.umask(self._umask)
        self.status = Status.STOPPED

    def wait(self) -> None:
        self._stop.wait()

    # -- ZooKeeper -----------------------------------------------------------

    def _register(self) -> None:
        info = {"node": self.node, "host": self.host, "ports": self.launcher.ports, "time": self.now(),
                "healthy": self.unhealthy is None, **self.capacity}
        if self.unhealthy is not None:
            info["health"] = self.unhealthy
        if self.logviewer is not None:
            info["logviewer"] = self.logviewer.url
        self.state.register_supervisor(self.node, info)

    def _on_session_lost(self) -> None:
        log.warning("zookeeper session lost; workers keep running")

    def _on_connected(self) -> None:
        self._sync_now.set()

    def _on_assignments_changed(self, children: list[str]) -> None:
        self._sync_now.set()

    # -- timers --------------------------------------------------------------

    def _every(self, period: float, action: Callable[[], None], wake: threading.Event | None = None) -> None:
        while not self._stop.is_set():
            try:
                action()
            except Exception:  # noqa: BLE001 - ZooKeeper or disk trouble: next round
                log.exception("supervisor timer failed", action=action.__name__)
            if wake is not None:
                wake.wait(period)
                wake.clear()
            else:
                self._stop.wait(period)

    def _heartbeat_loop(self) -> None:
        self._every(self.conf["supervisor.heartbeat.frequency.secs"], self.heartbeat)

    def _assignments_loop(self) -> None:
        self._every(self.conf["supervisor.assignments.sync.secs"], self.sync_assignments, self._sync_now)

    def _processes_loop(self) -> None:
        self._every(self.conf["supervisor.monitor.frequency.secs"], self.sync_processes)

    def _health_loop(self) -> None:
        self._every(self.conf["supervisor.monitor.frequency.secs"], self.check_health)

    def check_health(self) -> None:
        """Run the node's health checks; a change is published at once (nimbus places no new
        workers on an unhealthy node; those running stay)."""
        reason = self.health.run()
        if reason == self.unhealthy:
            return
        if reason is None:
            log.info("node health check passes again", node=self.node)
        else:
            log.warning("node health check failed: no new workers here", node=self.node, reason=reason)
        self.unhealthy = reason
        self._register()

    def heartbeat(self) -> None:
        self._register()
        beats = {}
        desired = self.assignments.desired
        for port, slot in self.launcher.slots.items():
            beat = slot.heartbeat()
            running = (desired.get(port) or {}).get("topology_id")
            if beat and self.launcher.run_as.enabled and beat.get("topology_id") != running:
                beat = None  # written by user code: it speaks for its own topology only
            if beat and slot.process() is not None:
                beats[str(port)] = {k: beat.get(k)
                                    for k in ("topology_id", "time", "executors", "stats", "metrics",
                                              "executor_stats", "system", "transfer", "pid")}
                record = slot.pid_record() or {}
                if record.get("sandboxed"):  # its own pid is its namespace's (1): the node's is ours
                    beats[str(port)]["pid"] = record.get("pid")
            self._forward_errors(slot, running)
        self.state.put_worker_beats(self.node, beats)

    def _forward_errors(self, slot: Slot, running: str | None) -> None:
        """The slot's worker's new errors, as its topology's (``running``: the one it should run)."""
        errors, offset = slot.new_errors(self._error_offsets.get(slot.port, 0))
        self._error_offsets[slot.port] = offset
        for error in errors:
            # The slot's topology, not the one the line names: user code writes there too.
            topology_id = running or (error.get("topology_id") if isinstance(error, dict) else None)
            record = error_record(error, topology_id, self.node, slot.port) if topology_id else None
            if record is not None:
                self.state.add_error(topology_id, record)

    def sync_assignments(self) -> None:
        self.assignments.sync()

    def sync_processes(self) -> None:
        if not self.assignments.synced.is_set():
            return
        desired = self.assignments.current()
        # Slot by slot, each looked at just before it is acted on (killing one takes a while).
        for port, slot in self.launcher.slots.items():
            self.launcher.reap(port)
            for action in self.process_sync.slot(desired.get(port), slot.look(), self.now(), self.local()):
                self._execute(slot, action)
            self._hold_to_memory_limit(slot, desired.get(port))
        self.localizer.keep_logs(desired)

    def _hold_to_memory_limit(self, slot: Slot, want: dict[str, Any] | None) -> None:
        """Sample the slot's worker against its memory limit; one over it for long enough is
        killed and restarted, saying why here, in its log and in its topology's errors."""
        limit = (want or {}).get("memory_limit_mb")
        enforce = self.conf["supervisor.worker.memory.limit.enforce"]
        rss = slot.rss() if limit is not None and enforce else None
        if want is None or rss is None:
            self.memory.forget(slot.port)
            return
        launch = (slot.pid_record() or {}).get("launch")
        over = self.memory.sample(slot.port, launch, rss, limit, self.local())
        if over is None:
            return
        topology_id = want["topology_id"]
        reason = over.reason()
        log.warning("worker over its memory limit: killing and restarting", port=slot.port,
                    topology=topology_id,
                    rss_mb=round(over.rss_mb), limit_mb=over.limit_mb, samples=over.samples,
                    over_secs=round(over.over_secs, 1))
        self.launcher.kill(slot, MEMORY_LIMIT, {"rss_mb": round(over.rss_mb), "limit_mb": over.limit_mb})
        self.launcher.note_in_worker_log(topology_id, slot.port, reason, self.now())
        # As each of the worker's components' error: the UI shows a component's last error.
        for component in components_of(want):
            self.state.add_error(topology_id, {
                "component": component, "error": reason, "task": None, "time": self.now(), "fatal": True,
                "worker": f"{self.host}:{slot.port}", "topology_id": topology_id, "node": self.node,
                "port": slot.port})
        self._launch(slot, want)

    def _execute(self, slot: Slot, action: Action) -> None:
        if isinstance(action, Kill):
            self.launcher.kill(slot, action.reason, action.detail)
        elif isinstance(action, WriteAssignment):
            slot.write_assignment(action.want)
        elif isinstance(action, Launch):
            if action.reason == NOT_RUNNING:
                log.info("worker not running: launching", port=slot.port, topology=action.want["topology_id"])
            self._launch(slot, action.want)

    def _launch(self, slot: Slot, want: dict[str, Any]) -> None:
        if not self.assignments.still_assigned(slot.port, want):
            return
        topology_id = want["topology_id"]
        secrets = self.localizer.secrets.get(topology_id)
        if self.secure and secrets is None:  # not synced since: the next sync says why
            log.error("no secrets for the topology: worker not launched", port=slot.port,
                      topology=topology_id)
            return
        self.launcher.launch(slot, want, secrets, self.assignments.log_readers.get(topology_id))
