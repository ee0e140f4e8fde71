"""One worker process: ``python -m squall.worker --dir WORKER_DIR``.

The supervisor and its worker talk through files in WORKER_DIR only; the
worker never talks to ZooKeeper.  Every JSON file is written whole to a
temporary file in the same directory and moved into place with
``os.replace``, so a reader never sees half of one.

``assignment.json`` (supervisor -> worker; written before the launch, may be
rewritten while the worker runs)::

    {"topology_id": "wordcount-3-1718000000",
     "topology": {...},            # TopologyDef.to_dict()
     "conf": {...},                # topology conf overrides, merged by nimbus
     "code_dir": "/path" | null,   # extracted topology code, put first on sys.path
     "address": "zmq+tcp://host:6700",          # this worker's slot
     "executors": [[1, 1], [4, 5]],             # this worker's [first task, last task]
     "task_address": {"1": "zmq+tcp://host:6700", ...},   # every task of the topology
     "active": true,
     "version": 7}

The worker re-reads it when it changes (checked every
``worker.assignment.poll.secs``, 0.5 s): a new ``active`` activates or
deactivates the spouts; new addresses of other workers' tasks re-route the
tuples sent to them; any other change (topology_id, topology, conf, code_dir,
address, or this worker's executors) makes the worker exit with
:data:`EXIT_REASSIGNED` so that the supervisor launches it afresh.  An
unreadable rewrite is ignored until the next one.

``heartbeat.json`` (worker -> supervisor; every
``worker.heartbeat.frequency.secs``, 1 s, from the moment the worker is
started)::

    {"time": 1718000000.12,        # wall-clock time.time() of this beat
     "pid": 4242, "topology_id": ..., "address": ...,
     "executors": [[1, 1], [4, 5]],  # as in the assignment applied
     "version": 7,                 # the assignment version applied
     "status": "running",          # starting | running | stopping
     "ready": true,                # every executor has initialized its components
     "stats": {component: {"emitted", "executed", "acked", "failed", "pending",
                           # spouts: over the latest acks (at most 200,000 samples)
                           "complete_latency_ms": {"count", "mean", "p50", "p99", "max"}}},
     "transfer": {"frames_sent", "frames_received", "frames_dropped", ...}}

``secrets.json`` (supervisor -> worker; mode 0600, only in a secure cluster)::

    {"curve": {"public": b64, "secret": b64} | null,   # the topology's CURVE keypair
     "zookeeper": {"user": str, "passwords": [str, ...]} | null}

With a keypair every ZeroMQ socket of the worker speaks CURVE and admits only
the topology's workers; the ZooKeeper credentials go to the transactional
state's client.  A secrets.json that is malformed or readable by group or
others, or none when the assignment's conf says ``squall.secure``, stops the
worker with :data:`EXIT_BAD_ASSIGNMENT`.  Secrets are never logged.

``errors.jsonl`` (worker -> supervisor; appended): one JSON object per
component error, :meth:`ErrorRecord.to_dict` plus ``topology_id``.  The
error that kills the worker is written (``"fatal": true``) before it exits.

``worker.log``: the supervisor points stdout and stderr there; the worker
logs JSON lines to stderr.

Exit codes: :data:`EXIT_OK` after SIGTERM or SIGINT (an orderly stop within
``worker.shutdown.timeout.secs``); :data:`EXIT_WORKER_DIED` when a component
or worker thread raised an unhandled error (Storm's behaviour: the
supervisor restarts the worker); :data:`EXIT_REASSIGNED` when the assignment
changed beyond what a running worker can apply; :data:`EXIT_BAD_ASSIGNMENT`
when assignment.json is missing or invalid or its topology does not load;
:data:`EXIT_BIND_FAILED` when the slot's port could not be taken.
SIGKILL just kills it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from types import FrameType
from typing import Any

import structlog

from squall import config
from squall.affinity import pin_to
from squall.clock import Clock
from squall.cluster.fenced_state import BACKEND_RESOURCE
from squall.errors import SquallError, TransportError
from squall.lazy import Lazy
from squall.metrics.system import ProcessSampler
from squall.runtime.logging import configure_logging
from squall.runtime.status import Status
from squall.security import curve as curve_keys
from squall.topology.topology import definition_from_dict
from squall.worker.plan import TopologyPlan, plan_topology
from squall.worker.reporting import ErrorRecord, describe
from squall.worker.transport import Transport, transport_for
from squall.worker.wire import WireValidator
from squall.worker.worker import Worker
from squall.worker.zmq_transport import SCHEME as ZMQ_SCHEME
from squall.worker.zmq_transport import ZmqTransport

log = structlog.get_logger("squall.worker.WorkerProcess")

EXIT_OK = 0
EXIT_WORKER_DIED = 20
EXIT_REASSIGNED = 21
EXIT_BAD_ASSIGNMENT = 22
EXIT_BIND_FAILED = 23

EXIT_MEANINGS = {
    EXIT_OK: "stopped on request",
    EXIT_WORKER_DIED: "a component or worker thread raised an unhandled error",
    EXIT_REASSIGNED: "its executors or topology were reassigned: launch it afresh",
    EXIT_BAD_ASSIGNMENT: "assignment.json is missing or invalid, or its topology does not load",
    EXIT_BIND_FAILED: "its slot's port could not be bound",
}

PERCENTILE_SAMPLES = 10_000

ASSIGNMENT = "assignment.json"
HEARTBEAT = "heartbeat.json"
ERRORS = "errors.jsonl"
SECRETS = "secrets.json"
# An orderly stop lets senders deliver what they queued for this long at most
# (and never past worker.shutdown.timeout.secs).
ORDERLY_LINGER_SECS = 1.0


class AssignmentError(SquallError):
    """assignment.json is missing, malformed, or names executors the topology lacks."""


class SecretsError(SquallError):
    """secrets.json is unreadable, malformed, or readable by others."""


@dataclass(frozen=True)
class WorkerSecrets:
    curve: tuple[bytes, bytes] | None  # raw (public, secret)
    zookeeper: list[tuple[str, str]] | None  # (user, password) pairs

    def __repr__(self) -> str:  # never let a traceback or a log print a key
        return (f"WorkerSecrets(curve={'<set>' if self.curve else None}, "
                f"zookeeper={'<set>' if self.zookeeper else None})")


def read_secrets(path: Path) -> WorkerSecrets | None:
    """The worker's secrets.json, or None if there is none; SecretsError if it is
    readable by group or others or not what the supervisor writes.  Error
    messages name what is wrong, never a value."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    except OSError as e:
        msg = f"cannot read {path}: {e.strerror}"
        raise SecretsError(msg) from None
    if st.st_mode & 0o077:
        msg = f"{path} is accessible to group or others (mode {st.st_mode & 0o777:o}); it must be 0600"
        raise SecretsError(msg)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        msg = f"cannot read {path}: not JSON ({type(e).__name__})"
        raise SecretsError(msg) from None
    if not isinstance(data, dict) or "curve" not in data or "zookeeper" not in data:
        msg = f"{path}: expected an object with 'curve' and 'zookeeper'"
        raise SecretsError(msg)
    keys = None
    if data["curve"] is not None:
        pair = data["curve"]
        if (not isinstance(pair, dict) or not isinstance(pair.get("public"), str)
                or not isinstance(pair.get("secret"), str)):
            msg = f"{path}: 'curve' must be null or {{'public': base64, 'secret': base64}}"
            raise SecretsError(msg)
        try:
            keys = curve_keys.raw(pair)
        except ValueError:
            msg = f"{path}: 'curve' does not hold two base64 32-byte keys"
            raise SecretsError(msg) from None
    creds = None
    if data["zookeeper"] is not None:
        zk = data["zookeeper"]
        if (not isinstance(zk, dict) or not isinstance(zk.get("user"), str) or not zk["user"]
                or not isinstance(zk.get("passwords"), list) or not zk["passwords"]
                or not all(isinstance(p, str) and p for p in zk["passwords"])):
            msg = f"{path}: 'zookeeper' must be null or {{'user': str, 'passwords': [str, ...]}}"
            raise SecretsError(msg)
        creds = [(zk["user"], password) for password in zk["passwords"]]
    return WorkerSecrets(keys, creds)


