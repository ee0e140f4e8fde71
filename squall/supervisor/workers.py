"""One node's worker slots on disk: launching, inspecting and killing workers.

Each slot (port) has a directory ``<local dir>/workers/<port>/`` holding the
files the worker contract defines (see ``squall.worker.contract``):
``assignment.json`` (ours), ``heartbeat.json`` and ``errors.jsonl`` (the
worker's), ``worker.log`` (its stdout and stderr), ``pid`` (ours: pid, process start
time and launch time, so that a restarted supervisor can find and adopt the
workers it left running) and, in a secure cluster, ``secrets.json`` (ours,
0600, removed when the worker is killed)::

    {"curve": {"public": b64, "secret": b64},          # the topology's CURVE keypair
     "zookeeper": {"user": u, "passwords": [p, ...]},  # digest credentials, current first
     "drpc": {"token": t, "ca": PEM}}                  # its DRPC credential, when it has one

Everything here is this user's only: directories 0700, files 0600, and the
worker runs with umask 077.  Its environment is an allow-list
(:func:`worker_env`), never the supervisor's whole environment.

Run as the topology's own user (:class:`RunAs`, a root supervisor's default),
the worker lives in a sandbox (squall.runtime.sandbox): its slot is shown to
it, with its code (read only) and its state directory, and nothing else of the
supervisor's directory; the slot is ``root:<its group>`` mode 1770, so the
worker writes its own files there but cannot replace the supervisor's
(``pid``, ``assignment.json``, ``worker.log``: sticky), and the supervisor
reads what the worker wrote without following a link (:func:`read_json`).
Its secrets.json is the worker's own file (0600).  The sandbox has a pid
namespace of its own: the worker's whole tree goes with it, and the pid files
its multilang children leave mean nothing outside it.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
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
from squall.cluster.zookeeper import digest_id
from squall.errors import SquallError
from squall.runtime import sandbox
from squall.runtime.files import write_private
from squall.runtime.processes import kill_tree

log = structlog.get_logger("squall.supervisor.workers")


UMASK = 0o077  # the supervisor's and its workers': files 0600, directories 0700
SECRETS = "secrets.json"
ERRORS_READ_MAX = 1 << 20  # of a worker's errors.jsonl per heartbeat
# What of a worker's error record goes on to ZooKeeper (the worker writes it: user code
# may, too), each string cut to its limit.
ERROR_FIELDS = {"topology": 200, "component": 200, "error": 2000, "trace": 20000, "worker": 200}


def error_record(raw: Any, topology_id: str, node: str, port: int) -> dict[str, Any] | None:
    """A worker's error as the cluster keeps it: its known fields only, strings cut,
    and the topology the slot runs (not whichever one the line names)."""
    if not isinstance(raw, Mapping):
        return None
    out: dict[str, Any] = {k: str(raw[k])[:limit] for k, limit in ERROR_FIELDS.items() if k in raw}
    task, when = raw.get("task"), raw.get("time")
    out["task"] = task if isinstance(task, int) and not isinstance(task, bool) else None
    out["time"] = float(when) if isinstance(when, (int, float)) and not isinstance(when, bool) else None
    out["fatal"] = raw.get("fatal") is True
    return {**out, "topology_id": topology_id, "node": node, "port": port}


@dataclass(frozen=True)
class RunAs:
    """A worker run as its topology's own user, in a sandbox: what it may write
    (its state directory) besides its slot, and read besides its code."""

    identity: sandbox.Identity
    state_dir: Path
    shared: tuple[str, ...] = ()  # supervisor.worker.shared.dirs


def write_json(path: Path, obj: Any, owner: int = -1, group: int = -1) -> None:
    """Atomically, and readable by this user only (0600 from the first byte,
    whatever a leftover temporary file had): an assignment may carry the
    Spark Connect token, secrets.json the topology's keys.  ``group``: also
    readable by that group (0640); ``owner``: the file is that user's (0600)."""
    write_private(path, json.dumps(obj), mode=0o640 if group != -1 else 0o600, owner=owner, group=group)


def private_dir(path: Path) -> Path:
    """``path`` (and missing parents) as a directory of this user's only."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)
    return path


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


def worker_secrets(topology_id: str, topology_secrets: Any,
                   credentials: list[tuple[str, str]]) -> dict[str, Any]:
    """The content of a worker's secrets.json, or a SquallError saying why the
    topology's workers may not run (no CURVE keypair in ZooKeeper).  ZooKeeper:
    the topology's own identity, and the digest ids of the cluster's
    credentials (not their passwords), so that the nodes it makes stay the
    cluster's too; a topology submitted before identities existed gets the
    cluster's credentials."""
    curve = topology_secrets.get("curve") if isinstance(topology_secrets, Mapping) else None
    if not isinstance(curve, Mapping) or not curve.get("public") or not curve.get("secret"):
        msg = (f"topology {topology_id} has no CURVE keypair in ZooKeeper (secrets/{topology_id}): "
               "a secure supervisor does not launch its workers; resubmit it to a secure nimbus")
        raise SquallError(msg)
    if not credentials:
        msg = "a secure supervisor needs the cluster's ZooKeeper credentials for its workers"
        raise SquallError(msg)
    own = topology_secrets.get("zookeeper")
    if isinstance(own, Mapping) and isinstance(own.get("user"), str) and isinstance(own.get("password"), str):
        zookeeper = {"user": own["user"], "passwords": [own["password"]],
                     "acl": [digest_id(u, p) for u, p in credentials]}
    else:
        user = credentials[0][0]
        zookeeper = {"user": user, "passwords": [p for u, p in credentials if u == user]}
    out = {"curve": {"public": curve["public"], "secret": curve["secret"]}, "zookeeper": zookeeper}
    drpc = topology_secrets.get("drpc")
    if isinstance(drpc, Mapping) and isinstance(drpc.get("token"), str):
        # What its DRPC spouts and ReturnResults show a DRPC server (squall.drpc), and the CA
        # that server's certificate is signed by.
        out["drpc"] = {"token": drpc["token"], "ca": drpc.get("ca")}
    return out


