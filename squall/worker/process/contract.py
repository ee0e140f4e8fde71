"""What a supervisor and its worker process exchange: files in WORKER_DIR, and exit codes.

The worker is ``python -m squall.worker --dir WORKER_DIR`` (:mod:`squall.worker.__main__`;
its lifecycle is :mod:`squall.worker.process.lifecycle`).  The supervisor and its worker talk
through files in WORKER_DIR only (their names: :data:`ASSIGNMENT`, :data:`HEARTBEAT`,
:data:`ERRORS`, :data:`SECRETS`, which the supervisor takes from here).  The worker
never reads the cluster's state in ZooKeeper: its assignment, code and secrets come
from the supervisor, and its heartbeats and errors go back through it.  It opens a
ZooKeeper client of its own for one thing only: the state of its transactional
components (Storm's TransactionalState, :mod:`squall.cluster.transactional_state`;
the cluster's ZooKeeper unless ``transactional.zookeeper.servers`` names another),
one client per worker process, made the first time such a component asks for it (a
worker without one never connects), and authenticated with secrets.json's ZooKeeper
credentials in a secure cluster.  Two descriptors come open from the supervisor:
stdout (and stderr), the worker's ``worker.log``, and ``--events-fd N``, its
``events.log`` (the event logger's, squall.worker.event_log), both O_APPEND in its
log directory, which it never sees.
Every JSON file is written whole to a temporary
file in the same directory and moved into place with ``os.replace``, so a reader
never sees half of one.

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
     "version": 7,
     "python": "/env/bin/python",  # the Python the supervisor launched it with (its topology's
                                   # environment, squall.runtime.envbuild); may be absent
     "log_levels": {"ROOT": {"level": "DEBUG", "timeout_secs": 30, "expires_at": 1718000030.0}},
                                   # set_log_level's (squall.runtime.log_levels); may be absent
     "tuning": {"max_spout_pending": {"spout": 90}},
                                   # self-regulation's (squall.tuning.regulator); may be absent
     "debug": {"topology": {"enable": true, "samplingpct": 10.0}, "components": {...}}}
                                   # the debug action's sampling (squall.runtime.debug_options);
                                   # may be absent

The worker re-reads it when it changes (checked every
``worker.assignment.poll.secs``, 0.5 s): a new ``active`` activates or
deactivates the spouts; new addresses of other workers' tasks re-route the
tuples sent to them; new ``log_levels``, ``tuning`` and ``debug`` (the event logger's
sampling) apply at once (each level expires by the worker's clock); any other change
(topology_id, topology, conf, code_dir, address, or this worker's executors) makes the
worker exit with :data:`EXIT_REASSIGNED` so that the supervisor launches it afresh.  An
unreadable rewrite is ignored until the next one.

``heartbeat.json`` (worker -> supervisor; every
``worker.heartbeat.frequency.secs``, 1 s, from the moment the worker is
started)::

    {"time": 1718000000.12,        # wall-clock time.time() of this beat
     "pid": 4242, "topology_id": ..., "address": ...,
     "launch": "9f2c...",          # the token the supervisor launched it with (--launch)
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
     "zookeeper": {"user": str, "passwords": [str, ...]} | null,
     "drpc": {"token": str, "ca": PEM}}                 # optional: the topology's DRPC credential

With a keypair every ZeroMQ socket of the worker speaks CURVE and admits only
the topology's workers; the ZooKeeper credentials go to the transactional
state's client; the DRPC credential (which DRPC servers accept from this
topology's spouts and bolts, and the CA their certificates are signed by) to
the components, as the worker resource :data:`DRPC_RESOURCE`.  A secrets.json
that is malformed or readable by group or others, or none when the
assignment's conf says ``squall.secure``, stops the worker with
:data:`EXIT_BAD_ASSIGNMENT`.  Secrets are never logged.

``errors.jsonl`` (worker -> supervisor; appended): one JSON object per
component error, :meth:`ErrorRecord.to_dict` plus ``topology_id``.  The
error that kills the worker is written (``"fatal": true``) before it exits.

``worker.log``: the supervisor points stdout and stderr there (its logviewer serves it:
squall.supervisor.logfiles); the worker logs readable lines to stderr, or JSON lines with
``SQUALL_LOG_JSON=1`` in its environment (supervisor.worker.log.json).

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

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from squall.errors import SquallError
from squall.security import curve as curve_keys
from squall.security.files import write_private

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

# The files of WORKER_DIR (see above).
ASSIGNMENT = "assignment.json"
HEARTBEAT = "heartbeat.json"
ERRORS = "errors.jsonl"
SECRETS = "secrets.json"

# The worker resource (TopologyContext.resources) holding secrets.json's "drpc" section.
DRPC_RESOURCE = "drpc.credential"


class AssignmentError(SquallError):
    """assignment.json is missing, malformed, or names executors the topology lacks."""


class SecretsError(SquallError):
    """secrets.json is unreadable, malformed, or readable by others."""


@dataclass(frozen=True)
class WorkerSecrets:
    curve: tuple[bytes, bytes] | None  # raw (public, secret)
    zookeeper: list[tuple[str, str]] | None  # (user, password) pairs
    zookeeper_acl: list[str] = field(default_factory=list)  # digest ids also given every permission
    drpc: dict[str, str] | None = None  # {"token", "ca"}: the topology's DRPC credential

    def __repr__(self) -> str:  # never let a traceback or a log print a key
        return (f"WorkerSecrets(curve={'<set>' if self.curve else None}, "
                f"zookeeper={'<set>' if self.zookeeper else None}, drpc={'<set>' if self.drpc else None})")


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
        acl = zk.get("acl", [])
        if not isinstance(acl, list) or not all(isinstance(a, str) and ":" in a for a in acl):
            msg = f"{path}: 'zookeeper.acl' must be a list of digest ids ('user:hash')"
            raise SecretsError(msg)
    else:
        acl = []
    drpc = data.get("drpc")
    if drpc is not None and (not isinstance(drpc, dict) or not isinstance(drpc.get("token"), str)
                             or not drpc["token"] or not isinstance(drpc.get("ca"), (str, type(None)))):
        msg = f"{path}: 'drpc' must be absent or {{'token': str, 'ca': PEM}}"
        raise SecretsError(msg)
    return WorkerSecrets(keys, creds, list(acl), dict(drpc) if drpc is not None else None)


def write_json_atomic(path: Path, obj: Any) -> None:
    """Write ``obj`` as JSON to ``path`` so that no reader sees a partial file."""
    write_private(path, json.dumps(obj, separators=(",", ":")), mode=None, tmp_per_process=True)


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
    log_levels: dict[str, Any] = field(default_factory=dict)  # not in identity(): applied live
    # Self-regulation's {"max_spout_pending": {spout: value}} (not in identity(): applied live).
    tuning: dict[str, Any] = field(default_factory=dict)
    debug: dict[str, Any] = field(default_factory=dict)  # not in identity(): applied live

    @property
    def topology_name(self) -> str:
        """The name it was submitted under (nimbus puts it in the conf), as local mode names
        it; the definition's own name is its class's, which no user-facing name should show."""
        return str(self.conf.get("topology.name") or self.topology.get("name") or self.topology_id)

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
        log_levels = data.get("log_levels") or {}
        if not isinstance(log_levels, dict):
            msg = f"{ASSIGNMENT}: 'log_levels' has the wrong type ({type(log_levels).__name__})"
            raise AssignmentError(msg)
        tuning = data.get("tuning") or {}
        pending = tuning.get("max_spout_pending") if isinstance(tuning, dict) else None
        if not isinstance(tuning, dict) or not isinstance(pending or {}, dict) or not all(
                type(v) is int and v >= 1 for v in (pending or {}).values()):
            msg = (f"{ASSIGNMENT}: 'tuning' must be {{'max_spout_pending': {{spout: int >= 1}}}}, "
                   f"got {tuning!r}")
            raise AssignmentError(msg)
        debug = data.get("debug") or {}
        if not isinstance(debug, dict):
            msg = f"{ASSIGNMENT}: 'debug' has the wrong type ({type(debug).__name__})"
            raise AssignmentError(msg)
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
            log_levels=log_levels,
            tuning=tuning,
            debug=debug,
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


def file_signature(path: Path) -> tuple[int, int, int] | None:
    """Changes whenever the file is replaced or rewritten."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)
