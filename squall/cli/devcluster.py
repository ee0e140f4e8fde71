"""A whole cluster on this machine: ZooKeeper, nimbus(es), supervisors, a DRPC server.

For trying Squall out (``squall dev-cluster``) and for tests: every daemon
is a real process with its own config file and log under one directory,
on free ports, and the handles here can kill or restart any of them.
Every daemon is told its node's address (``storm.local.hostname``, and
``nimbus.host`` for nimbus): 127.0.0.1 here, while a subclass may put each
daemon on a node of its own (:meth:`DevCluster.host_of`) and start it there
(:meth:`DevCluster.launch_prefix`), as the partition tests' network
namespaces do.

Stopping kills only processes the dev cluster knows by pid, never by a
pattern.  It records every process it starts in ``<dir>/pids.json`` (pid
and start time, so a recycled pid is never taken for one of ours); the
supervisors record their workers (``supervisor-N/workers/<port>/pid``),
the workers their multilang children (``.../<port>/pids/``) and a
supervisor its Spark Connect server (``supervisor-N/spark-connect/server.json``).
:meth:`DevCluster.stop` stops them in order: the supervisors (SIGTERM:
by design a supervisor leaves its workers running), then their workers
and what those started, then the Spark Connect servers, the DRPC server,
the nimbuses and ZooKeeper; what does not exit within a grace period is SIGKILLed.  It is
idempotent.

Everything under the root is its user's only, from the first byte: the
configs name the keyring, the logs and ZooKeeper's snapshots hold what the
cluster does.  Files are opened 0600 and directories made 0700 (an earlier
run's loosened, the root's too), and every daemon starts with umask 077.

Every daemon runs in a session of its own, so a ^C or a hangup of the
terminal reaches only ``squall dev-cluster``, which then stops the rest in
that order (see ``cmd_dev_cluster``).  If the process owning the cluster
dies abruptly (SIGKILL), a reaper cleans up: a small child process in a
session of its own (``python -m squall.cli.devcluster reap``) that blocks
reading a pipe whose only writer is the owner.  End of file (or the
owner's pid gone) means the owner is dead, and the reaper runs the same
ordered stop from the files above, then exits.  An orderly stop closes
the pipe last, and the reaper, finding nothing left, exits too.  (Not
``PR_SET_PDEATHSIG`` in the daemons: it fires when the forking *thread*
exits, and it could not reach the workers, which by design outlive a
supervisor's SIGTERM.)
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import yaml

from squall.cli.client import credentials, http_client
from squall.cluster.zookeeper import DevZookeeper, disconnect, seal_root, start_client
from squall.config import DEFAULTS
from squall.runtime.ports import free_port
from squall.security.files import write_private
from squall.security.keyring import Keyring
from squall.supervisor.launcher import Slot
from squall.supervisor.workers import UMASK, private_dir, write_json

# Timers short enough that failures are noticed in seconds, not minutes.
DEV_CONF: dict[str, Any] = {
    "storm.zookeeper.session.timeout": 6000,
    "nimbus.monitor.freq.secs": 1,
    "nimbus.task.timeout.secs": 10,
    "nimbus.task.launch.secs": 30,
    "supervisor.heartbeat.frequency.secs": 1,
    "supervisor.monitor.frequency.secs": 0.5,
    "supervisor.assignments.sync.secs": 1,
    "supervisor.worker.timeout.secs": 10,
    "supervisor.worker.start.timeout.secs": 30,
    "supervisor.worker.shutdown.sleep.secs": 1,
}

PIDS_FILE = "pids.json"
KEYRING_FILE = "keyring.json"
SUPERVISOR_KEYRING_FILE = "supervisor-keyring.json"
DRPC_KEYRING_FILE = "drpc-keyring.json"
GRACE_SECS = 10.0  # a stopping daemon's time to exit before SIGKILL


class NimbusRequestError(OSError):
    """A request to the dev cluster's nimbus failed: no answer (``status`` None), or a refusal."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class _RecordedZookeeper(DevZookeeper):
    """The dev ZooKeeper, its JVM recorded as soon as it is launched (not
    once it answers: the owner may die while it starts), and started behind
    ``prefix`` (a command that execs the rest, so the pid stays the JVM's)."""

    def __init__(self, *args: Any, record: Any, prefix: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._record = record
        self._prefix = prefix

    def command(self) -> list[str]:
        return [*self._prefix, *super().command()]

    def wait_ready(self, timeout: float) -> None:
        if self.process is not None:
            self._record("zookeeper", self.process.pid)
        super().wait_ready(timeout)


class DevCluster:
    def __init__(self, root: Path, supervisors: int = 2, slots: int = 2,
                 conf: dict[str, Any] | None = None, nimbuses: int = 1, secure: bool = True,
                 drpc: bool = True) -> None:
        self.root = Path(root).resolve()
        # Secure like production (TLS, tokens, CURVE, ZooKeeper ACLs) with a keyring
        # of its own in the root, made on first start; --insecure turns it all off.
        self.secure = secure
        self.n_supervisors = supervisors
        self.n_slots = slots
        self.n_nimbus = nimbuses
        self.with_drpc = drpc
        self.extra = dict(conf or {})
        self.zk: DevZookeeper | None = None
        self._ports: set[int] = set()  # every port handed out, see new_port
        self.nimbus_ports = [self.new_port() for _ in range(nimbuses)]
        self.drpc_port = self.new_port()
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.conf: dict[str, Any] = {}
        # Set (e.g. by a signal handler) to cut start() short: it returns at the next step.
        self.stopping = threading.Event()
        self._records_lock = threading.Lock()
        self._reaper: subprocess.Popen[bytes] | None = None
        self._reaper_pipe: int | None = None  # the write end; closing it tells the reaper we are gone

    @property
    def config_file(self) -> Path:
        return self.root / "squall.yaml"

    @property
    def pids_file(self) -> Path:
        return self.root / PIDS_FILE

    @property
    def keyring_file(self) -> Path:
        return self.root / KEYRING_FILE

    @property
    def scheme(self) -> str:
        return "https" if self.secure else "http"

    # -- where each daemon runs: one loopback node here -----------------------

    def host_of(self, key: str) -> str:
        """The address of the node daemon ``key`` (``zookeeper``, ``nimbus-0``, ``drpc``,
        ``supervisor-1``...) runs on: it listens there and advertises it."""
        return "127.0.0.1"

    def launch_prefix(self, key: str) -> list[str]:
        """What daemon ``key``'s command runs behind (it must exec the rest: the pid
        recorded is the daemon's); none here."""
        return []

    def launch_env(self, key: str) -> dict[str, str] | None:
        """Daemon ``key``'s environment (None: this process's)."""
        return None

    def daemon_keys(self) -> list[str]:
        return ["zookeeper", *(f"nimbus-{i}" for i in range(self.n_nimbus)),
                *(["drpc"] if self.with_drpc else []),
                *(f"supervisor-{i}" for i in range(self.n_supervisors))]

    def hosts(self) -> list[str]:
        """Every node's address, once: the names the cluster's certificates are for."""
        return list(dict.fromkeys(self.host_of(key) for key in self.daemon_keys()))

    @property
    def nimbus_url(self) -> str:
        return self.nimbus_urls()[0]

    def nimbus_urls(self) -> list[str]:
        return [f"{self.scheme}://{self.host_of(f'nimbus-{i}')}:{p}" for i, p in enumerate(self.nimbus_ports)]

    @property
    def supervisor_keyring_file(self) -> Path:
        return self.root / SUPERVISOR_KEYRING_FILE

    @property
    def drpc_keyring_file(self) -> Path:
        return self.root / DRPC_KEYRING_FILE

    def ensure_keyring(self) -> None:
        """The cluster's keyring (nimbus's and the admin's), and the supervisors' and the DRPC
        server's own (no user's token: workers run user code, and the DRPC server needs none).
        A user added later needs no new copy: the DRPC server follows the users the leading
        nimbus publishes, and the logviewers take the tokens nimbus mints."""
        if self.secure and not self.keyring_file.exists():
            keyring, _token = Keyring.create(hosts=self.hosts(), cluster=f"dev-{self.root.name}")
            keyring.save(self.keyring_file)
        if self.secure:
            keyring = Keyring.load(self.keyring_file)
            # Each daemon's certificate names its own nodes only, never nimbus's (on one machine
            # they share 127.0.0.1; in network namespaces each has its own address).
            supervisors = [self.host_of(f"supervisor-{i}") for i in range(self.n_supervisors)]
            keyring.supervisor_keyring(list(dict.fromkeys(supervisors))).save(self.supervisor_keyring_file)
            drpc = [self.host_of("drpc")] if self.with_drpc else None
            keyring.drpc_keyring(drpc).save(self.drpc_keyring_file)

    def add_user(self, name: str) -> str:
        """A user of the running cluster (``squall secrets user add`` as the operator runs it:
        nimbus re-reads its keyring, no daemon is told), with a keyring and a config of their
        own, ``<root>/<name>.keyring.json`` and ``<root>/<name>.yaml``; their token."""
        keyring = Keyring.load(self.keyring_file)
        token = keyring.add_user(name)
        keyring.save()
        own = keyring.client_keyring(name, token).save(self.root / f"{name}.keyring.json")
        conf = {**self.conf, "squall.keyring.path": str(own)}
        write_private(self.root / f"{name}.yaml", yaml.safe_dump(conf))
        return token

    def request(self, method: str, url: str, body: bytes | None = None, *, token: Any = True,
                headers: dict[str, str] | None = None, timeout: float = 30) -> httpx.Response:
        """One request as a client of this cluster: its CA, and its admin's token
        (``token=None``: none; a string: that one).  ``url``: whole, or a path on nimbus-0."""
        bearer, context = credentials(self.conf) if self.secure else (None, None)
        if token is not True:
            bearer = token
        headers = dict(headers or {})
        if bearer:
            headers["Authorization"] = f"Bearer {bearer}"
        if url.startswith("/"):
            url = self.nimbus_url + url
        try:
            with http_client(context, timeout) as client:
                return client.request(method, url, content=body, headers=headers)
        except httpx.TransportError as e:
            msg = f"{method} {url}: {type(e).__name__}: {e}"
            raise NimbusRequestError(msg) from e

    def start(self, timeout: float = 60.0) -> None:
        """Start everything and wait until it answers; returns early if
        :attr:`stopping` is set meanwhile (then :meth:`stop` is the caller's)."""
        private_dir(self.root)  # tightened if an earlier run (or someone) left it open
        private_dir(self.root / "logs")
        write_json(self.pids_file, [])  # this cluster's processes, not a previous one's
        zk_port = self.new_port()
        self.ensure_keyring()
        security = ({"squall.secure": True, "squall.keyring.path": str(self.keyring_file)} if self.secure
                    else {"squall.secure": False})
        self.conf = {
            **DEV_CONF,
            **security,
            "storm.zookeeper.servers": [self.host_of("zookeeper")],
            "storm.zookeeper.port": zk_port,
            "nimbus.seeds": [url.split("://", 1)[1] for url in self.nimbus_urls()],
            # The supervisors' logviewers, on ports of their own; they serve the daemons' logs too.
            "logviewer.port": 0, "storm.log.dir": str(self.root / "logs"),
            # Its DRPC server, which `squall drpc-client` and the topologies' spouts find here.
            **({"drpc.servers": [self.host_of("drpc")], "drpc.port": self.drpc_port}
               if self.with_drpc else {}),
            **self.extra,
        }
        write_private(self.config_file, yaml.safe_dump(self.conf))
        self.start_reaper()
        steps = [self.start_zookeeper, *(lambda i=i: self.start_nimbus(i) for i in range(self.n_nimbus)),
                 *([self.start_drpc] if self.with_drpc else []),
                 *(lambda i=i: self.start_supervisor(i) for i in range(self.n_supervisors))]
        for step in steps:
            if self.stopping.is_set():
                return
            step()
        self.wait_ready(timeout)

    # -- the record of what we started ----------------------------------------

    def record(self, name: str, pid: int) -> None:
        """Remember a process this cluster started (``stop`` kills only these)."""
        try:
            create_time = psutil.Process(pid).create_time()
        except psutil.Error:
            return  # already gone
        with self._records_lock:
            records = _read_records(self.pids_file)
            entry = {"name": name, "pid": pid, "create_time": create_time}
            if entry not in records:
                write_json(self.pids_file, [*records, entry])

    def start_reaper(self) -> None:
        if self._reaper is not None and self._reaper.poll() is None:
            return
        if self._reaper_pipe is not None:
            os.close(self._reaper_pipe)
            self._reaper_pipe = None
        read_end, write_end = os.pipe()  # not inherited by any other child (PEP 446)
        me = psutil.Process()
        try:
            with open(self.root / "logs" / "reaper.log", "ab", opener=_private) as log:
                self._reaper = subprocess.Popen(
                    [sys.executable, "-m", "squall.cli.devcluster", "reap", str(self.root), str(me.pid),
                     repr(me.create_time())],
                    stdin=read_end, stdout=log, stderr=subprocess.STDOUT, cwd=self.root,
                    start_new_session=True, umask=UMASK)
        except BaseException:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
        self._reaper_pipe = write_end
        self.record("reaper", self._reaper.pid)

    # -- daemons -------------------------------------------------------------

    def start_zookeeper(self) -> None:
        self.zk = _RecordedZookeeper(self.conf["storm.zookeeper.port"], self.root / "zookeeper",
                                     self.root / "logs" / "zookeeper.log", host=self.host_of("zookeeper"),
                                     record=self.record, prefix=self.launch_prefix("zookeeper"))
        with _process_umask(UMASK):  # the JVM inherits it: its snapshots and logs 0600
            self.zk.start()
        if self.zk.process is not None:
            self.record("zookeeper", self.zk.process.pid)
        if self.secure:
            client = start_client({**DEFAULTS, **self.conf})
            try:
                seal_root(client)
            finally:
                disconnect(client)

    def _daemon(self, key: str, command: str, conf: dict[str, Any]) -> subprocess.Popen[bytes]:
        path = self.root / f"{key}.yaml"
        write_private(path, yaml.safe_dump({**self.conf, "storm.local.hostname": self.host_of(key), **conf}))
        with open(self.root / "logs" / f"{key}.log", "ab", opener=_private) as log:
            # A session of its own: a ^C in the terminal reaches only the dev
            # cluster's owner, which stops everything in order.
            proc = subprocess.Popen([*self.launch_prefix(key), sys.executable, "-m", "squall.cli",
                                     "--log-level", "info", command, "--config", str(path)],
                                    stdout=log, stderr=subprocess.STDOUT, env=self.launch_env(key),
                                    stdin=subprocess.DEVNULL, cwd=self.root, start_new_session=True,
                                    umask=UMASK)
        self.procs[key] = proc
        self.record(key, proc.pid)
        return proc

    def start_nimbus(self, i: int = 0) -> subprocess.Popen[bytes]:
        return self._daemon(f"nimbus-{i}", "nimbus", {"nimbus.host": self.host_of(f"nimbus-{i}"),
                                                      "nimbus.http.port": self.nimbus_ports[i]})

    def start_drpc(self) -> subprocess.Popen[bytes]:
        """The DRPC server, secure like nimbus with a keyring of its own (no user's token)."""
        return self._daemon("drpc", "drpc", {
            "drpc.port": self.drpc_port,
            **({"squall.keyring.path": str(self.drpc_keyring_file)} if self.secure else {})})

    @property
    def drpc_url(self) -> str:
        return f"{self.scheme}://{self.host_of('drpc')}:{self.drpc_port}"

    def new_port(self) -> int:
        """A free port (on 127.0.0.1, so free in a fresh network namespace too) that this
        cluster has not handed out before.  The
        kernel may give the same free port twice once the probe's socket is closed, and
        two slots on one port leave one worker failing to bind for ever."""
        while True:
            port = free_port()
            if port not in self._ports:
                self._ports.add(port)
                return port

    def supervisor_dir(self, i: int) -> Path:
        return self.root / f"supervisor-{i}"

    def start_supervisor(self, i: int, ports: list[int] | None = None) -> subprocess.Popen[bytes]:
        known = self.supervisor_dir(i) / "ports.json"
        if ports is None:
            ports = (json.loads(known.read_text()) if known.exists()
                     else [self.new_port() for _ in range(self.n_slots)])
        self._ports.update(ports)
        private_dir(self.supervisor_dir(i))
        write_private(known, json.dumps(ports))
        return self._daemon(f"supervisor-{i}", "supervisor", {
            "storm.local.dir": str(self.supervisor_dir(i)), "supervisor.slots.ports": ports,
            "supervisor.cpu.cores": self.supervisor_cores(i),
            **({"squall.keyring.path": str(self.supervisor_keyring_file)} if self.secure else {})})

    def supervisor_cores(self, i: int) -> list[int]:
        """This machine's cores shared out between the dev cluster's supervisors, as separate
        machines would have them: the workers of two nodes are not pinned to the same core."""
        cores = sorted(os.sched_getaffinity(0))
        n = self.n_supervisors
        if n >= len(cores):
            return [cores[i % len(cores)]]
        share = len(cores) // n
        return cores[i * share:(i + 1) * share]

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self.stopping.is_set():
            self._check_alive()
            try:
                info = self.api("GET", "cluster")
                if (info.get("leader") and len(info["supervisors"]) >= self.n_supervisors
                        and self._drpc_listening()):
                    return
            except OSError:
                pass
            self.stopping.wait(0.2)
        if self.stopping.is_set():
            return
        msg = f"dev cluster not ready within {timeout}s; see logs in {self.root / 'logs'}"
        raise RuntimeError(msg)

    def _drpc_listening(self) -> bool:
        if "drpc" not in self.procs:
            return True
        with contextlib.suppress(OSError), socket.create_connection((self.host_of("drpc"), self.drpc_port),
                                                                    timeout=1):
            return True
        return False

    def _check_alive(self) -> None:
        for key, proc in self.procs.items():
            if proc.poll() is not None:
                log = (self.root / "logs" / f"{key}.log").read_text()[-3000:]
                msg = f"{key} exited with {proc.returncode} while starting:\n{log}"
                raise RuntimeError(msg)

    def alive(self) -> bool:
        return all(p.poll() is None for p in self.procs.values())

    def dead(self) -> list[str]:
        """The daemons that exited (by their key), ZooKeeper included."""
        out = [key for key, proc in self.procs.items() if proc.poll() is not None]
        if self.zk is not None and self.zk.process is not None and self.zk.process.poll() is not None:
            out.append("zookeeper")
        return out

    def api(self, method: str, path: str, body: Any = None, url: str | None = None) -> Any:
        """Nimbus's ``/api/v1/<path>`` answer; NimbusRequestError (an OSError) when there is none
        or it is a refusal."""
        data = None if body is None else json.dumps(body).encode()
        response = self.request(method, f"{url or self.nimbus_url}/api/v1/{path}", data)
        if response.is_error:
            msg = f"{method} {path}: HTTP {response.status_code}: {response.text[:300]}"
            raise NimbusRequestError(msg, response.status_code)
        return response.json()

    # -- workers -------------------------------------------------------------

    def worker_pids(self) -> dict[tuple[int, int], int]:
        """(supervisor index, port) -> pid of every live worker."""
        out = {}
        for i in range(self.n_supervisors):
            for pid_file in sorted(self.supervisor_dir(i).glob("workers/*/pid")):
                try:
                    proc = Slot(int(pid_file.parent.name), pid_file.parent).process()
                except ValueError:
                    continue
                if proc is not None:
                    out[(i, int(pid_file.parent.name))] = proc.pid
        return out

    def kill_process(self, key: str, sig: str = "kill") -> None:
        proc = self.procs[key]
        proc.kill() if sig == "kill" else proc.terminate()
        proc.wait(30)

    def kill_supervisor_node(self, i: int) -> None:
        """The whole machine dies: the supervisor and all its workers, SIGKILL."""
        self.kill_process(f"supervisor-{i}")
        for (node, _port), pid in self.worker_pids().items():
            if node == i:
                psutil.Process(pid).kill()

    def stop(self) -> None:
        """Stop every process this cluster started, in order; only those (by
        recorded pid).  Idempotent."""
        stop_recorded(self.root, GRACE_SECS, skip={"reaper"})
        for proc in self.procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)  # collect the exit statuses: no zombies
        if self.zk is not None:
            self.zk.stop()  # already stopped: closes its log
        # Last: the reaper sees end of file, finds nothing left to stop, exits.
        if self._reaper_pipe is not None:
            os.close(self._reaper_pipe)
            self._reaper_pipe = None
        if self._reaper is not None:
            try:
                self._reaper.wait(GRACE_SECS)
            except subprocess.TimeoutExpired:
                self._reaper.kill()
                self._reaper.wait(5)