class StartupError(SquallError):
    """The worker could not start; ``exit_code`` says why."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def write_json_atomic(path: Path, obj: Any) -> None:
    """Write ``obj`` as JSON to ``path`` so that no reader sees a partial file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(obj, separators=(",", ":")))
    os.replace(tmp, path)


@dataclass(frozen=True)
class Assignment:
    topology_id: str
    topology: dict[str, Any]
    conf: dict[str, Any]
    code_dir: str | None
    address: str
    executors: list[list[int]]
    task_address: dict[int, str]
    active: bool
    version: int

    @classmethod
    def from_dict(cls, data: Any) -> Assignment:
        def need(key: str, kind: type | tuple[type, ...]) -> Any:
            if not isinstance(data, dict) or key not in data:
                msg = f"{ASSIGNMENT}: missing {key!r}"
                raise AssignmentError(msg)
            value = data[key]
            if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
                msg = f"{ASSIGNMENT}: {key!r} has the wrong type ({type(value).__name__})"
                raise AssignmentError(msg)
            return value

        executors = need("executors", list)
        if not all(isinstance(e, list) and len(e) == 2 and all(type(t) is int for t in e) for e in executors):
            msg = f"{ASSIGNMENT}: 'executors' must be a list of [first_task, last_task], got {executors!r}"
            raise AssignmentError(msg)
        try:
            task_address = {int(t): str(a) for t, a in need("task_address", dict).items()}
        except ValueError as e:
            msg = f"{ASSIGNMENT}: 'task_address' keys must be task ids: {e}"
            raise AssignmentError(msg) from e
        return cls(
            topology_id=need("topology_id", str),
            topology=need("topology", dict),
            conf=dict(data.get("conf") or {}),
            code_dir=data.get("code_dir"),
            address=need("address", str),
            executors=executors,
            task_address=task_address,
            active=need("active", bool),
            version=need("version", int),
        )

    def identity(self) -> tuple[Any, ...]:
        """What a running worker cannot change: a new identity means a new worker."""
        return (self.topology_id, self.topology, self.conf, self.code_dir, self.address,
                sorted(map(tuple, self.executors)))