def hand_over(top: Path, uid: int, gid: int) -> None:
    """Make ``top`` and everything below it ``uid``'s (a topology's state, kept across its
    submissions, which may get another uid).  Walked by directory descriptors, never
    through a link, and never a file with a second name: a worker of the same state,
    running meanwhile, cannot swap a folder for a link and lead root to chown a file
    elsewhere (``os.fwalk`` opens each folder it enters without following links)."""
    os.chown(top, uid, gid, follow_symlinks=False)
    for _folder, dirs, files, dir_fd in os.fwalk(top, follow_symlinks=False):
        for entry in (*dirs, *files):
            try:
                st = os.stat(entry, dir_fd=dir_fd, follow_symlinks=False)
                if stat.S_ISLNK(st.st_mode) or (not stat.S_ISDIR(st.st_mode) and st.st_nlink > 1):
                    continue
                if (st.st_uid, st.st_gid) != (uid, gid):
                    os.chown(entry, uid, gid, dir_fd=dir_fd, follow_symlinks=False)
            except OSError:
                continue


def read_json(path: Path) -> Any:
    """A JSON file a worker may have written: never through a link (a worker run
    as another user could point one at the supervisor's keyring), only a plain file."""
    data = read_worker_file(path)
    try:
        return None if data is None else json.loads(data)
    except ValueError:
        return None


def open_plain_file(path: Path) -> int | None:
    """A read descriptor of the plain file with one name at ``path``, not reached through a
    symbolic link; None if there is no such file (a link, a second name, not there).  What a
    worker (user code) can write is opened so, not to be led to another file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        os.close(fd)
        return None
    return fd


def read_worker_file(path: Path, offset: int = 0, limit: int = -1) -> bytes | None:
    """The bytes from ``offset`` (at most ``limit``) of a plain file with one name, not
    through a symbolic link; None if it is not such a file (or not there)."""
    fd = open_plain_file(path)
    if fd is None:
        return None
    with os.fdopen(fd, "rb") as f:
        if offset:
            f.seek(offset)
        return f.read(limit)


@dataclass
class Slot:
    port: int
    dir: Path

    @property
    def assignment_file(self) -> Path:
        return self.dir / "assignment.json"

    @property
    def secrets_file(self) -> Path:
        return self.dir / SECRETS

    def heartbeat(self) -> dict[str, Any] | None:
        return read_json(self.dir / "heartbeat.json")

    def pid_record(self) -> dict[str, Any] | None:
        return read_json(self.dir / "pid")

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
        for stale in ("heartbeat.json", SECRETS):
            (self.dir / stale).unlink(missing_ok=True)
        write_json(self.assignment_file, assignment, group=gid)
        if secrets is not None:
            write_json(self.secrets_file, secrets, owner=uid, group=-1)
        if env is None:
            env = worker_env(os.environ, config.DEFAULTS["supervisor.worker.env.allow"], None,
                             {"SQUALL_NODE": node})
        # The topology's environment's Python when it has one (squall.runtime.envbuild).
        python = assignment.get("python") or sys.executable
        # Told back in every heartbeat, so that the supervisor knows this launch's beats
        # from a predecessor's without comparing two processes' wall clocks.
        launch = os.urandom(8).hex()
        command = [python, "-m", "squall.worker", "--dir", str(self.dir), "--launch", launch]
        code_dir = assignment.get("code_dir") or None
        env_dir = [str(Path(python).parents[1])] if assignment.get("python") else []
        info_read = info_write = options_fd = None
        if run_as is not None:
            info_read, info_write = os.pipe()
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
            command, options_fd = sandbox.hidden_options(sandbox.command(box, command))
            env = {"PATH": sandbox.FIXED_PATH}
            code_dir = None  # bwrap changes into it, as the worker's user
        log_path = (log_dir or self.dir) / "worker.log"
        try:
            log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
        except OSError:  # a link where the log was: not ours to follow
            log_path.unlink(missing_ok=True)
            log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.fchmod(log_fd, 0o600)
        with os.fdopen(log_fd, "ab") as out:
            # A session of its own: the worker outlives a supervisor restart.
            try:
                proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, env=env, start_new_session=True,
                                        cwd=code_dir, umask=UMASK,
                                        pass_fds=tuple(fd for fd in (info_write, options_fd)
                                                       if fd is not None))
            finally:
                for fd in (info_write, options_fd):
                    if fd is not None:
                        os.close(fd)
        children[self.port] = proc
        pid = proc.pid
        if info_read is not None:
            # The worker's own pid (the sandbox's first process), not bubblewrap's: what
            # is watched, pinned and killed is the worker, and its death ends the sandbox.
            pid = sandbox.child_pid(info_read) or proc.pid
        try:
            created = psutil.Process(pid).create_time()
        except psutil.Error:
            created = 0.0  # gone already: the next sync finds it not running
        record = {"pid": pid, "create_time": created, "launched": time.time(), "launch": launch}
        if run_as is not None:
            record.update(sandboxed=True, uid=uid, gid=gid)
        write_json(self.dir / "pid", record)
        log.info("worker launched", port=self.port, pid=pid, topology=assignment["topology_id"],
                 **({"uid": uid} if run_as is not None else {}))
        return pid

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
        path = self.dir / "errors.jsonl"
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