# -- the root's files: this user's only ---------------------------------------


def _private(path: str, flags: int) -> int:
    """An ``opener`` for open(): the file 0600 from the first byte, and made so
    if an earlier run left it looser."""
    fd = os.open(path, flags, 0o600)
    os.fchmod(fd, 0o600)
    return fd


_umask_lock = threading.Lock()


@contextlib.contextmanager
def _process_umask(mask: int) -> Iterator[None]:
    """This process's umask set to ``mask`` meanwhile, for a child started by code
    that takes none (DevZookeeper's JVM); restored after, since tests run a
    DevCluster in their own process.  One at a time: the umask is the process's."""
    with _umask_lock:
        previous = os.umask(mask)
        try:
            yield
        finally:
            os.umask(previous)


# -- stopping by recorded pid (the cluster's owner, or the reaper) -------------


def _read_records(path: Path) -> list[dict[str, Any]]:
    try:
        records = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    return records if isinstance(records, list) else []


def _recorded_process(pid: Any, create_time: Any) -> psutil.Process | None:
    """The live process ``pid`` if it is still the one that was recorded."""
    try:
        proc = psutil.Process(int(pid))
        if abs(proc.create_time() - float(create_time)) > 1.0 or proc.status() == psutil.STATUS_ZOMBIE:
            return None
    except (psutil.Error, TypeError, ValueError):
        return None
    return proc


