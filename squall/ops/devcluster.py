"""A whole cluster on this machine: ZooKeeper, nimbus(es), supervisors.

For trying Squall out (``squall dev-cluster``) and for tests: every daemon
is a real process with its own config file and log under one directory,
on free ports, and the handles here can kill or restart any of them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import psutil
import yaml

from squall.cluster.zookeeper import DevZookeeper, free_port

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


class DevCluster:
    def __init__(self, root: Path, supervisors: int = 2, slots: int = 2,
                 conf: dict[str, Any] | None = None, nimbuses: int = 1) -> None:
        self.root = Path(root).resolve()
        self.n_supervisors = supervisors
        self.n_slots = slots
        self.n_nimbus = nimbuses
        self.extra = dict(conf or {})
        self.zk: DevZookeeper | None = None
        self.nimbus_ports = [free_port() for _ in range(nimbuses)]
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.conf: dict[str, Any] = {}

    @property
    def config_file(self) -> Path:
        return self.root / "squall.yaml"

    @property
    def nimbus_url(self) -> str:
        return f"http://127.0.0.1:{self.nimbus_ports[0]}"

    def start(self, timeout: float = 60.0) -> None:
        (self.root / "logs").mkdir(parents=True, exist_ok=True)
        zk_port = free_port()
        self.conf = {
            **DEV_CONF,
            "storm.zookeeper.servers": ["127.0.0.1"],
            "storm.zookeeper.port": zk_port,
            "nimbus.seeds": [f"127.0.0.1:{p}" for p in self.nimbus_ports],
            **self.extra,
        }
        self.config_file.write_text(yaml.safe_dump(self.conf))
        self.start_zookeeper()
        for i in range(self.n_nimbus):
            self.start_nimbus(i)
        for i in range(self.n_supervisors):
            self.start_supervisor(i)
        self.wait_ready(timeout)

    # -- daemons -------------------------------------------------------------

    def start_zookeeper(self) -> None:
        self.zk = DevZookeeper(self.conf["storm.zookeeper.port"], self.root / "zookeeper",
                               self.root / "logs" / "zookeeper.log")
        self.zk.start()

    def _daemon(self, key: str, command: str, conf: dict[str, Any]) -> subprocess.Popen[bytes]:
        path = self.root / f"{key}.yaml"
        path.write_text(yaml.safe_dump({**self.conf, **conf}))
        with open(self.root / "logs" / f"{key}.log", "ab") as log:
            proc = subprocess.Popen([sys.executable, "-m", "squall.ops.cli", "--log-level", "info", command,
                                     "--config", str(path)], stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, cwd=self.root)
        self.procs[key] = proc
        return proc

    def start_nimbus(self, i: int = 0) -> subprocess.Popen[bytes]:
        return self._daemon(f"nimbus-{i}", "nimbus", {"nimbus.http.port": self.nimbus_ports[i]})

    def supervisor_dir(self, i: int) -> Path:
        return self.root / f"supervisor-{i}"

    def start_supervisor(self, i: int, ports: list[int] | None = None) -> subprocess.Popen[bytes]:
        known = self.supervisor_dir(i) / "ports.json"
        if ports is None:
            ports = (json.loads(known.read_text()) if known.exists()
                     else [free_port() for _ in range(self.n_slots)])
        self.supervisor_dir(i).mkdir(parents=True, exist_ok=True)
        known.write_text(json.dumps(ports))
        return self._daemon(f"supervisor-{i}", "supervisor", {
            "storm.local.dir": str(self.supervisor_dir(i)), "supervisor.slots.ports": ports})

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                info = self.api("GET", "cluster")
                if info.get("leader") and len(info["supervisors"]) >= self.n_supervisors:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        msg = f"dev cluster not ready within {timeout}s; see logs in {self.root / 'logs'}"
        raise RuntimeError(msg)

    def _check_alive(self) -> None:
        for key, proc in self.procs.items():
            if proc.poll() is not None:
                log = (self.root / "logs" / f"{key}.log").read_text()[-3000:]
                msg = f"{key} exited with {proc.returncode} while starting:\n{log}"
                raise RuntimeError(msg)

    def alive(self) -> bool:
        return all(p.poll() is None for p in self.procs.values())

    def api(self, method: str, path: str, body: Any = None, url: str | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{url or self.nimbus_url}/api/v1/{path}", data=data, method=method)
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())

    # -- workers -------------------------------------------------------------

    def worker_pids(self) -> dict[tuple[int, int], int]:
        """(supervisor index, port) -> pid of every live worker."""
        out = {}
        for i in range(self.n_supervisors):
            for pid_file in sorted(self.supervisor_dir(i).glob("workers/*/pid")):
                try:
                    pid = json.loads(pid_file.read_text())["pid"]
                    if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                        out[(i, int(pid_file.parent.name))] = pid
                except (OSError, ValueError, KeyError, psutil.Error):
                    continue
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
        for _key, proc in list(self.procs.items()):
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        # Supervisors leave their workers running by design: reap them here.
        for pid in self.worker_pids().values():
            try:
                psutil.Process(pid).kill()
            except psutil.Error:
                pass
        for proc in psutil.process_iter(["cmdline"]):
            cmdline = proc.info.get("cmdline") or []
            if any(str(self.root) in part for part in cmdline) and proc.pid != psutil.Process().pid:
                try:
                    proc.kill()
                except psutil.Error:
                    pass
        if self.zk is not None:
            self.zk.stop()
