"""The supervisor daemon: one per node, running the workers nimbus assigns to it.

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
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import structlog

from squall.cluster.session import Session
from squall.cluster.state import ClusterState
from squall.cluster.watches import ChildrenWatch, DataWatch
from squall.cluster.zookeeper import cluster_credentials, connect, disconnect, is_secure, make_client
from squall.config import DEFAULTS
from squall.errors import ConfigError, SquallError
from squall.runtime import sandbox
from squall.runtime.buildbox import Builder
from squall.runtime.envbuild import EnvStore, key_of
from squall.runtime.envs import EnvCache, Requirements, from_record
from squall.runtime.package import extract
from squall.runtime.status import Status
from squall.security.admission import allowed_environment, check_id, check_user_name, cluster_only_removed
from squall.supervisor import logfiles, logrotation
from squall.supervisor.logviewer import Logviewer, start_logviewer
from squall.supervisor.sync import (
    NOT_RUNNING,
    Action,
    Kill,
    Launch,
    ProcessSync,
    SlotState,
    WriteAssignment,
    workers_of_node,
)
from squall.supervisor.workers import (
    UMASK,
    RunAs,
    Slot,
    error_record,
    private_dir,
    read_json,
    worker_env,
    worker_secrets,
    write_json,
)

log = structlog.get_logger("squall.supervisor.Supervisor")

NO_OWNER = "-"  # the state folder of topologies with no owner (an insecure cluster): never a user's name


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
    def __init__(self, conf: dict[str, Any], now: Callable[[], float] = time.time,
                 local: Callable[[], float] = time.monotonic) -> None:
        self.conf = conf
        self.now = now
        self.local = local  # what workers' ages are measured on (squall.supervisor.sync)
        self.status = Status.INIT
        self.local_dir = private_dir(Path(conf["storm.local.dir"]).resolve())
        self.node = node_id(self.local_dir)
        self.host = conf["storm.local.hostname"]
        self.ports = [int(p) for p in conf["supervisor.slots.ports"]]
        self.slots = {port: Slot(port, self.local_dir / "workers" / str(port)) for port in self.ports}
        # What squall.yaml says about workers and topologies reaches the workers.
        self.worker_defaults = {k: v for k, v in conf.items()
                                if k.startswith(("topology.", "worker.", "zmq.", "spark.", "drpc.",
                                                 # transactional state lives in the cluster's ZooKeeper
                                                 "storm.zookeeper.", "transactional."))
                                and v != DEFAULTS.get(k)}
        # Secure: ZooKeeper credentials from the keyring (a ConfigError now if there is none).
        self.secure = is_secure(conf)
        self.zk_credentials = cluster_credentials(conf)
        self.zk = make_client(conf, self.zk_credentials)
        self._secrets: dict[str, dict[str, Any]] = {}  # topology id -> its workers' secrets.json
        self._refused: dict[str, str] = {}  # topology id -> why its workers are not launched
        self._umask: int | None = None
        self.state = ClusterState(self.zk, conf["storm.zookeeper.root"])
        # Ephemeral nodes are re-created by the next heartbeat: a lost session needs no recovery.
        self.session = Session(self.zk, "supervisor", on_lost=self._on_session_lost,
                               on_connected=self._on_connected)
        self._assignments_watch: ChildrenWatch | None = None
        # Per topology run here: a change of its log levels syncs at once, not a round later.
        self._log_level_watches: dict[str, DataWatch] = {}
        self.process_sync = ProcessSync(conf["supervisor.worker.timeout.secs"],
                                        conf["supervisor.worker.start.timeout.secs"])
        self._desired: dict[int, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._children: dict[int, subprocess.Popen[bytes]] = {}
        self._error_offsets: dict[int, int] = {}
        self._stop = threading.Event()
        self._sync_now = threading.Event()
        # Until the first assignment sync, we do not know what should run: a
        # freshly restarted supervisor must not take its workers for strays.
        self._synced = threading.Event()
        self._threads: list[threading.Thread] = []
        # The node's Spark Connect server (squall.spark.node), only if asked for: a JVM.
        self.spark: Any = None
        if conf.get("supervisor.spark.connect.enabled"):
            from squall.spark.node import NodeServer

            self.spark = NodeServer(conf, self.local_dir)
        self.launches = 0
        # Topologies' environments (squall.runtime.envbuild): built in a thread each, before
        # their workers launch; removed when unused for supervisor.env.cache.grace.secs.
        # Built as user code (squall.runtime.buildbox): within the cluster's policy, in a sandbox.
        timeout = conf["supervisor.env.build.timeout.secs"]
        self.envs = EnvStore(self.local_dir / "envs", timeout, Builder(conf, "supervisor", timeout))
        self.env_cache = EnvCache(conf["supervisor.env.cache.grace.secs"])
        self._env_builds: dict[str, threading.Thread] = {}  # key -> its builder, while it runs
        # Workers as their topologies' own users (supervisor.run.worker.as.user): decided at start.
        self.run_as_users = False
        self._uids_file = self.local_dir / "uids.json"
        self._uids: dict[str, int] = {}  # topology id -> its workers' uid (and gid) on this node
        # topology id -> who may read its workers' logs (squall.supervisor.logfiles.readers_record)
        self._log_readers: dict[str, dict[str, Any]] = {}
        self.logviewer: Logviewer | None = None
        self._next_log_cleanup = 0.0

    # -- lifecycle -----------------------------------------------------------

    def start(self) -> None:
        if self.status is not Status.INIT:
            return
        # Process-wide, for the daemon's life (restored by stop() for in-process use).
        self._umask = os.umask(UMASK)
        for sub in ("workers", "code", "state", logfiles.ARTIFACTS):
            private_dir(self.local_dir / sub)
        self.logviewer = start_logviewer(self.conf, self.local_dir)
        self.run_as_users = self._decide_run_as()
        if self.spark is not None and self.run_as_users:
            # The node's Spark server runs UDFs of every topology: a user of its own, not root.
            self.spark.server.identity = self._spark_identity
            self.spark.server.shared = tuple(str(Path(d).resolve())
                                             for d in self.conf["supervisor.worker.shared.dirs"])
        self.session.start()
        connect(self.zk, self.conf, "supervisor")
        self.state.setup(fix_acls=False)  # the leader nimbus re-ACLs the tree
        if self.logviewer is not None:
            self.logviewer.follow(self.state)  # the keys of the tokens nimbus mints for it
        self._register()
        self._assignments_watch = self.state.watch_assignments(self._on_assignments_changed)
        for target, name in ((self._heartbeat_loop, "heartbeat"),
                             (self._assignments_loop, "sync-assignments"),
                             (self._processes_loop, "sync-processes")):
            thread = threading.Thread(target=target, name=f"supervisor-{name}", daemon=True)
            self._threads.append(thread)
            thread.start()
        if self.spark is not None:
            self.spark.start()  # in the background: workers do not wait for the JVM
        self.status = Status.RUNNING
        log.info("supervisor started", node=self.node, host=self.host, ports=self.ports,
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
        for watch in self._log_level_watches.values():
            watch.stop()
        for thread in self._threads:
            thread.join(10)
        if kill_workers:
            for slot in self.slots.values():
                slot.kill(reason, self.conf["supervisor.worker.shutdown.sleep.secs"])
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

    def _decide_run_as(self) -> bool:
        """Whether workers run as their topologies' own users; a ConfigError if
        asked for and impossible, a warning saying what follows if merely impossible."""
        wanted = self.conf["supervisor.run.worker.as.user"]
        if wanted is False:
            log.warning("workers run as the supervisor's own user (supervisor.run.worker.as.user is "
                        "false): a topology's code can read what this supervisor can")
            return False
        for shared in self.conf["supervisor.worker.shared.dirs"]:
            if self.local_dir.is_relative_to(Path(shared).resolve()):
                msg = (f"supervisor.worker.shared.dirs names {shared}, which holds storm.local.dir "
                       f"({self.local_dir}): workers would see every slot and every topology's code")
                raise ConfigError(msg)
        first, _last = self.conf["supervisor.worker.uids"]
        why = sandbox.unavailable(sandbox.Identity(first, first))
        if why is None:
            saved = read_json(self._uids_file)
            if isinstance(saved, dict):
                self._uids = {str(k): int(v) for k, v in saved.items() if isinstance(v, int)}
            return True
        if wanted is True:
            msg = f"supervisor.run.worker.as.user is true, but workers cannot run as other users here: {why}"
            raise ConfigError(msg)
        log.warning("workers run as the supervisor's own user: a topology's code can read what this "
                    "supervisor can (docs/security.md)", why=why)
        return False

    @property
    def _spark_identity(self) -> sandbox.Identity:
        last = self.conf["supervisor.worker.uids"][1]  # never a topology's (see _run_as)
        return sandbox.Identity(last, last)

    def _run_as(self, topology_id: str, definition: Mapping[str, Any], owner: Any) -> RunAs | None:
        """``definition``: the topology's, whose name its checkpointed state is kept
        under (squall.state.providers.state_key), so its state directory is that name's,
        in its owner's folder: another team's topology of the same name never sees it."""
        if not self.run_as_users:
            return None
        name = check_id("the topology definition's name", definition.get("name"))
        folder = NO_OWNER if owner is None else check_user_name("the topology's owner", owner)
        uid = self._uids.get(topology_id)
        if uid is None:
            first, last = self.conf["supervisor.worker.uids"]
            uid = sandbox.pick_uid(self._uids.values(), first, last - 1)
            if uid is None:
                msg = f"no free uid left in supervisor.worker.uids {[first, last]} for the topology's workers"
                raise SquallError(msg)
            self._uids[topology_id] = uid
            write_json(self._uids_file, self._uids)
        return RunAs(sandbox.Identity(uid, uid), self.local_dir / "state" / folder / name,
                     tuple(str(Path(d).resolve()) for d in self.conf["supervisor.worker.shared.dirs"]))

    def _share_code(self, code_dir: Path, gid: int) -> None:
        """The topology's code readable (not writable) by its workers' group."""
        if code_dir.stat().st_gid == gid:
            return
        for path in (code_dir, *code_dir.rglob("*")):
            os.chown(path, 0, gid, follow_symlinks=False)
            if not path.is_symlink():
                os.chmod(path, 0o750 if path.is_dir() else 0o640)

    # -- ZooKeeper -----------------------------------------------------------

    def _register(self) -> None:
        info = {"node": self.node, "host": self.host, "ports": self.ports, "time": self.now()}
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

    def heartbeat(self) -> None:
        self._register()
        beats = {}
        for port, slot in self.slots.items():
            beat = slot.heartbeat()
            if beat and self.run_as_users and beat.get("topology_id") != (self._desired.get(port) or {}).get(
                    "topology_id"):
                beat = None  # written by user code: it speaks for its own topology only
            if beat and slot.process() is not None:
                beats[str(port)] = {k: beat.get(k)
                                    for k in ("topology_id", "time", "executors", "stats", "metrics",
                                              "executor_stats", "system", "transfer", "pid")}
                record = slot.pid_record() or {}
                if record.get("sandboxed"):  # its own pid is its namespace's (1): the node's is ours
                    beats[str(port)]["pid"] = record.get("pid")
            errors, offset = slot.new_errors(self._error_offsets.get(port, 0))
            self._error_offsets[port] = offset
            running = (self._desired.get(port) or {}).get("topology_id")
            for error in errors:
                # The slot's topology, not the one the line names: user code writes there too.
                topology_id = running or (error.get("topology_id") if isinstance(error, dict) else None)
                record = error_record(error, topology_id, self.node, port) if topology_id else None
                if record is not None:
                    self.state.add_error(topology_id, record)
        self.state.put_worker_beats(self.node, beats)

    def sync_assignments(self) -> None:
        desired: dict[int, dict[str, Any]] = {}
        records: dict[str, dict[str, Any]] = {}
        env_users: dict[str, set[str]] = {}  # environment key -> topologies here that run in it
        pending: set[str] = set()  # topologies whose environment is being built
        for topology_id, assignment in self.state.assignments().items():
            if not any(w["node"] == self.node for w in assignment["workers"]):
                continue  # before any I/O: most topologies run nothing here
            record = records.get(topology_id) or self.state.topology(topology_id)
            if record is None:
                continue
            records[topology_id] = record
            try:
                # Again: they name directories here (a record nimbus wrote long ago, or by hand).
                check_id("topology id", topology_id)
                check_id("topology name", record.get("name"))
                if self.secure and topology_id not in self._secrets:
                    self._secrets[topology_id] = worker_secrets(
                        topology_id, self.state.topology_secrets(topology_id), self.zk_credentials or [])
                code_dir = self._ensure_code(topology_id)
                run_as = self._run_as(topology_id, record["definition"], record.get("owner"))
                if run_as is not None:
                    self._share_code(code_dir, run_as.identity.gid)
                requirements = from_record(record.get("requirements"))
            except SquallError as e:
                self._refuse(topology_id, record, str(e))
                continue
            python = None
            if requirements is not None:
                key = key_of(requirements)
                env_users.setdefault(key, set()).add(topology_id)
                if not self.envs.ready(key):
                    pending.add(topology_id)  # launched once its environment is built
                    self._build_env(key, requirements, topology_id, record)
                    continue
                python = str(self.envs.path(key) / "bin" / "python")
            self._refused.pop(topology_id, None)
            self._log_readers[topology_id] = logfiles.readers_record(
                topology_id, record.get("name", topology_id), record.get("owner"), record["conf"])
            # Storm's worker conf: the cluster's settings, then the topology's own -- less any
            # key only the cluster may set (admission refused them at submit; an older record
            # may hold one).
            worker_conf = {**self.worker_defaults, **cluster_only_removed(record["conf"])}
            if self.spark is not None:
                worker_conf.update(self.spark.worker_conf())
            worker_conf["squall.secure"] = self.secure  # the cluster's, never a topology's
            if run_as is not None and not worker_conf.get("squall.state.dir"):
                worker_conf["squall.state.dir"] = str(run_as.state_dir)  # the one its sandbox may write
            workers = workers_of_node(self.node, self.host, topology_id, assignment, record,
                                      worker_conf, str(code_dir), self.state.log_levels(topology_id))
            if python is not None:
                for want in workers.values():
                    want["python"] = python  # squall.supervisor.workers.Slot.launch runs it
            desired.update(workers)
        with self._lock:
            self._desired = desired
        self._synced.set()
        wanted = {d["topology_id"] for d in desired.values()}
        for gone in set(self._secrets) - wanted:
            del self._secrets[gone]
        if set(self._uids) - wanted - set(records):
            # A uid is free again only once no process of it is left (its worker may be
            # stopping): the next topology given it must not reach the last one's.
            running = {(slot.pid_record() or {}).get("uid") for slot in self.slots.values() if slot.process()}
            self._uids = {t: uid for t, uid in self._uids.items()
                          if t in wanted or t in records or uid in running}
            write_json(self._uids_file, self._uids)
        for gone in set(self._refused) - set(records):
            del self._refused[gone]
        for gone in set(self._log_readers) - wanted:
            del self._log_readers[gone]
        self._remove_stale_code(wanted | pending)
        self._watch_log_levels(wanted)
        self._sweep_envs(env_users)

    def _build_env(self, key: str, requirements: Requirements, topology_id: str,
                   record: dict[str, Any]) -> None:
        """Build an environment in a thread of its own (other topologies' workers are not held
        up), unless one is at it or a failed build's backoff runs; the next sync launches the
        workers.  A failure is the topology's error, as a worker that cannot launch."""
        if key in self._env_builds or not self.env_cache.may_build(key, self.now()):
            return

        def build() -> None:
            try:
                env = self.envs.ensure(requirements)
                self.env_cache.built(key)
                log.info("topology environment ready", topology=topology_id, key=key, built=env.built,
                         secs=round(env.secs, 2))
            except Exception as e:  # noqa: BLE001 - pip's failure or the disk's: told, retried later
                wait = self.env_cache.build_failed(key, self.now())
                log.error("topology environment failed", topology=topology_id, key=key, retry_secs=wait)
                try:
                    self._refuse(topology_id, record, f"its environment could not be built (retried with "
                                                      f"backoff): {e}")
                except Exception:  # noqa: BLE001 - ZooKeeper away: logged above
                    log.warning("cannot report the environment's failure", topology=topology_id)
            finally:
                self._env_builds.pop(key, None)
                self._sync_now.set()

        thread = threading.Thread(target=build, name=f"supervisor-env-{key[:12]}", daemon=True)
        self._env_builds[key] = thread
        thread.start()

    def _sweep_envs(self, env_users: dict[str, set[str]]) -> None:
        in_use = {key: set(users) for key, users in env_users.items()}
        for key in list(self._env_builds):
            in_use.setdefault(key, set()).add("(building)")
        for key in self.env_cache.sweep(self.envs.present(), in_use, self.now()):
            self.envs.remove(key)

    def _watch_log_levels(self, topology_ids: set[str]) -> None:
        for gone in set(self._log_level_watches) - topology_ids:
            self._log_level_watches.pop(gone).stop()
        for topology_id in topology_ids - set(self._log_level_watches):
            watch = self.state.watch_log_levels(topology_id, self._sync_now.set)
            self._log_level_watches[topology_id] = watch

    def _refuse(self, topology_id: str, record: dict[str, Any], reason: str) -> None:
        """Not launching this topology's workers: said once (log and topology errors) per reason."""
        if self._refused.get(topology_id) == reason:
            return
        self._refused[topology_id] = reason
        log.error("topology refused: its workers are not launched", topology=topology_id, reason=reason)
        self.state.add_error(topology_id, {
            "topology": record.get("name", topology_id), "topology_id": topology_id,
            "component": "__supervisor", "task": None, "error": f"SquallError: {reason}", "trace": "",
            "fatal": True, "worker": self.host, "time": self.now(), "node": self.node})

    def _ensure_code(self, topology_id: str) -> Path:
        code_dir = self.local_dir / "code" / topology_id
        if (code_dir / ".complete").exists():
            return code_dir
        blob = self.state.code(topology_id) or b""
        shutil.rmtree(code_dir, ignore_errors=True)
        if blob:
            try:
                extract(blob, code_dir, max_bytes=self.conf["nimbus.code.max.uncompressed.bytes"],
                        max_entries=self.conf["nimbus.code.max.entries"])
            except SquallError:
                shutil.rmtree(code_dir, ignore_errors=True)
                raise
        private_dir(code_dir)
        (code_dir / ".complete").write_text("")
        log.info("code downloaded", topology=topology_id, bytes=len(blob))
        return code_dir

    def _remove_stale_code(self, keep: set[str]) -> None:
        base = self.local_dir / "code"
        if not base.is_dir():
            return
        running = {(s.heartbeat() or {}).get("topology_id") for s in self.slots.values() if s.process()}
        for path in base.iterdir():
            if path.name not in keep and path.name not in running:
                shutil.rmtree(path, ignore_errors=True)

    def sync_processes(self) -> None:
        if not self._synced.is_set():
            return
        with self._lock:
            desired = dict(self._desired)
        # Slot by slot, each looked at just before it is acted on (killing one takes a while).
        for port, slot in self.slots.items():
            child = self._children.get(port)
            if child is not None and child.poll() is not None:
                del self._children[port]  # reaped: no zombie left behind
            for action in self.process_sync.slot(desired.get(port), self._look_at(slot), self.now(),
                                                 self.local()):
                self._execute(slot, action)
        self.keep_logs(desired)

    def keep_logs(self, desired: Mapping[int, Mapping[str, Any]]) -> None:
        """Rotate the logs of the workers this node should run that are due; now and then,
        remove stopped ones'.  From what the slots should run, which the loop above just
        acted on: no process or file of a slot looked at a second time."""
        live = [(want["topology_id"], port) for port, want in desired.items()]
        for topology_id, port in live:
            logrotation.rotate_if_due(logfiles.worker_dir(self.local_dir, topology_id, port),
                                      self.conf["supervisor.worker.log.max.bytes"],
                                      int(self.conf["logviewer.max.per.worker.logs.size.mb"] * 2**20))
        now = self.now()
        if now >= self._next_log_cleanup:
            self._next_log_cleanup = now + self.conf["logviewer.cleanup.interval.secs"]
            logrotation.clean_up(self.local_dir, live, now, self.conf["logviewer.cleanup.age.mins"] * 60,
                                 int(self.conf["logviewer.max.sum.worker.logs.size.mb"] * 2**20))

    @staticmethod
    def _look_at(slot: Slot) -> SlotState:
        if slot.process() is None:
            return SlotState(slot.port, running=False)
        record = slot.pid_record() or {}
        return SlotState(slot.port, running=True, assignment=read_json(slot.assignment_file),
                         beat=slot.heartbeat(), launched=record.get("launched", 0),
                         launch=record.get("launch"))

    def _execute(self, slot: Slot, action: Action) -> None:
        if isinstance(action, Kill):
            slot.kill(action.reason, self.conf["supervisor.worker.shutdown.sleep.secs"], action.detail)
        elif isinstance(action, WriteAssignment):
            slot.write_assignment(action.want)
        elif isinstance(action, Launch):
            if action.reason == NOT_RUNNING:
                log.info("worker not running: launching", port=slot.port, topology=action.want["topology_id"])
            self._launch(slot, action.want)

    def worker_env(self, want: dict[str, Any], port: int | None = None) -> dict[str, str]:
        squall = {"SQUALL_NODE": self.node}
        if self.conf["supervisor.worker.log.json"]:
            squall["SQUALL_LOG_JSON"] = "1"
        cpu = None if port is None else self.worker_cpu(port)
        if cpu is not None:
            squall["SQUALL_WORKER_CPU"] = str(cpu)
        environment, dropped = allowed_environment(want["conf"].get("topology.environment"))
        if dropped:
            log.warning("topology.environment names refused: not passed to the worker", port=port,
                        topology=want["topology_id"], names=sorted(dropped))
        return worker_env(os.environ, self.conf["supervisor.worker.env.allow"], environment, squall)

    def worker_cpu(self, port: int) -> int | None:
        """The core the worker of ``port`` pins itself to (supervisor.worker.cpu.affinity), if any."""
        if not self.conf["supervisor.worker.cpu.affinity"]:
            return None
        cores = self.conf["supervisor.cpu.cores"]
        if cores is None:
            cores = sorted(os.sched_getaffinity(0))
            if len(cores) < 2:
                return None  # one core: nothing to choose between
        if not cores:
            return None
        ports = sorted(self.conf["supervisor.slots.ports"])
        return int(cores[ports.index(port) % len(cores)]) if port in ports else None

    def _still_assigned(self, slot: Slot, want: dict[str, Any]) -> bool:
        """Is ``want`` still this slot's assignment in ZooKeeper?  What this
        supervisor synced may be seconds old: nimbus may have moved the slot's
        executors elsewhere meanwhile, and a worker launched from the old
        assignment would run beside its replacement (a second coordinator of a
        transactional topology, for one).  One read before each launch."""
        try:
            current = self.state.assignment(want["topology_id"])
        except Exception as e:  # noqa: BLE001 - ZooKeeper unreachable: what was synced stands
            log.warning("cannot confirm the assignment before a launch", port=slot.port, error=str(e))
            return True
        mine = [w for w in (current or {}).get("workers", [])
                if w["node"] == self.node and w["port"] == slot.port]
        if mine and mine[0]["executors"] == want["executors"]:
            return True
        log.info("slot reassigned since the last sync: worker not launched", port=slot.port,
                 topology=want["topology_id"])
        self._sync_now.set()
        return False

    def _launch(self, slot: Slot, want: dict[str, Any]) -> None:
        if not self._still_assigned(slot, want):
            return
        secrets = self._secrets.get(want["topology_id"])
        if self.secure and secrets is None:  # not synced since: the next sync says why
            log.error("no secrets for the topology: worker not launched", port=slot.port,
                      topology=want["topology_id"])
            return
        try:
            run_as = self._run_as(want["topology_id"], want["topology"], want.get("owner"))
        except SquallError as e:
            log.error("worker not launched", port=slot.port, topology=want["topology_id"], reason=str(e))
            return
        log_dir = private_dir(logfiles.worker_dir(self.local_dir, want["topology_id"], slot.port))
        private_dir(log_dir.parent)
        readers = self._log_readers.get(want["topology_id"]) or {"topology": want["topology_id"]}
        write_json(log_dir / logfiles.READERS, readers)
        slot.launch(self.node, want, self._children, env=self.worker_env(want, slot.port), secrets=secrets,
                    run_as=run_as, log_dir=log_dir)
        self.launches += 1