def _stop_processes(roots: Iterable[psutil.Process], grace: float, what: str = "",
                    say: Callable[[str], None] | None = None, tree: bool = True) -> None:
    """SIGTERM the processes and (``tree``) their descendants, SIGKILL what is
    left after ``grace`` seconds; then SIGKILL the process groups that the
    roots lead (a worker's or a Spark server's strays, reparented)."""
    members: dict[int, psutil.Process] = {}
    groups = set()
    for root in roots:
        try:
            family = [root, *root.children(recursive=True)] if tree else [root]
            if os.getpgid(root.pid) == root.pid:
                groups.add(root.pid)
        except (psutil.Error, OSError):
            continue
        members.update((p.pid, p) for p in family)
    if say is not None and members:
        say(f"stopping {what}: pids {sorted(members)}")
    for p in members.values():
        with contextlib.suppress(psutil.Error):
            p.terminate()
    _gone, alive = psutil.wait_procs(list(members.values()), timeout=grace)
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(alive, timeout=5)
    for group in groups:
        with contextlib.suppress(OSError):
            os.killpg(group, signal.SIGKILL)


def stop_recorded(root: Path, grace: float = GRACE_SECS, skip: Iterable[str] = (),
                  say: Callable[[str], None] | None = None) -> None:
    """Stop what the dev cluster in ``root`` started, by the pids recorded
    there: supervisors, then their workers (and the workers' children), the
    supervisors' Spark Connect servers, nimbus, ZooKeeper, anything else."""
    root = Path(root)
    skipped = set(skip)
    records = [r for r in _read_records(root / PIDS_FILE)
               if isinstance(r, dict) and r.get("name") not in skipped and r.get("pid") != os.getpid()]

    def live(prefix: str) -> list[psutil.Process]:
        found = []
        for r in records:
            if str(r.get("name", "")).startswith(prefix):
                proc = _recorded_process(r.get("pid"), r.get("create_time"))
                if proc is not None:
                    found.append(proc)
        return found

    local_dirs = sorted(p for p in root.glob("supervisor-*") if p.is_dir())
    servers = [p for p in (_spark_server(local) for local in local_dirs) if p is not None]
    supervisors = live("supervisor-")
    # A supervisor's children now (workers, mostly): recorded in its pid files
    # too, but one just launched may not be there yet.
    children = [c for s in supervisors for c in _children(s) if c not in servers]
    _stop_processes(supervisors, grace, "supervisors", say, tree=False)  # they leave their workers
    slots = [Slot(int(d.name), d) for local in local_dirs for d in sorted(local.glob("workers/*"))
             if d.is_dir() and d.name.isdigit()]
    workers = [p for p in (slot.process() for slot in slots) if p is not None]
    _stop_processes([*workers, *(c for c in children if c.is_running() and c not in workers)], grace,
                    "workers", say)
    for slot in slots:
        slot.kill_left_children(grace=0.0)  # what a SIGKILLed worker left behind (its pids/ files)
    # After the workers, as a supervisor does: their bolts must not see the server die first.
    _stop_processes(servers, grace, "Spark Connect servers", say)
    _stop_processes(live("drpc"), grace, "DRPC server", say)
    _stop_processes(live("nimbus-"), grace, "nimbus", say)
    _stop_processes(live("zookeeper"), grace, "ZooKeeper", say)
    _stop_processes(live(""), grace, "the rest", say)  # anything recorded that is still there


