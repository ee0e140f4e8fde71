"""``squall dev-cluster`` stops everything it started: on SIGTERM, SIGINT and
SIGHUP in order, and after a SIGKILL of its own (its reaper does); and
``DevCluster.stop()`` kills only the processes it recorded.

Real processes: the command in a subprocess, a ZooKeeper JVM, nimbus, a
supervisor and (where a topology is submitted) a worker; free ports only.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from squall.cli.client import NimbusClient
from squall.cli.devcluster import DevCluster
from squall.errors import SquallError
from squall.runtime.settings import load_conf
from squall.testing import poll_for

REPO = Path(__file__).resolve().parents[2]


def _default_signals() -> None:
    # As if started from a terminal: a SIGINT or SIGHUP ignored by whoever
    # started pytest (nohup, a script's &) would be inherited and kept ignored.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


class DevClusterCommand:
    """``squall dev-cluster`` running in a subprocess, one supervisor with one slot."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.log = root.parent / f"{root.name}.out"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "squall.cli", "dev-cluster", "--dir", str(root),
                 "--supervisors", "1", "--slots", "1"],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=REPO,
                preexec_fn=_default_signals)

    @property
    def config_file(self) -> Path:
        return self.root / "squall.yaml"

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def answers(self) -> bool:
        assert self.proc.poll() is None, f"dev-cluster exited with {self.proc.returncode}:\n{self.output()}"
        try:
            info = NimbusClient.for_conf(load_conf(str(self.config_file)), timeout=5).cluster()
        except (OSError, ValueError, TypeError, KeyError, IndexError, SquallError):
            return False
        return bool(info.get("leader")) and len(info.get("supervisors") or []) == 1

    def descendants(self) -> list[psutil.Process]:
        return psutil.Process(self.proc.pid).children(recursive=True)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()  # its reaper cleans up
                self.proc.wait(10)


@pytest.fixture
def dev_cluster(tmp_path: Path) -> Iterator[DevClusterCommand]:
    command = DevClusterCommand(tmp_path / "dev")
    try:
        poll_for(command.answers, timeout=60, message="the dev cluster answering", interval=0.2)
        yield command
    finally:
        command.stop()


def _gone(proc: psutil.Process) -> bool:
    try:
        return not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _cmdline(proc: psutil.Process) -> str:
    try:
        return " ".join(proc.cmdline())
    except psutil.Error:
        return ""


def _kinds(procs: list[psutil.Process]) -> set[str]:
    kinds = set()
    for proc in procs:
        line = _cmdline(proc)
        for kind, mark in (("zookeeper", "ZooKeeperServerMain"), ("nimbus", " nimbus --config"),
                           ("supervisor", " supervisor --config"), ("worker", "-m squall.worker"),
                           ("reaper", "squall.cli.devcluster reap")):
            if mark in line:
                kinds.add(kind)
    return kinds


def _submit_wordcount(command: DevClusterCommand) -> None:
    submit = subprocess.run(
        [sys.executable, "-m", "squall.cli", "--config", str(command.config_file), "submit",
         "examples/wordcount.py", "--conf", "topology.workers=1"],
        capture_output=True, text=True, timeout=60, cwd=REPO, check=False)
    assert submit.returncode == 0, submit.stdout + submit.stderr
    poll_for(lambda: "worker" in _kinds(command.descendants()), timeout=60,
             message="a worker process", interval=0.2)


@pytest.mark.parametrize(("sig", "with_topology"), [
    (signal.SIGTERM, True), (signal.SIGINT, False), (signal.SIGHUP, False)],
    ids=["SIGTERM-with-a-topology", "SIGINT", "SIGHUP"])
def test_a_signal_stops_everything_it_started(dev_cluster: DevClusterCommand, sig: signal.Signals,
                                              with_topology: bool) -> None:
    # Given a dev cluster (and, for one signal, a topology with a worker process)
    if with_topology:
        _submit_wordcount(dev_cluster)
    started = dev_cluster.descendants()
    expected = {"zookeeper", "nimbus", "supervisor", "reaper"} | ({"worker"} if with_topology else set())
    assert _kinds(started) >= expected
    # When the command gets the signal
    dev_cluster.proc.send_signal(sig)
    # Then it exits 0, having stopped every process it started
    assert dev_cluster.proc.wait(30) == 0, dev_cluster.output()
    poll_for(lambda: all(_gone(p) for p in started), timeout=5, message="every process stopped",
             interval=0.1)
    assert f"dev cluster stopped ({sig.name})" in dev_cluster.output()


def test_its_processes_die_with_it_when_it_is_killed(dev_cluster: DevClusterCommand) -> None:
    # Given a dev cluster running a topology
    _submit_wordcount(dev_cluster)
    started = dev_cluster.descendants()
    assert _kinds(started) >= {"zookeeper", "nimbus", "supervisor", "worker", "reaper"}
    # When the command is SIGKILLed (no chance to stop anything itself)
    dev_cluster.proc.kill()
    dev_cluster.proc.wait(10)
    # Then every process it started is gone soon after (its reaper stopped them)
    poll_for(lambda: all(_gone(p) for p in started), timeout=30, message="every process stopped",
             interval=0.2)


def test_stop_kills_only_the_processes_it_recorded(tmp_path: Path) -> None:
    # Given a process the cluster did not start, whose command line names the cluster's directory
    cluster = DevCluster(tmp_path / "cluster", supervisors=1, slots=1)
    decoy = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", str(cluster.root)],
                             stdin=subprocess.DEVNULL)
    # (and what this process ran before, such as another test's session-wide server)
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    try:
        cluster.start()
        started = psutil.Process().children(recursive=True)
        assert decoy.pid in {p.pid for p in started}
        ours = [p for p in started if p.pid != decoy.pid and p.pid not in before]
        assert _kinds(ours) >= {"zookeeper", "nimbus", "supervisor", "reaper"}
        # When the cluster is stopped (twice: stop is idempotent)
        cluster.stop()
        cluster.stop()
        # Then its own processes are gone, and the decoy still runs
        assert all(_gone(p) for p in ours)
        assert decoy.poll() is None
    finally:
        cluster.stop()
        decoy.kill()
        decoy.wait(10)


def test_no_two_ports_of_a_dev_cluster_are_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a kernel that hands out the same free port again (it may, once the probe is closed)
    offered = iter([41000, 41000, 41001, 41000, 41001, 41002, 41003, 41002, 41004])
    monkeypatch.setattr("squall.cli.devcluster.free_port", lambda: next(offered))
    # When a dev cluster takes its nimbus and DRPC ports, then ports for its slots
    cluster = DevCluster(tmp_path / "c", supervisors=1, slots=3, secure=False)
    ports = [*cluster.nimbus_ports, cluster.drpc_port, *(cluster.new_port() for _ in range(3))]
    # Then each port is one it has not handed out before
    assert ports == [41000, 41001, 41002, 41003, 41004]
