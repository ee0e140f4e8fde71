"""The worker process's lifecycle: build and start the :class:`Worker` of an assignment, then
heartbeats, assignment changes, signals and death, until it exits with a code of the contract.

What the files hold and what the exit codes mean is :mod:`squall.worker.process.contract`; the
command line is :mod:`squall.worker.__main__`.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

import structlog

from squall import config, plugins
from squall.clock import Clock
from squall.cluster.fenced_state import BACKEND_RESOURCE
from squall.errors import SquallError, TransportError
from squall.lazy import Lazy
from squall.metrics.system import ProcessSampler
from squall.runtime.debug_options import DebugOptions, conf_debug
from squall.runtime.log_levels import LogLevels
from squall.runtime.logging import ALWAYS
from squall.runtime.status import Status
from squall.topology.topology import definition_from_dict
from squall.worker.event_log import EventLog
from squall.worker.executors.reporting import ErrorRecord, describe
from squall.worker.executors.spout import summarise_latencies
from squall.worker.plan import TopologyPlan, plan_topology
from squall.worker.process.contract import (
    ASSIGNMENT,
    DRPC_RESOURCE,
    ERRORS,
    EXIT_BAD_ASSIGNMENT,
    EXIT_BIND_FAILED,
    EXIT_MEANINGS,
    EXIT_OK,
    EXIT_REASSIGNED,
    EXIT_WORKER_DIED,
    HEARTBEAT,
    SECRETS,
    Assignment,
    AssignmentError,
    SecretsError,
    file_signature,
    read_assignment,
    read_secrets,
    write_json_atomic,
)
from squall.worker.wire.schemes import transport_for
from squall.worker.wire.transport import Transport
from squall.worker.wire.zmq_transport import SCHEME as ZMQ_SCHEME
from squall.worker.wire.zmq_transport import ZmqTransport
from squall.worker.worker import Worker

log = structlog.get_logger("squall.worker.WorkerProcess")

# An orderly stop lets senders deliver what they queued for this long at most
# (and never past worker.shutdown.timeout.secs).
ORDERLY_LINGER_SECS = 1.0


def _describe_level(entry: Any) -> str:
    """``DEBUG until 2026-01-02T12:00:30Z`` or ``INFO until reset``, from the wire form."""
    if not isinstance(entry, dict):
        return repr(entry)
    expires = entry.get("expires_at")
    if isinstance(expires, (int, float)) and not isinstance(expires, bool):
        try:
            return f"{entry.get('level')} until {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(expires))}"
        except (OverflowError, OSError, ValueError):
            return f"{entry.get('level')} until {expires}"
    return f"{entry.get('level')} until reset"


class StartupError(SquallError):
    """The worker could not start; ``exit_code`` says why."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def summarise_stats(stats: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Worker.stats() with each component's latency samples (one deque per spout
    task) reduced to a summary (see summarise_latencies)."""
    out = {}
    for component, s in stats.items():
        s = dict(s)
        summary = summarise_latencies(s.pop("latencies", ()))
        if summary is not None:
            s["complete_latency_ms"] = summary
        out[component] = s
    return out


class WorkerProcess:
    """The shell around a :class:`Worker`: files in, files out, signals, exit codes.

    ``start()`` builds and starts the worker; ``run()`` blocks in the loop
    that writes heartbeats, follows assignment.json and handles signals and
    the worker's death, and returns the exit code.  Signal handlers and the
    death callback only enqueue an event; the loop acts on it.
    """

    def __init__(self, directory: Path, *, node: str, clock: Clock | None = None,
                 levels: LogLevels | None = None, launch: str | None = None,
                 events_fd: int | None = None) -> None:
        self.dir = directory
        self.events_fd = events_fd  # events.log, opened by the supervisor (None: no event log)
        self.events: EventLog | None = None
        self.node = node
        self.launch = launch  # the supervisor's token for this launch, told back in each heartbeat
        self.clock = clock or Clock()
        # set_log_level's levels, asked by this process's log filter (configure_logging).
        self.levels = levels if levels is not None else LogLevels()
        self.status = Status.INIT
        self.assignment: Assignment | None = None
        self.plan: TopologyPlan | None = None
        self.worker: Worker | None = None
        self.transport: Transport | None = None
        self._assignment_sig: tuple[int, int, int] | None = None
        self._events: deque[tuple[str, Any]] = deque()  # appended by signal handlers and threads
        self._wake = threading.Event()
        self._errors_lock = threading.Lock()
        self._lock = threading.Lock()
        self.system = ProcessSampler()  # CPU, memory, GC of this process, for the heartbeat

    # -- lifecycle -----------------------------------------------------------

    def start(self) -> None:
        """Read the assignment, build the worker, bind its port, start it.

        Raises :class:`StartupError` with the exit code to use; whatever was
        started is stopped first and the cause is in errors.jsonl.
        """
        with self._lock:
            if self.status is not Status.INIT:
                return
            self.status = Status.STARTING
        try:
            self._start()
        except StartupError as e:
            self.status = Status.FAILED
            self._record_startup_error(e)
            self._release()
            raise
        self.status = Status.RUNNING

    def _start(self) -> None:
        path = self.dir / ASSIGNMENT
        self._assignment_sig = file_signature(path)
        try:
            assignment = read_assignment(path)
        except AssignmentError as e:
            raise StartupError(str(e), EXIT_BAD_ASSIGNMENT) from e
        self.assignment = assignment
        structlog.contextvars.bind_contextvars(node=self.node, topology=assignment.topology_id,
                                               worker=assignment.address, pid=os.getpid())
        self._set_levels(assignment.log_levels)
        # What only code Squall runs may import (a streamparse project's ``streamparse``),
        # then the topology's code before it.
        plugins.add_import_roots()
        if assignment.code_dir and assignment.code_dir not in sys.path:
            sys.path.insert(0, assignment.code_dir)
        try:
            # The worker's own directory: multilang children write their pid files under it,
            # where the supervisor finds (and kills) any this worker leaves behind.
            overrides = {**assignment.conf, config.WORKER_DIR: str(self.dir.resolve())}
            plan = plan_topology(definition_from_dict(assignment.topology), overrides=overrides)
        except SquallError as e:
            raise StartupError(str(e), EXIT_BAD_ASSIGNMENT) from e
        # context.topology_name, the executors' log lines and the errors they record: the
        # submitted name, not the definition's class name.
        plan.name = assignment.topology_name
        by_id = {e.id: e for e in plan.executors}
        unknown = [e for e in assignment.executors if tuple(e) not in by_id]
        if unknown:
            msg = f"{ASSIGNMENT}: executors {unknown} are not executors of {assignment.topology_id}"
            raise StartupError(msg, EXIT_BAD_ASSIGNMENT)
        executors = [by_id[(first, last)] for first, last in assignment.executors]
        self.plan = plan
        try:
            secrets = read_secrets(self.dir / SECRETS)
        except SecretsError as e:
            raise StartupError(str(e), EXIT_BAD_ASSIGNMENT) from e
        if assignment.conf.get("squall.secure") is True and (secrets is None or secrets.curve is None):
            msg = f"the cluster is secure but {SECRETS} holds no CURVE keypair for this worker"
            raise StartupError(msg, EXIT_BAD_ASSIGNMENT)
        creds = secrets.zookeeper if secrets is not None else None
        also = secrets.zookeeper_acl if secrets is not None else []
        try:
            if assignment.address.startswith(f"{ZMQ_SCHEME}://"):
                self.transport = ZmqTransport(send_hwm=plan.conf["zmq.hwm"],
                                              curve=secrets.curve if secrets is not None else None,
                                              max_message_bytes=plan.conf["zmq.max.message.bytes"])
            else:
                self.transport = transport_for(assignment.address)
            # Transactional components keep their state in the cluster's ZooKeeper
            # (Storm's TransactionalState): one client per worker process, made
            # only if a transactional component asks for it.
            resources: dict[str, Any] = {
                BACKEND_RESOURCE: Lazy(lambda: _zookeeper_backend(plan.conf, creds, also))}
            if secrets is not None and secrets.drpc is not None:
                # The topology's DRPC credential, for its DRPC spouts and ReturnResults (squall.drpc).
                resources[DRPC_RESOURCE] = secrets.drpc
            self.events = self._event_log(plan, assignment)
            self.worker = Worker(plan, executors, assignment.address, assignment.task_address, self.transport,
                                 self.clock, node=self.node, active=assignment.active,
                                 error_sink=self._append_error, on_death=self._on_death,
                                 events=self.events, resources=resources, owns_process=True)
            self.worker.bind()
        except TransportError as e:
            raise StartupError(str(e), EXIT_BIND_FAILED) from e
        except Exception as e:  # whatever stops the worker from being built
            msg = f"cannot build the worker: {e}"
            raise StartupError(msg, EXIT_BAD_ASSIGNMENT) from e
        self.worker.start()
        if assignment.tuning.get("max_spout_pending"):  # a restarted worker keeps self-regulation's value
            self.worker.set_max_pending(assignment.tuning["max_spout_pending"])
        log.info("worker process started", version=assignment.version, executors=assignment.executors,
                 active=assignment.active)
        self._write_heartbeat()

    def run(self) -> int:
        """Until asked to stop or the worker dies; returns the exit code."""
        assert self.plan is not None
        conf = self.plan.conf
        beat_every = conf["worker.heartbeat.frequency.secs"]
        poll_every = conf["worker.assignment.poll.secs"]
        now = time.monotonic()
        next_beat, next_poll = now + beat_every, now + poll_every
        while True:
            while self._events:
                kind, arg = self._events.popleft()
                code = self._handle(kind, arg)
                if code is not None:
                    return code
            now = time.monotonic()
            if now >= next_poll:
                next_poll = now + poll_every
                self._expire_levels()
                code = self._follow_assignment()
                if code is not None:
                    self.stop("reassigned", orderly=True)
                    return code
            if now >= next_beat:
                next_beat = now + beat_every
                self._write_heartbeat()
            # Short waits: a signal handler only appends, it cannot wake us.
            self._wake.wait(min(0.1, max(0.0, min(next_beat, next_poll) - time.monotonic())))
            self._wake.clear()

    def stop(self, reason: str, orderly: bool = True, timeout: float | None = None) -> None:
        with self._lock:
            if self.status in (Status.STOPPING, Status.STOPPED):
                return
            self.status = Status.STOPPING
        log.info("worker process stopping", reason=reason)
        if timeout is None and self.plan is not None:
            timeout = self.plan.conf["worker.shutdown.timeout.secs"]
        if orderly and isinstance(self.transport, ZmqTransport) and timeout is not None:
            # Frames queued for connected peers get a bounded chance to go out; those
            # for peers not connected are counted and dropped (see zmq_transport).
            self.transport.close_linger = ORDERLY_LINGER_SECS
            self.transport.linger_deadline = time.monotonic() + timeout
        if self.worker is not None:
            self.worker.stop(reason, timeout=timeout, orderly=orderly)
        self._release()
        self.status = Status.STOPPED

    def _release(self) -> None:
        if self.transport is not None:
            self.transport.close()
        if self.events is not None:  # after the executors: their last sampled lines are written
            self.events.close()
            self.events = None

    # -- events (signals, death) ---------------------------------------------

    def post(self, kind: str, arg: Any = None) -> None:
        """Thread- and signal-safe: the loop handles it."""
        self._events.append((kind, arg))
        if kind != "signal":  # never take a lock in a signal handler
            self._wake.set()

    def _on_death(self, worker: Worker) -> None:
        self.post("death", worker.failure)

    def _handle(self, kind: str, arg: Any) -> int | None:
        if kind == "signal":
            name = signal.Signals(arg).name.lower()
            log.info("signal received, stopping", signal=name)
            self.stop(name, orderly=True)
            return EXIT_OK
        if kind == "death":
            # The fatal error is in errors.jsonl already (Worker.die reports first).
            log.error("worker died, exiting for the supervisor to restart it", error=repr(arg))
            self.stop("worker-died", orderly=False, timeout=1.0)
            return EXIT_WORKER_DIED
        msg = f"unknown worker process event {kind!r}"
        raise ValueError(msg)

    # -- assignment ----------------------------------------------------------

    def _follow_assignment(self) -> int | None:
        path = self.dir / ASSIGNMENT
        sig = file_signature(path)
        if sig == self._assignment_sig:
            return None
        self._assignment_sig = sig
        try:
            new = read_assignment(path)
        except AssignmentError as e:
            log.warning("ignoring an unreadable assignment until it is rewritten", error=str(e))
            return None
        return self.apply(new)

    def apply(self, new: Assignment) -> int | None:
        """Apply what a running worker can; an exit code when it cannot."""
        old, worker = self.assignment, self.worker
        assert old is not None and worker is not None
        if new.identity() != old.identity():
            changed = [name for name, a, b in zip(
                ("topology_id", "topology", "conf", "code_dir", "address", "executors"),
                old.identity(), new.identity(), strict=True) if a != b]
            log.info("assignment changed beyond this worker, exiting to be relaunched", changed=changed,
                     version=new.version)
            return EXIT_REASSIGNED
        if new.active != old.active:
            log.info("activating" if new.active else "deactivating", version=new.version)
            worker.set_active(new.active)
        if _remote(new, worker) != _remote(old, worker):
            log.info("peer workers moved, re-routing", version=new.version)
            worker.update_task_address(new.task_address)
        if new.log_levels != old.log_levels:
            self._set_levels(new.log_levels)
        if new.tuning != old.tuning:
            log.info("max spout pending set by self-regulation", values=new.tuning.get("max_spout_pending"))
            worker.set_max_pending(new.tuning.get("max_spout_pending") or {})
        if new.debug != old.debug and self.events is not None:
            self.events.configure(DebugOptions.from_wire(new.debug))
        self.assignment = new
        return None

    # -- the event logger (debug sampling) -----------------------------------

    def _event_log(self, plan: TopologyPlan, assignment: Assignment) -> EventLog | None:
        """The worker's event logger over the descriptor the supervisor gave (none without
        one, or with ``topology.eventlogger.executors: 0``), started with the assignment's
        settings."""
        if self.events_fd is None or plan.conf.get("topology.eventlogger.executors") == 0:
            return None
        events = EventLog(self.events_fd, {c: conf_debug(plan.component_conf(c)) for c in plan.components})
        events.configure(DebugOptions.from_wire(assignment.debug))
        events.start()
        return events

    # -- log levels (set_log_level) ------------------------------------------

    def _set_levels(self, named: dict[str, Any]) -> None:
        before = self.levels.in_force()
        if not named and not before:
            return
        # Said before they apply: a level raised to ERROR would hide its own announcement.
        log.info("log levels set", levels={name: _describe_level(entry) for name, entry in named.items()},
                 **({"were": {n: e.level for n, e in before.items()}} if before else {}), **{ALWAYS: True})
        for name, error in self.levels.apply(named).items():
            log.warning("log level ignored", name=name, error=error, **{ALWAYS: True})

    def _expire_levels(self) -> None:
        for name, entry in self.levels.expire().items():
            log.info("log level expired: back to the worker's own", name=name, level=entry.level,
                     timeout_secs=entry.timeout_secs, **{ALWAYS: True})

    # -- files out -----------------------------------------------------------

    def heartbeat(self) -> dict[str, Any]:
        assert self.assignment is not None and self.worker is not None
        worker = self.worker
        return {
            "time": time.time(),
            "pid": os.getpid(),
            "launch": self.launch,
            "topology_id": self.assignment.topology_id,
            "address": self.assignment.address,
            "executors": self.assignment.executors,
            "version": self.assignment.version,
            "status": self.status.value,
            "ready": worker.ready.is_set(),
            "stats": summarise_stats(worker.stats()),
            "metrics": worker.user_metrics(),
            "executor_stats": worker.executor_stats(),
            "system": {**self.system.sample(), "backpressure": worker.backpressure.active},
            "transfer": {**(worker.transfer.stats() if worker.transfer else {}),
                         "misrouted": worker.misrouted},
        }

    def _write_heartbeat(self) -> None:
        try:
            write_json_atomic(self.dir / HEARTBEAT, self.heartbeat())
        except OSError as e:
            log.warning("cannot write the heartbeat", error=str(e))

    def _append_error(self, record: ErrorRecord) -> None:
        item = record.to_dict()
        item["topology_id"] = self.assignment.topology_id if self.assignment else None
        line = json.dumps(item, default=repr) + "\n"
        with self._errors_lock:
            try:
                with open(self.dir / ERRORS, "a", encoding="utf-8") as f:
                    f.write(line)
            except OSError as e:
                log.warning("cannot record a component error", error=str(e), lost=item["error"])

    def _record_startup_error(self, e: StartupError) -> None:
        cause = e.__cause__ or e
        text, trace = describe(cause)
        a = self.assignment
        self._append_error(ErrorRecord(a.topology_name if a else "", "__worker", None,
                                       text, trace, True, a.address if a else ""))
        log.error("worker could not start", error=text, exit_code=e.exit_code,
                  meaning=EXIT_MEANINGS[e.exit_code])


def _remote(a: Assignment, worker: Worker) -> dict[int, str]:
    return {t: addr for t, addr in a.task_address.items() if t not in worker.local_tasks}


def _zookeeper_backend(conf: dict[str, Any], credentials: list[tuple[str, str]] | None = None,
                       also_allowed: list[str] | None = None) -> Any:
    """The cluster's ZooKeeper as transactional state (kazoo is imported only
    by a worker that runs a transactional component), authenticated with the
    credentials of secrets.json when the cluster is secure (the topology's own
    identity; the nodes it makes also name the cluster's digest ids)."""
    from squall.cluster.transactional_state import ZooKeeperBackend

    if credentials is None:
        return ZooKeeperBackend.for_cluster_conf(conf)
    return ZooKeeperBackend.for_cluster_conf(conf, credentials=credentials, also_allowed=also_allowed or [])
