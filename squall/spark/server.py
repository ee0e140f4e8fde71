"""A Spark Connect server run from the pip package, watched and restarted.

One server per node is what spark.md recommends: the supervisor owns it
(``supervisor.spark.connect.enabled``), local mode starts one lazily per
process (:mod:`squall.spark.local`), and every Spark bolt holds a Connect
session to it, so workers never run a JVM.

The server is ``bin/spark-submit --class ...SparkConnectServer`` from the
pyspark package (``SPARK_HOME`` is the package directory), in the
foreground, in a process group of its own:

* bound to loopback: ``spark.connect.grpc.binding.address=127.0.0.1`` and
  ``SPARK_LOCAL_IP=127.0.0.1`` (driver and block manager too);
* token-protected: pyspark 4.x servers read ``SPARK_CONNECT_AUTHENTICATE_TOKEN``
  from their environment (the same as ``spark.connect.authenticate.token``,
  kept off the command line so ``ps`` does not show it).  Clients must say
  ``sc://localhost:PORT/;token=...``: with a token the client insists on TLS
  for any host but the literal ``localhost``;
* nothing secret on any command line (``/proc/<pid>/cmdline`` is world-readable,
  a process's environment is not): the server's Spark settings, which may hold
  passwords, go in a 0600 ``--properties-file``; the warm-up child gets the
  token in its environment (pyspark's client reads the same variable);
* ready when its port accepts connections *and* a warm-up query ran (a
  fresh server takes 5-10 s over its first query; better here than in the
  first batch).  The warm-up runs in a child Python, so a supervisor never
  loads the Spark client;
* restarted when it dies, with exponential backoff, on the same port and
  token, so the address workers hold stays valid.

With a ``directory`` of its own (the supervisor's), the port, token and
process are recorded there, so that a restarted supervisor adopts the
server it left running instead of starting a second JVM.
"""

from __future__ import annotations

import importlib.util
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import psutil
import structlog

from squall.affinity import release_child
from squall.errors import SquallError
from squall.runtime import sandbox
from squall.runtime.ports import free_port
from squall.runtime.processes import kill_tree
from squall.runtime.status import Status
from squall.security.files import write_private

log = structlog.get_logger("squall.spark.ConnectServer")

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
_CLIENT_ENV = ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "SPARK_LOCAL_REMOTE", "PYSPARK_GATEWAY_PORT",
               "SPARK_CONNECT_AUTHENTICATE_TOKEN")

# Settings every server gets (the user's spark.connect.server.conf wins).
BASE_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": str(max(2, 2 * (os.cpu_count() or 1))),
}

TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"

# The warm-up query: a round trip plus a tiny shuffle, so the first real
# batch does not pay for class loading and code generation.  argv[1] is the
# address without the token; the client takes the token from TOKEN_ENV.
WARM_UP = """
import sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.remote(sys.argv[1]).create()
spark.range(1).collect()
spark.range(100).selectExpr("id % 3 AS k").groupBy("k").count().collect()
spark.stop()
"""


class ServerError(SquallError):
    """The Spark Connect server could not be started or did not become ready."""


def spark_home() -> Path:
    """The pyspark package directory, which is a valid SPARK_HOME."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        msg = "pyspark is not installed: pip install 'squall[spark]'"
        raise ServerError(msg)
    return Path(next(iter(spec.submodule_search_locations)))


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def remote_url(port: int, token: str | None) -> str:
    """What clients pass to ``SparkSession.builder.remote``."""
    if token:
        return f"sc://localhost:{port}/;token={token}"
    return f"sc://localhost:{port}"


def _properties_escape(text: str, key: bool) -> str:
    """Escape for a Java ``.properties`` file (read as UTF-8 by spark-submit)."""
    out = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    out = out.replace("\f", "\\f")
    if key:
        for c in " =:#!":
            out = out.replace(c, "\\" + c)
    elif out.startswith(" "):
        out = "\\" + out
    return out


def properties_text(conf: Mapping[str, str]) -> str:
    return "".join(f"{_properties_escape(k, True)}={_properties_escape(v, False)}\n" for k, v in conf.items())


def client_env(base: Mapping[str, str]) -> dict[str, str]:
    """``base`` without the Spark client settings of the process starting a child."""
    return {k: v for k, v in base.items() if k not in _CLIENT_ENV}


def warm_up_call(python: str, port: int, token: str | None, home: Path,
                 base_env: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """The warm-up child's argv and environment: the token only in the environment."""
    env = client_env(base_env)
    env["SPARK_HOME"] = str(home)
    if token:
        env[TOKEN_ENV] = token
    return [python, "-c", WARM_UP, remote_url(port, None)], env


