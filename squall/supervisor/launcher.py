"""The launcher: starting, inspecting and stopping the workers of one node's slots.

Each slot (port) has a directory ``<local dir>/workers/<port>/`` holding the
files the worker contract names (:mod:`squall.worker.process.contract`):
``assignment.json`` (ours), ``heartbeat.json`` and ``errors.jsonl`` (the
worker's), ``pid`` (ours: pid, process start time and launch time, so that a
restarted supervisor can find and adopt the workers it left running) and, in a
secure cluster, ``secrets.json`` (ours, 0600, removed when the worker is killed;
what it holds: :func:`squall.supervisor.localizer.worker_secrets`).  The worker's
stdout and stderr go to its ``worker.log``, and the descriptor it is given with
``--events-fd`` to its ``events.log`` (the event logger's; squall.supervisor.logfiles).

Everything here is this user's only: directories 0700, files 0600, and the
worker runs with umask 077.  Its environment is an allow-list
(:func:`worker_env`), never the supervisor's whole environment.

Run as the topology's own user (:class:`~squall.supervisor.run_as.RunAs`, a root
supervisor's default; which uid: :class:`~squall.supervisor.run_as.RunAsUsers`), the worker lives in a sandbox
(squall.runtime.sandbox): its slot is shown to it, with its code (read only)
and its state directory, and nothing else of the supervisor's directory; the
slot is ``root:<its group>`` mode 1770, so the worker writes its own files there
but cannot replace the supervisor's (``pid``, ``assignment.json``,
``worker.log``: sticky), and the supervisor reads what the worker wrote without
following a link (:func:`squall.supervisor.workers.read_json`).  Its secrets.json
is the worker's own file (0600).  The sandbox has a pid namespace of its own:
the worker's whole tree goes with it, and the pid files its multilang children
leave mean nothing outside it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import structlog

from squall import config
from squall.errors import SquallError
from squall.runtime import sandbox
from squall.runtime.processes import kill_tree
from squall.security.admission import allowed_environment
from squall.supervisor import logfiles
from squall.supervisor.run_as import RunAs, RunAsUsers, hand_over
from squall.supervisor.sync import SlotState
from squall.supervisor.workers import (
    ERRORS_READ_MAX,
    UMASK,
    private_dir,
    read_json,
    read_worker_file,
    write_json,
)
from squall.worker.process.contract import ASSIGNMENT, ERRORS, HEARTBEAT, SECRETS

log = structlog.get_logger("squall.supervisor.launcher")

PID_RECORD = "pid"  # the supervisor's own file in a slot: never the worker's to write


def open_log(path: Path) -> int:
    """A worker's log file opened for appending (its descriptor), the supervisor's own (0600);
    a link found where it was is removed, not followed."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    except OSError:  # a link where the log was: not ours to follow
        path.unlink(missing_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
    os.fchmod(fd, 0o600)
    return fd


def worker_env(environ: Mapping[str, str], allow: Iterable[str], topology_environment: Any,
               squall: Mapping[str, str]) -> dict[str, str]:
    """A worker's environment: the ``allow``-listed names (supervisor.worker.env.allow)
    of ``environ``, then the topology's ``topology.environment`` (Storm's key), then
    what Squall sets itself (``squall``), which nothing overrides.

    Names that cannot be environment variables (empty, '=' or NUL in them) are dropped.
    """
    env = {name: environ[name] for name in allow if name in environ}
    if isinstance(topology_environment, Mapping):
        for name, value in topology_environment.items():
            env[str(name)] = "" if value is None else str(value)
    env.update(squall)
    return {k: v for k, v in env.items() if k and "=" not in k and "\0" not in k and "\0" not in v}


@dataclass
class Slot:
    port: int
    dir: Path

    @property
    def assignment_file(self) -> Path:
        return self.dir / ASSIGNMENT

    @property
    def secrets_file(self) -> Path:
        return self.dir / SECRETS

    def heartbeat(self) -> dict[str, Any] | None:
        return read_json(self.dir / HEARTBEAT)

    def pid_record(self) -> dict[str, Any] | None:
        return read_json(self.dir / PID_RECORD)

    def process(self) -> psutil.Process | None:
        """The slot's worker process if it is alive (and really ours)."""
        record = self.pid_record()
        if not record:
            return None
        try:
            proc = psutil.Process(record["pid"])
            # A recycled pid is not our worker: the start time must match.
            if abs(proc.create_time() - record["create_time"]) > 1.0:
                return None
            if proc.status() == psutil.STATUS_ZOMBIE:
                proc.wait(0)
                return None
        except (psutil.Error, KeyError, TypeError):
            return None
        return proc

    def rss(self) -> int | None:
        """The resident memory (bytes) of the slot's worker and every process under it (its
        multilang children, a sandbox's init); None if no worker runs."""
        proc = self.process()
        if proc is None:
            return None
        total = 0
        try:
            tree = [proc, *proc.children(recursive=True)]
        except psutil.Error:
            return None
        for p in tree:
            try:
                total += p.memory_info().rss
            except psutil.Error:
                continue  # gone between the listing and the look
        return total

    def look(self) -> SlotState:
        """What the process sync (squall.supervisor.sync) is told of this slot."""
        if self.process() is None:
            return SlotState(self.port, running=False)
        record = self.pid_record() or {}
        return SlotState(self.port, running=True, assignment=read_json(self.assignment_file),
                         beat=self.heartbeat(), launched=record.get("launched", 0),
                         launch=record.get("launch"))

    def write_assignment(self, assignment: dict[str, Any]) -> None:
        """assignment.json, readable by the worker's group when it runs as its own user."""
        write_json(self.assignment_file, assignment, group=(self.pid_record() or {}).get("gid", -1))

    def launch(self, node: str, assignment: dict[str, Any], children: dict[int, subprocess.Popen[bytes]],
               env: dict[str, str] | None = None, secrets: dict[str, Any] | None = None,
               run_as: RunAs | None = None, log_dir: Path | None = None) -> int:
        """Start the worker of ``assignment``.  ``env``: its whole environment
        (None: :func:`worker_env` with the default allow-list); ``secrets``:
        written to secrets.json first (None: no secrets file); ``run_as``: as the
        topology's own user, in a sandbox (see the module's docstring); ``log_dir``:
        where its worker.log goes (squall.supervisor.logfiles; None: the slot)."""
        self.kill_left_children(grace=0.0)  # a dead predecessor's; must go before its pid record
        self._prepare(assignment, secrets, run_as)
        if env is None:
            env = worker_env(os.environ, config.DEFAULTS["supervisor.worker.env.allow"], None,
                             {"SQUALL_NODE": node})
        # The topology's environment's Python when it has one (squall.runtime.envbuild).
        python = assignment.get("python") or sys.executable
        # Told back in every heartbeat, so that the supervisor knows this launch's beats
        # from a predecessor's without comparing two processes' wall clocks.
        launch = os.urandom(8).hex()
        log_dir = log_dir or self.dir
        # Opened here, as its stdout is: a sandboxed worker sees nothing of its log directory.
        events_fd = open_log(log_dir / logfiles.EVENTS_LOG)
        command = [python, "-m", "squall.worker", "--dir", str(self.dir), "--launch", launch,
                   "--events-fd", str(events_fd)]
        code_dir = assignment.get("code_dir") or None
        info_read = info_write = options_fd = None
        if run_as is not None:
            try:
                info_read, info_write = os.pipe()
                env_dir = [str(Path(python).parents[1])] if assignment.get("python") else []
                command, options_fd = self._sandboxed(command, run_as, env, code_dir, env_dir, info_write)
            except BaseException:
                os.close(events_fd)
                raise
            env = {"PATH": sandbox.FIXED_PATH}
            code_dir = None  # bwrap changes into it, as the worker's user
        proc = self._start(command, env, code_dir, log_dir, (info_write, options_fd, events_fd))
        children[self.port] = proc
        pid = proc.pid
        if info_read is not None:
            # The worker's own pid (the sandbox's first process), not bubblewrap's: what
            # is watched, pinned and killed is the worker, and its death ends the sandbox.
            pid = sandbox.child_pid(info_read) or proc.pid
        self._record_launch(pid, launch, run_as)
        log.info("worker launched", port=self.port, pid=pid, topology=assignment["topology_id"],
                 **({"uid": run_as.identity.uid} if run_as is not None else {}))
        return pid

    def _prepare(self, assignment: dict[str, Any], secrets: dict[str, Any] | None,
                 run_as: RunAs | None) -> None:
        """The slot's directory as the worker of ``assignment`` finds it: its assignment and
        secrets written, nothing of a predecessor's heartbeat or secrets left."""
        previous = (read_json(self.assignment_file) or {}).get("topology_id")
        if run_as is not None and previous != assignment["topology_id"]:
            shutil.rmtree(self.dir, ignore_errors=True)  # nothing of another topology's is shown to it
        private_dir(self.dir)
        uid = gid = -1
        if run_as is not None:
            uid, gid = run_as.identity.uid, run_as.identity.gid
            os.chown(self.dir, 0, gid)
            os.chmod(self.dir, 0o1770)
            private_dir(run_as.state_dir)
            hand_over(run_as.state_dir, uid, gid)
        for stale in (HEARTBEAT, SECRETS):
            (self.dir / stale).unlink(missing_ok=True)
        write_json(self.assignment_file, assignment, group=gid)
        if secrets is not None:
            write_json(self.secrets_file, secrets, owner=uid, group=-1)

    def _sandboxed(self, command: list[str], run_as: RunAs, env: dict[str, str], code_dir: str | None,
                   env_dir: list[str], info_write: int) -> tuple[list[str], int | None]:
        """``command`` run by bubblewrap as the topology's user; the options fd it reads."""
        name = run_as.identity.name
        worker = {**env, "HOME": str(self.dir), "USER": name, "LOGNAME": name}
        worker.pop("TMPDIR", None)  # /tmp is the sandbox's own
        who = sandbox.identity_files(run_as.identity, str(self.dir), str(self.dir))
        # The worker's environment is set by bubblewrap inside the sandbox; bubblewrap itself
        # starts, as root, in the daemon's fixed one, from an absolute path: nothing the
        # topology sets (PATH, a loader variable) chooses what runs as root.
        box = sandbox.Sandbox(cwd=code_dir or str(self.dir), identity=run_as.identity,
                              read=([code_dir] if code_dir else []) + env_dir,
                              write=[str(self.dir), str(run_as.state_dir), *run_as.shared],
                              network=True, strict=False, die_with_parent=False, info_fd=info_write,
                              overlay=who, env=worker)
        return sandbox.hidden_options(sandbox.command(box, command))

    def _start(self, command: list[str], env: dict[str, str], code_dir: str | None, log_dir: Path,
               fds: tuple[int | None, ...]) -> subprocess.Popen[bytes]:
        """The worker's process, its output appended to its worker.log; ``fds`` (the sandbox's
        info and options, the events.log's) passed to it, and closed here."""
        try:
            log_fd = open_log(log_dir / logfiles.WORKER_LOG)
        except BaseException:
            for fd in fds:
                if fd is not None:
                    os.close(fd)
            raise
        with os.fdopen(log_fd, "ab") as out:
            # A session of its own: the worker outlives a supervisor restart.
            try:
                return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, env=env, start_new_session=True,
                                        cwd=code_dir, umask=UMASK,
                                        pass_fds=tuple(fd for fd in fds if fd is not None))
            finally:
                for fd in fds:
                    if fd is not None:
                        os.close(fd)

    def _record_launch(self, pid: int, launch: str, run_as: RunAs | None) -> None:
        try:
            created = psutil.Process(pid).create_time()
        except psutil.Error:
            created = 0.0  # gone already: the next sync finds it not running
        record = {"pid": pid, "create_time": created, "launched": time.time(), "launch": launch}
        if run_as is not None:
            record.update(sandboxed=True, uid=run_as.identity.uid, gid=run_as.identity.gid)
        write_json(self.dir / PID_RECORD, record)

    def kill(self, reason: str, grace: float, detail: Mapping[str, Any] | None = None) -> None:
        """Ask, wait, then SIGKILL the worker and every process under it."""
        proc = self.process()
        if proc is not None and kill_tree(proc.pid, grace):
            log.info("worker killed", port=self.port, pid=proc.pid, reason=reason, **(detail or {}))
        self.kill_left_children(grace)
        self.secrets_file.unlink(missing_ok=True)

    def kill_left_children(self, grace: float) -> None:
        """Kill the multilang children a worker left behind (``<slot>/pids``).

        The worker's children die with it when it is stopped, but one that
        was SIGKILLed orphans them, and a child that neither reads its stdin
        nor exits (hung, stopped) would live on.  Only processes started
        since the worker's launch are taken for its children: a pid file
        whose pid was reused by another process is just removed.
        """
        pids_dir = self.dir / config.WORKER_PIDS
        if (self.pid_record() or {}).get("sandboxed"):
            # Its pid namespace took them with it; the numbers are the namespace's, not ours.
            shutil.rmtree(pids_dir, ignore_errors=True)
            return
        try:
            entries = list(pids_dir.iterdir())
        except OSError:
            return
        # Start times as the kernel counts them, the worker's and its children's alike: not the
        # supervisor's wall clock at the launch, which a skewed or stepped clock moves.
        worker_started = (self.pid_record() or {}).get("create_time", 0.0)
        for entry in entries:
            if entry.name.isdigit():
                pid = int(entry.name)
                try:
                    started = psutil.Process(pid).create_time()
                except psutil.Error:
                    started = None
                if started is not None and started >= worker_started - 1.0 and kill_tree(pid, grace):
                    log.warning("orphaned multilang child killed", port=self.port, pid=pid)
            entry.unlink(missing_ok=True)

    def new_errors(self, offset: int) -> tuple[list[dict[str, Any]], int]:
        path = self.dir / ERRORS
        try:
            if path.lstat().st_size < offset:
                offset = 0  # a new file since we last looked
        except OSError:
            return [], 0
        data = read_worker_file(path, offset, ERRORS_READ_MAX)
        if data is None:
            return [], 0
        if not data.endswith(b"\n"):
            cut = data.rfind(b"\n") + 1
            # A line longer than a whole read is skipped, not waited for forever.
            data = data[:cut] if cut or len(data) < ERRORS_READ_MAX else data
        errors = []
        for line in data.splitlines():
            try:
                errors.append(json.loads(line))
            except ValueError:
                continue
        return errors, offset + len(data)


