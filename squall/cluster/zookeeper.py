"""ZooKeeper connections, and the embedded single server for development.

Production points ``storm.zookeeper.servers`` at an existing ensemble.  For
development and tests, :class:`DevZookeeper` runs the server class shipped in
pyspark's wheel (``pyspark/jars/zookeeper-*.jar``) with the JVM that Spark
needs anyway: ``java -cp "<pyspark>/jars/*" ...ZooKeeperServerMain PORT DIR``.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import IO, Any

import structlog
from kazoo.client import KazooClient
from kazoo.retry import KazooRetry

from squall.errors import CoordinationError

log = structlog.get_logger("squall.cluster.zookeeper")


def connect_string(conf: dict[str, Any]) -> str:
    port = conf["storm.zookeeper.port"]
    hosts = []
    for server in conf["storm.zookeeper.servers"]:
        hosts.append(server if ":" in str(server) else f"{server}:{port}")
    return ",".join(hosts)


def make_client(conf: dict[str, Any]) -> KazooClient:
    """A kazoo client that retries forever in the background, as daemons need."""
    retry = KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=2)
    return KazooClient(
        hosts=connect_string(conf),
        timeout=conf["storm.zookeeper.session.timeout"] / 1000.0,
        connection_retry=retry,
        command_retry=KazooRetry(max_tries=5, delay=0.1, backoff=2, max_delay=2),
    )


def connect(client: KazooClient, conf: dict[str, Any], who: str = "squall") -> None:
    """Start ``client``, or raise a CoordinationError saying who could not reach what."""
    try:
        client.start(timeout=conf["storm.zookeeper.connection.timeout"] / 1000.0)
    except Exception as e:
        client.close()
        msg = f"{who} cannot reach ZooKeeper at {connect_string(conf)}: {e}"
        raise CoordinationError(msg) from e


def start_client(conf: dict[str, Any]) -> KazooClient:
    client = make_client(conf)
    connect(client, conf)
    return client


def zookeeper_classpath() -> str:
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    if not any(jars.glob("zookeeper-*.jar")):
        msg = f"no zookeeper jar in {jars}; is pyspark installed completely?"
        raise CoordinationError(msg)
    return f"{jars}/*"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class DevZookeeper:
    """One standalone ZooKeeper server in a child JVM."""

    def __init__(self, port: int, data_dir: str | os.PathLike[str],
                 log_path: str | os.PathLike[str] | None = None) -> None:
        self.port = port
        self.data_dir = Path(data_dir)
        self._log_path = log_path
        self._log_file: IO[bytes] | None = None
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        java = shutil.which("java")
        if java is None:
            msg = "java not found on PATH: the embedded ZooKeeper needs Java 17"
            raise CoordinationError(msg)
        # forceSync=no: a development server need not fsync its log on every write;
        # on a busy disk a stalled fsync held up new sessions past their timeout.
        # What it wrote still survives a restart of the server (the page cache keeps it).
        return [java, "-Xmx256m", "-Dzookeeper.admin.enableServer=false", "-Dzookeeper.forceSync=no",
                "-Dlog4j2.level=WARN", "-cp", zookeeper_classpath(),
                "org.apache.zookeeper.server.ZooKeeperServerMain", str(self.port), str(self.data_dir)]

    def start(self, timeout: float = 30.0) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        out: Any = subprocess.DEVNULL
        if self._log_path is not None:
            self._log_file = out = open(self._log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(self.command(), stdout=out, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        self.wait_ready(timeout)
        log.info("zookeeper started", port=self.port, pid=self.process.pid, data_dir=str(self.data_dir))

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                msg = f"zookeeper exited with code {self.process.returncode} while starting"
                raise CoordinationError(msg)
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    # "srvr" is whitelisted by default; any answer means it serves.
                    s.sendall(b"srvr")
                    if s.recv(64):
                        return
            except OSError:
                pass
            time.sleep(0.1)
        msg = f"zookeeper did not start on port {self.port} within {timeout}s"
        raise CoordinationError(msg)

    def stop(self, timeout: float = 10.0) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout)
        self._close_log()

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self._close_log()

    def _close_log(self) -> None:
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
