"""A topology whose spout, in its worker, tries to reach everything a worker must
not: every path in ``squall.test.targets`` (keyrings, daemon files, another
topology's directories, a daemon's /proc entries), ZooKeeper's root and the
cluster's own tree, with the credentials its worker holds.  It writes what it got
to ``<squall.test.dir>/report-<pid>.json``, the one directory shared with it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from squall import Bolt, Spout, Topology


def _attempt(action: Any) -> str:
    try:
        got = action()
    except Exception as e:  # noqa: BLE001 - every failure is the answer
        return f"refused: {type(e).__name__}"
    return f"GOT: {str(got)[:2000]}"


def _read(path: str) -> Any:
    if os.path.isdir(path):
        return os.listdir(path)
    with open(path, "rb") as f:
        return f.read()


def _zookeeper(conf: dict[str, Any], worker_dir: str) -> dict[str, str]:
    from kazoo.client import KazooClient

    secrets = json.loads(Path(worker_dir, "secrets.json").read_text())["zookeeper"]
    hosts = ",".join(f"{h}:{conf['storm.zookeeper.port']}" for h in conf["storm.zookeeper.servers"])
    zk = KazooClient(hosts=hosts, auth_data=[("digest", f"{secrets['user']}:{p}")
                                             for p in secrets["passwords"]])
    zk.start(timeout=15)
    try:
        return {
            "create /": _attempt(lambda: zk.create("/hostile", b"x" * 65000)),
            "read cluster secrets": _attempt(lambda: zk.get_children("/squall/secrets")),
            "read a topology record": _attempt(
                lambda: [zk.get(f"/squall/topologies/{t}")[0]
                         for t in zk.get_children("/squall/topologies")]),
            "write assignments": _attempt(lambda: zk.create("/squall/assignments/hostile", b"{}")),
            # what DRPC servers take a topology's credential by: listing it, or planting a hash
            "list DRPC credentials": _attempt(lambda: zk.get_children("/squall/drpc")),
            "plant a DRPC credential": _attempt(lambda: zk.create("/squall/drpc/victim-1." + "0" * 64, b"")),
            "victim's transactional state": _attempt(
                lambda: zk.create("/transactional/victim/stolen", b"x", makepath=True)),
        }
    finally:
        zk.stop()
        zk.close()


class Prober(Spout):
    outputs = ["n"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        worker_dir = conf["squall.worker.dir"]
        report = {path: _attempt(lambda p=path: _read(p)) for path in conf["squall.test.targets"]}
        report["uid"] = str(os.getuid())
        report["zookeeper"] = _zookeeper(conf, worker_dir)  # type: ignore[assignment]
        out = Path(conf["squall.test.dir"], f"report-{os.getpid()}-{os.urandom(3).hex()}.json")
        out.write_text(json.dumps(report))
        self.n = 0

    def next_tuple(self) -> None:
        self.n += 1
        if self.n < 100:
            self.emit([self.n])


class Sink(Bolt):
    def process(self, tup: Any) -> None:
        pass


class HostileWorker(Topology):
    prober = Prober.spec()
    sink = Sink.spec(inputs=[prober])