def read_assignment(path: Path) -> Assignment:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        msg = f"cannot read {path}: {e}"
        raise AssignmentError(msg) from e
    return Assignment.from_dict(data)


def summarise_stats(stats: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Worker.stats() with each component's latency samples (one deque per spout
    task) reduced to a summary."""
    out = {}
    for component, s in stats.items():
        s = dict(s)
        # One copy, in one C call: the spout cannot append in the middle of it (a
        # deque that changes under its iterator raises); copies of up to 200,000
        # samples are most of what a heartbeat costs, and one is enough.
        samples = list(chain.from_iterable(s.pop("latencies", ())))
        if samples:
            n = len(samples)
            # Percentiles from an even subsample: sorting 200,000 samples every
            # heartbeat would hold the GIL for tens of milliseconds.
            step = max(1, n // PERCENTILE_SAMPLES)
            ordered = sorted(samples[::step])
            m = len(ordered)
            s["complete_latency_ms"] = {
                "count": n,
                "mean": sum(samples) / n * 1000,
                "p50": ordered[m // 2] * 1000,
                "p99": ordered[min(m - 1, int(m * 0.99))] * 1000,
                "max": max(samples) * 1000,
            }
        out[component] = s
    return out


class WorkerProcess:
    """The shell around a :class:`Worker`: files in, files out, signals, exit codes.

    ``start()`` builds and starts the worker; ``run()`` blocks in the loop
    that writes heartbeats, follows assignment.json and handles signals and
    the worker's death, and returns the exit code.  Signal handlers and the
    death callback only enqueue an event; the loop acts on it.
    """

    def __init__(self, directory: Path, *, node: str, clock: Clock | None = None) -> None:
        self.dir = directory
        self.node = node
        self.clock = clock or Clock()
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
        self._assignment_sig = _signature(path)
        try:
            assignment = read_assignment(path)
        except AssignmentError as e:
            raise StartupError(str(e), EXIT_BAD_ASSIGNMENT) from e
        self.assignment = assignment
        structlog.contextvars.bind_contextvars(node=self.node, topology=assignment.topology_id,
                                               worker=assignment.address, pid=os.getpid())
        if assignment.code_dir and assignment.code_dir not in sys.path:
            sys.path.insert(0, assignment.code_dir)
        try:
            # The worker's own directory: multilang children write their pid files under it,
            # where the supervisor finds (and kills) any this worker leaves behind.
            overrides = {**assignment.conf, config.WORKER_DIR: str(self.dir.resolve())}
            plan = plan_topology(definition_from_dict(assignment.topology), overrides=overrides)
        except SquallError as e:
            raise StartupError(str(e), EXIT_BAD_ASSIGNMENT) from e
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
            resources = {BACKEND_RESOURCE: Lazy(lambda: _zookeeper_backend(plan.conf, creds))}
            self.worker = Worker(plan, executors, assignment.address, assignment.task_address, self.transport,
                                 self.clock, node=self.node, active=assignment.active,
                                 error_sink=self._append_error, on_death=self._on_death,
                                 resources=resources, owns_process=True)
            if self.worker.transfer is not None:
                # Nothing from another worker reaches an executor unchecked.
                self.worker.transfer.validator = WireValidator(plan, self.worker.local_tasks)
            self.worker.bind()
        except TransportError as e:
            raise StartupError(str(e), EXIT_BIND_FAILED) from e
        except Exception as e:  # whatever stops the worker from being built
            msg = f"cannot build the worker: {e}"
            raise StartupError(msg, EXIT_BAD_ASSIGNMENT) from e
        self.worker.start()
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
        sig = _signature(path)
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
        self.assignment = new
        return None

    # -- files out -----------------------------------------------------------

    def heartbeat(self) -> dict[str, Any]:
        assert self.assignment is not None and self.worker is not None
        worker = self.worker
        return {
            "time": time.time(),
            "pid": os.getpid(),
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
        self._append_error(ErrorRecord(a.topology.get("name", a.topology_id) if a else "", "__worker", None,
                                       text, trace, True, a.address if a else ""))
        log.error("worker could not start", error=text, exit_code=e.exit_code,
                  meaning=EXIT_MEANINGS[e.exit_code])


def _signature(path: Path) -> tuple[int, int, int] | None:
    """Changes whenever the file is replaced or rewritten."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def _remote(a: Assignment, worker: Worker) -> dict[int, str]:
    return {t: addr for t, addr in a.task_address.items() if t not in worker.local_tasks}