def _children(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return proc.children()
    except psutil.Error:
        return []


def _spark_server(local_dir: Path) -> psutil.Process | None:
    """The node's Spark Connect server a supervisor recorded, if it still runs."""
    try:
        server = json.loads((local_dir / "spark-connect" / "server.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(server, dict):
        return None
    return _recorded_process(server.get("pid"), server.get("create_time"))


def reap(root: Path, owner: int, owner_created: float) -> int:
    """The reaper: wait for the owner to die, then stop what it started.

    stdin is a pipe only the owner writes to: end of file means it died (or
    stopped the cluster and closed it).  The owner's pid is checked too, in
    case a fork of it holds the pipe open."""
    while True:
        readable, _, _ = select.select([sys.stdin.fileno()], [], [], 1.0)
        if readable and not os.read(sys.stdin.fileno(), 4096):
            break
        if _recorded_process(owner, owner_created) is None:
            break
    def say(text: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} reaper: {text}", flush=True)

    say(f"owner {owner} gone: stopping what it started")
    stop_recorded(root, GRACE_SECS, skip={"reaper"}, say=say)
    say("done")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "reap":
        sys.exit(reap(Path(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])))
    sys.exit("usage: python -m squall.cli.devcluster reap ROOT OWNER_PID OWNER_CREATE_TIME")