class Launcher:
    """This node's slots and the workers on them: launched as their topologies' users
    (:class:`~squall.supervisor.run_as.RunAsUsers`) with an allow-listed environment and a
    core each, killed with a grace period.  The supervisor decides when (squall.supervisor.sync)."""

    def __init__(self, conf: Mapping[str, Any], node: str, local_dir: Path) -> None:
        self.conf = conf
        self.node = node
        self.local_dir = local_dir
        self.ports = [int(p) for p in conf["supervisor.slots.ports"]]
        self.slots = {port: Slot(port, local_dir / "workers" / str(port)) for port in self.ports}
        self.run_as = RunAsUsers(conf, local_dir)
        self.children: dict[int, subprocess.Popen[bytes]] = {}  # port -> the worker this process started
        self.launches = 0

    def reap(self, port: int) -> None:
        """Forget the slot's child once it exited: no zombie left behind."""
        child = self.children.get(port)
        if child is not None and child.poll() is not None:
            del self.children[port]

    def kill(self, slot: Slot, reason: str, detail: Mapping[str, Any] | None = None) -> None:
        slot.kill(reason, self.conf["supervisor.worker.shutdown.sleep.secs"], detail)

    def kill_all(self, reason: str) -> None:
        for slot in self.slots.values():
            self.kill(slot, reason)

    def note_in_worker_log(self, topology_id: str, port: int, message: str, when: float) -> None:
        """A line of the supervisor's in the worker's log (why it was killed), where its user
        reads the rest: appended, never through a link; ``when``: wall seconds."""
        path = logfiles.worker_dir(self.local_dir, topology_id, port) / logfiles.WORKER_LOG
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))
        if self.conf["supervisor.worker.log.json"]:
            line = json.dumps({"timestamp": stamp, "level": "error", "logger": "squall.supervisor",
                               "event": message})
        else:
            line = f"{stamp} [error    ] {message} [squall.supervisor]"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW)
        except OSError:
            return
        with os.fdopen(fd, "a") as f:
            f.write(line + "\n")

    def running_uids(self) -> set[int | None]:
        """The uids the live workers of this node's slots run as."""
        return {(slot.pid_record() or {}).get("uid") for slot in self.slots.values() if slot.process()}

    def running_topologies(self) -> set[str | None]:
        """The topologies the live workers of this node's slots say they run."""
        return {(s.heartbeat() or {}).get("topology_id") for s in self.slots.values() if s.process()}

    def launch(self, slot: Slot, want: dict[str, Any], secrets: dict[str, Any] | None,
               readers: dict[str, Any] | None) -> None:
        """Launch the worker of ``want`` on ``slot``, with ``secrets`` (None: no secrets.json)
        and beside its log who may read it (``readers``, squall.supervisor.logfiles)."""
        topology_id = want["topology_id"]
        try:
            run_as = self.run_as.for_topology(topology_id, want["topology"], want.get("owner"))
        except SquallError as e:
            log.error("worker not launched", port=slot.port, topology=topology_id, reason=str(e))
            return
        log_dir = private_dir(logfiles.worker_dir(self.local_dir, topology_id, slot.port))
        private_dir(log_dir.parent)
        write_json(log_dir / logfiles.READERS, readers or {"topology": topology_id})
        slot.launch(self.node, want, self.children, env=self.worker_env(want, slot.port), secrets=secrets,
                    run_as=run_as, log_dir=log_dir)
        self.launches += 1

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