def pin_to_core(cpu: str | None) -> None:
    """Pin this process to the core its supervisor chose, before any thread starts (threads inherit it)."""
    if not cpu:
        return
    try:
        pin_to(int(cpu))
    except (ValueError, OSError) as e:
        # A core the supervisor may not give (a cgroup shrank since): run unpinned, say so.
        log.warning("cannot pin the worker to its core", cpu=cpu, error=str(e))
        return
    log.info("worker pinned to a core", cpu=int(cpu))


def main(argv: list[str] | None = None) -> int:
    env = os.environ
    parser = argparse.ArgumentParser(prog="python -m squall.worker",
                                     description="Run one Squall worker (launched by the supervisor).")
    parser.add_argument("--dir", default=env.get("SQUALL_WORKER_DIR"), type=Path,
                        help="the worker directory holding assignment.json [env: SQUALL_WORKER_DIR]")
    parser.add_argument("--node", default=env.get("SQUALL_NODE") or socket.gethostname(),
                        help="this node's name, for logs [env: SQUALL_NODE; default: the hostname]")
    parser.add_argument("--log-level", default=env.get("SQUALL_LOG_LEVEL", "info"),
                        help="debug, info, warning or error [env: SQUALL_LOG_LEVEL; default: info]")
    args = parser.parse_args(argv)
    if args.dir is None:
        parser.error("--dir is required")
    configure_logging(args.log_level, json=True)
    pin_to_core(env.get("SQUALL_WORKER_CPU"))
    process = WorkerProcess(args.dir, node=args.node)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        process.post("signal", signum)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, on_signal)
    try:
        process.start()
    except StartupError as e:
        return e.exit_code
    return process.run()


def _zookeeper_backend(conf: dict[str, Any], credentials: list[tuple[str, str]] | None = None) -> Any:
    """The cluster's ZooKeeper as transactional state (kazoo is imported only
    by a worker that runs a transactional component), authenticated with the
    credentials of secrets.json when the cluster is secure."""
    from squall.cluster.transactional_state import ZooKeeperBackend

    if credentials is None:
        return ZooKeeperBackend.for_cluster_conf(conf)
    return ZooKeeperBackend.for_cluster_conf(conf, credentials=credentials)
