"""The supervisor's Spark Connect server: one JVM per node, shared by every worker.

A small object the supervisor owns when ``supervisor.spark.connect.enabled``
is set: it starts the server in the background (the supervisor does not wait
for the JVM; Spark bolts retry until it answers), tells each worker where it
is (``spark.node.remote`` in the worker's conf), and on stop either stops it
(with the workers) or leaves it running for the next supervisor to adopt
(workers outlive a supervisor restart, and so does the server they use).

Files, in ``<storm.local.dir>/spark-connect/``: ``token`` (0600),
``port`` (when the configured port is 0), ``server.json`` (pid, for
adoption) and ``server.log``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from squall.spark.server import ConnectServer


class NodeServer:
    def __init__(self, conf: dict[str, Any], local_dir: Path) -> None:
        self.server = ConnectServer(
            Path(local_dir) / "spark-connect",
            port=int(conf.get("supervisor.spark.connect.port", 15002)),
            master=conf.get("spark.master", "local[*]"),
            conf=conf.get("spark.connect.server.conf") or {},
            start_timeout=float(conf.get("spark.connect.server.start.timeout.secs", 180)),
            name="squall-node-spark-connect",
        )

    @property
    def url(self) -> str:
        return self.server.url

    def start(self) -> None:
        self.server.start(wait=False)

    def worker_conf(self) -> dict[str, Any]:
        """What every worker of this node is told (the user's spark.remote still wins)."""
        return {"spark.node.remote": self.server.url}

    def stop(self, kill: bool, reason: str = "supervisor-stop") -> None:
        if kill:
            self.server.stop(reason)
        else:
            self.server.detach(reason)
