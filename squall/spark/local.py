"""Local mode's Spark Connect server: one per process, started lazily.

When a Spark bolt has neither ``spark.remote`` (the user's server) nor
``spark.node.remote`` (the supervisor's), it asks :meth:`ProcessServer.url`,
which starts one :class:`~squall.spark.server.ConnectServer` for the whole
process on first use -- every Spark bolt of every local topology and worker
in the process shares it, as the bolts of a node share the supervisor's --
and stops it when the process exits.  Starting takes 10-20 s (a JVM plus a
warm-up query), paid once.
"""

from __future__ import annotations

import atexit
import tempfile
import threading
from pathlib import Path
from typing import Any

import structlog

from squall.spark.server import ConnectServer

log = structlog.get_logger("squall.spark.ProcessServer")


class ProcessServer:
    """The process's own server (class-level: one per process by definition)."""

    _lock = threading.Lock()
    _server: ConnectServer | None = None
    _tmp: tempfile.TemporaryDirectory[str] | None = None

    @classmethod
    def get(cls, conf: dict[str, Any], wait: bool = True) -> ConnectServer:
        """The server, started on first call; ``wait`` for it to be ready."""
        with cls._lock:
            server = cls._server
            if server is None:
                cls._tmp = tempfile.TemporaryDirectory(prefix="squall-spark-")
                server = ConnectServer(Path(cls._tmp.name), master=conf.get("spark.master", "local[*]"),
                                       conf=conf.get("spark.connect.server.conf") or {},
                                       start_timeout=conf.get("spark.connect.server.start.timeout.secs", 180),
                                       name="squall-local-spark-connect")
                log.info("starting this process's Spark Connect server (local mode)", port=server.port)
                server.start(wait=False)
                cls._server = server
                atexit.register(cls.stop)
        if wait:
            server.wait_ready(server.start_timeout)
        return server

    @classmethod
    def url(cls, conf: dict[str, Any]) -> str:
        """Its address at once (port and token are fixed); sessions retry until it is up."""
        return cls.get(conf, wait=False).url

    @classmethod
    def current(cls) -> ConnectServer | None:
        return cls._server

    @classmethod
    def stop(cls) -> None:
        with cls._lock:
            server, cls._server = cls._server, None
            tmp, cls._tmp = cls._tmp, None
        if server is not None:
            server.stop("process-exit")
        if tmp is not None:
            tmp.cleanup()