def server_call(home: Path, *, name: str, master: str, port: int, properties: Path, python: str,
                token: str, base_env: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """The server's argv and environment: settings in ``properties``, the token in the environment."""
    env = client_env(base_env)  # not the client settings of the process starting it
    env.update({
        "SPARK_HOME": str(home),
        "PYSPARK_PYTHON": python,
        "PYSPARK_DRIVER_PYTHON": python,
        "SPARK_LOCAL_IP": "127.0.0.1",
        TOKEN_ENV: token,
    })
    cmd = [str(home / "bin" / "spark-submit"), "--class", SERVER_CLASS,
           "--name", name,
           "--master", master,
           "--properties-file", str(properties),
           "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
           "--conf", f"spark.connect.grpc.binding.port={port}"]
    return cmd, env


class ConnectServer:
    """One Spark Connect server process, kept alive until :meth:`stop`.

    ``start()`` is idempotent; with ``wait=True`` it returns once the server
    answered its warm-up query (or raises :class:`ServerError`), with
    ``wait=False`` at once, the watcher thread launching it.  ``url`` is
    known before the server is up: port and token never change.
    """

    def __init__(
        self,
        directory: Path,
        *,
        port: int = 0,
        master: str = "local[*]",
        conf: Mapping[str, Any] | None = None,
        token: str | None = None,
        python: str = sys.executable,
        start_timeout: float = 180.0,
        name: str = "squall-spark-connect",
        backoff: tuple[float, float] = (1.0, 30.0),
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.master = master
        self.conf = {**BASE_CONF, **{k: str(v) for k, v in (conf or {}).items()}}
        self.python = python
        self.start_timeout = start_timeout
        self.name = name
        self.backoff = backoff
        self.now = now
        self.status = Status.INIT
        self.port = self._port(port)
        self.token = token if token is not None else self._token()
        self.restarts = 0
        self.failure: BaseException | None = None
        self._proc: subprocess.Popen[bytes] | psutil.Process | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._watcher: threading.Thread | None = None
        # Set (by a root supervisor) to run the server as this user in a sandbox: the
        # Python workers it starts run users' UDFs, which must not reach the daemon's keys.
        self.identity: sandbox.Identity | None = None
        self.shared: tuple[str, ...] = ()  # host folders its sandbox shows (the workers' shared dirs)

    # -- identity ------------------------------------------------------------

    @property
    def url(self) -> str:
        return remote_url(self.port, self.token)

    @property
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None else None

    @property
    def log_file(self) -> Path:
        return self.dir / "server.log"

    def _port(self, port: int) -> int:
        """A fixed port, or a free one picked once and remembered in the directory."""
        if port:
            return port
        path = self.dir / "port"
        try:
            remembered = int(path.read_text())
        except (OSError, ValueError):
            remembered = 0
        if remembered and (port_open(remembered) or _bindable(remembered)):
            return remembered
        chosen = free_port()
        path.write_text(str(chosen))
        return chosen

    def _token(self) -> str:
        """A secret kept in the directory (0600): the same across restarts."""
        path = self.dir / "token"
        try:
            token = path.read_text().strip()
            if token:
                return token
        except OSError:
            pass
        token = secrets.token_urlsafe(24)
        write_private(path, token)
        return token

    # -- lifecycle -----------------------------------------------------------

    def start(self, wait: bool = True) -> None:
        with self._lock:
            if self.status is Status.INIT:
                self.status = Status.STARTING
                self._stop.clear()
                self._watcher = threading.Thread(target=self._watch, name=f"{self.name}-watcher", daemon=True)
                self._watcher.start()
        if wait:
            self.wait_ready(self.start_timeout)

    def wait_ready(self, timeout: float) -> None:
        """Until the server answered its warm-up query; :class:`ServerError` otherwise."""
        if self._ready.wait(timeout):
            return
        if self.failure is not None:
            msg = f"the Spark Connect server on port {self.port} failed to start: {self.failure}"
            raise ServerError(msg) from self.failure
        msg = (f"the Spark Connect server on port {self.port} was not ready within {timeout}s; "
               f"see {self.log_file}")
        raise ServerError(msg)

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    def alive(self) -> bool:
        # Tell our child from an adopted server by the adopted one's type: a test may
        # patch subprocess.Popen while this watcher runs, so isinstance(Popen) would lie.
        proc = self._proc
        if proc is None:
            return False
        if not isinstance(proc, psutil.Process):
            return proc.poll() is None
        try:
            return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    def stop(self, reason: str = "stop", grace: float = 10.0) -> None:
        """Stop watching and stop the server (its whole process group)."""
        with self._lock:
            if self.status in (Status.STOPPING, Status.STOPPED, Status.INIT):
                self.status = Status.STOPPED
                return
            self.status = Status.STOPPING
        log.info("stopping the Spark Connect server", reason=reason, port=self.port, pid=self.pid)
        self._stop.set()
        self._ready.clear()
        self._terminate(grace)
        if self._watcher is not None and self._watcher is not threading.current_thread():
            self._watcher.join(grace + 5)
        (self.dir / "server.json").unlink(missing_ok=True)
        self.status = Status.STOPPED

    def detach(self, reason: str = "detach") -> None:
        """Stop watching but leave the server running (a supervisor stopping
        without its workers: the next one adopts it)."""
        with self._lock:
            if self.status not in (Status.STARTING, Status.RUNNING):
                return
            self.status = Status.STOPPING
        log.info("leaving the Spark Connect server running", reason=reason, port=self.port, pid=self.pid)
        self._stop.set()
        if self._watcher is not None and self._watcher is not threading.current_thread():
            self._watcher.join(5)
        self.status = Status.STOPPED

    def kill(self) -> None:
        """SIGKILL the server's JVM (chaos and tests); the watcher restarts it."""
        proc = self._proc
        if proc is not None:
            try:
                os.kill(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    # -- the watcher ---------------------------------------------------------

    def _watch(self) -> None:
        structlog.contextvars.bind_contextvars(spark_connect_port=self.port)
        failures = 0
        first = True
        while not self._stop.is_set():
            started = self.now()
            try:
                if not (first and self._adopt()):
                    self._launch()
                self._wait_up()
                if self._stop.is_set():
                    return
            except Exception as e:  # noqa: BLE001 - logged; the next round retries
                self.failure = e
                log.error("the Spark Connect server did not start", error=str(e), log=str(self.log_file))
                self._terminate(2.0)
            else:
                self.failure = None
                self.status = Status.RUNNING
                self._ready.set()
                log.info("Spark Connect server ready", port=self.port, pid=self.pid,
                         secs=round(self.now() - started, 1), restarts=self.restarts)
                self._wait_exit()
                self._ready.clear()
                if self._stop.is_set():
                    return
                self._terminate(1.0)  # what is left of its process group (Python workers)
                log.warning("the Spark Connect server died; restarting it", pid=self.pid,
                            exit=self._exit_code(), restarts=self.restarts + 1)
                if self.now() - started > self.backoff[1]:
                    failures = 0  # it had been healthy: restart at once
            first = False
            delay = min(self.backoff[0] * 2 ** failures, self.backoff[1]) if failures else 0.0
            failures += 1
            if delay and self._stop.wait(delay):
                return
            if not self._stop.is_set():
                self.restarts += 1

    def _launch(self) -> None:
        if port_open(self.port):
            msg = f"port {self.port} is taken by another process"
            raise ServerError(msg)
        properties = self.dir / "server.properties"
        write_private(properties, properties_text(self.conf))
        cmd, env = server_call(spark_home(), name=f"{self.name} {self.dir}", master=self.master,
                               port=self.port, properties=properties, python=self.python, token=self.token,
                               base_env=os.environ)
        if self.identity is not None:
            uid, gid = self.identity.uid, self.identity.gid
            for path in (self.dir, properties):
                os.chown(path, uid, gid)
            name = self.identity.name
            # (no passwd entry: the JVM would take its home and user name as "?")
            env = {**env, "HOME": str(self.dir), "USER": name, "LOGNAME": name, "SPARK_USER": name,
                   "HADOOP_USER_NAME": name,
                   "SPARK_SUBMIT_OPTS": f"{env.get('SPARK_SUBMIT_OPTS', '')} -Duser.home={self.dir} "
                                        f"-Duser.name={name}".strip()}
            box = sandbox.Sandbox(cwd=str(self.dir), identity=self.identity,
                                  write=[str(self.dir), *self.shared],
                                  network=True, strict=False, die_with_parent=False,
                                  overlay=sandbox.identity_files(self.identity, str(self.dir), str(self.dir)))
            cmd = sandbox.command(box, cmd)
        with open(self.log_file, "ab") as out:
            # A process group of its own: stop() takes the JVM's Python workers too.
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env=env, cwd=self.dir, start_new_session=True)
        release_child(proc.pid)  # not bound by a pinned `squall local`
        self._proc = proc
        record = {"pid": proc.pid, "port": self.port, "create_time": psutil.Process(proc.pid).create_time()}
        (self.dir / "server.json").write_text(json.dumps(record))
        log.info("Spark Connect server launched", pid=proc.pid, port=self.port, master=self.master)

    def _adopt(self) -> bool:
        """A server we left running (a previous supervisor of this directory)?"""
        try:
            record = json.loads((self.dir / "server.json").read_text())
            proc = psutil.Process(record["pid"])
            same = abs(proc.create_time() - record["create_time"]) < 1.0 and record["port"] == self.port
        except (OSError, ValueError, KeyError, TypeError, psutil.Error):
            return False
        if not same or not any(SERVER_CLASS in part for part in proc.cmdline()):
            return False
        self._proc = proc
        log.info("adopting the running Spark Connect server", pid=proc.pid, port=self.port)
        return True

    def _wait_up(self) -> None:
        deadline = self.now() + self.start_timeout
        while not port_open(self.port):
            if not self.alive():
                msg = f"the server exited with {self._exit_code()} while starting; see {self.log_file}"
                raise ServerError(msg)
            if self.now() > deadline:
                msg = f"port {self.port} did not open within {self.start_timeout}s; see {self.log_file}"
                raise ServerError(msg)
            if self._stop.wait(0.2):
                return
        remaining = max(1.0, deadline - self.now())
        cmd, env = warm_up_call(self.python, self.port, self.token, spark_home(), os.environ)
        try:
            subprocess.run(cmd, check=True, timeout=remaining, capture_output=True, stdin=subprocess.DEVNULL,
                           env=env)
        except subprocess.CalledProcessError as e:
            tail = e.stderr.decode(errors="replace")[-2000:]
            msg = f"the warm-up query failed: {tail}"
            raise ServerError(msg) from e
        except subprocess.TimeoutExpired as e:
            msg = f"the warm-up query did not finish within {remaining:.0f}s"
            raise ServerError(msg) from e

    def _wait_exit(self) -> None:
        proc = self._proc
        while not self._stop.is_set():
            if not isinstance(proc, psutil.Process):
                try:
                    proc.wait(0.5)
                    return
                except subprocess.TimeoutExpired:
                    continue
            if not self.alive():
                return
            self._stop.wait(0.5)

    def _exit_code(self) -> Any:
        proc = self._proc
        if not isinstance(proc, psutil.Process):
            code = proc.poll()
            if code is not None and code < 0:
                return f"killed by {signal.Signals(-code).name}"
            return code
        return None

    def _terminate(self, grace: float) -> None:
        proc = self._proc
        if proc is None:
            return
        try:
            group = os.getpgid(proc.pid)
        except ProcessLookupError:
            group = None
        kill_tree(proc.pid, grace)
        if group is not None and group != os.getpgid(0):
            try:
                os.killpg(group, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if not isinstance(proc, psutil.Process):
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                pass


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True
