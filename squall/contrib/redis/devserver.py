"""A redis-server of our own on a free loopback port: for tests, examples and benchmarks.

Production points components at a Redis it runs itself (``redis.url``).  This
runs Debian's ``redis-server`` (``bash ops/bootstrap.sh --redis``) bound to
127.0.0.1 only, protected mode on, its files in a private directory, with the
append-only file on when asked (``appendonly yes``, ``appendfsync always``: a
restart loses nothing acknowledged), and can be killed and restarted on the same port.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import IO, Any

from squall.errors import SquallError
from squall.runtime.ports import free_port


class DevRedis:
    def __init__(self, directory: str | os.PathLike[str], port: int | None = None, aof: bool = False,
                 password: str | None = None) -> None:
        self.dir = Path(directory)
        self.port = port or free_port()
        self.aof = aof
        self.password = password
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def config(self) -> str:
        lines = [f"port {self.port}", "bind 127.0.0.1", "protected-mode yes", f"dir {self.dir}",
                 "save \"\"", "daemonize no", "loglevel warning"]
        if self.aof:
            lines += ["appendonly yes", "appendfsync always"]
        if self.password:
            lines.append(f"requirepass {self.password}")
        return "\n".join(lines) + "\n"

    def start(self, timeout: float = 15.0) -> None:
        server = shutil.which("redis-server")
        if server is None:
            msg = "redis-server not found: `bash ops/bootstrap.sh --redis` installs Debian's"
            raise SquallError(msg)
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        conf = self.dir / "redis.conf"
        fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(self.config())
        self._log = open(self.dir / "redis.log", "ab")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen([server, str(conf)], stdout=self._log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        self.wait_ready(timeout)

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                msg = f"redis-server exited with {self.process.returncode}; see {self.dir / 'redis.log'}"
                raise SquallError(msg)
            if self.ping():
                return
            time.sleep(0.05)
        msg = f"redis-server on port {self.port} did not answer within {timeout}s"
        raise SquallError(msg)

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                auth = f"AUTH {self.password}\r\n".encode() if self.password else b""
                s.sendall(auth + b"PING\r\n")
                return b"PONG" in s.recv(256)
        except OSError:
            return False

    def kill(self) -> None:
        """SIGKILL: what is not in the append-only file is gone."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        if self._log is not None:
            self._log.close()
            self._log = None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        if self._log is not None:
            self._log.close()
            self._log = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def __enter__(self) -> DevRedis:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
