"""Real clusters for tests: a ZooKeeper JVM, nimbus and supervisor processes,
worker processes, ZeroMQ on loopback; free ports only; everything started
is stopped, whatever the test did."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from squall.cli.devcluster import DevCluster

REPO = Path(__file__).resolve().parents[2]
TOPOLOGIES = Path(__file__).resolve().parent / "topologies"
VOCAB = [f"w{i}" for i in range(200)]


@pytest.fixture
def make_cluster(tmp_path: Path) -> Iterator[Callable[..., DevCluster]]:
    clusters: list[DevCluster] = []

    def make(run_as_users: bool = False, **kwargs: Any) -> DevCluster:
        # The topologies here report through files in the test's directory, which a worker
        # run as its topology's own user (the default as root) does not see: those
        # tests run workers as the supervisor's user; the ones about that boundary
        # (test_worker_sandbox.py, the word count below) share the directory with them.
        conf = dict(kwargs.pop("conf", None) or {})
        if not run_as_users:
            conf.setdefault("supervisor.run.worker.as.user", False)
        cluster = DevCluster(tmp_path / f"cluster-{len(clusters)}", conf=conf, **kwargs)
        clusters.append(cluster)
        cluster.start()
        return cluster

    yield make
    for cluster in clusters:
        cluster.stop()


def squall_cli(cluster: DevCluster, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "squall.cli", *args[:1], "--config",
                           str(cluster.config_file), *args[1:]],
                          capture_output=True, text=True, timeout=120, cwd=REPO, check=False)
    if check and proc.returncode != 0:
        msg = f"squall {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        raise AssertionError(msg)
    return proc


def worker_logs(cluster: DevCluster) -> str:
    """Every worker log of the cluster (workers-artifacts/<topology>/<port>/worker.log), in order."""
    return "".join(p.read_text(errors="replace") for p in sorted(cluster.root.glob("**/worker.log")))


def nimbus_answers(cluster: DevCluster) -> bool:
    """Does a nimbus answer, and name a leader?"""
    try:
        return bool(cluster.api("GET", "cluster")["leader"])
    except OSError:
        return False


def busy_workers(cluster: DevCluster, topology: str) -> dict[tuple[int, int], int]:
    """The workers (as ``cluster.worker_pids()``) that run a spout or bolt task of ``topology``.

    The scheduler keeps a topology's slices together: with more workers than a
    component has tasks, some workers hold only an acker that no spout uses (a
    spout tracks its trees with its own worker's acker), and a chaos test that
    kills one of those kills nothing that matters.
    """
    from squall.acker import ACKER_COMPONENT

    return workers_running(cluster, topology, lambda component: component != ACKER_COMPONENT)


def workers_running(cluster: DevCluster, topology: str,
                    wanted: Callable[[str], bool]) -> dict[tuple[int, int], int]:
    """The workers (as ``cluster.worker_pids()``) running a task of a component ``wanted`` names."""
    from squall.topology.topology import definition_from_dict
    from squall.worker.plan import plan_topology

    info = cluster.api("GET", f"topologies/{topology}")
    plan = plan_topology(definition_from_dict(info["definition"]), overrides=info["conf"])
    ports = {w["port"] for w in info["workers"]
             if any(wanted(plan.task_component[t]) for first, last in w["executors"]
                    for t in range(first, last + 1))}
    return {key: pid for key, pid in cluster.worker_pids().items() if key[1] in ports}


class WordCountRun:
    """Input and output files of one durable word count."""

    def __init__(self, root: Path, sentences: int, seed: int = 1) -> None:
        self.dir = root
        root.mkdir(parents=True, exist_ok=True)
        root.chmod(0o777)  # the workers may run as their topology's own user
        rng = random.Random(seed)
        self.sentences = {i: " ".join(rng.choices(VOCAB, k=8)) for i in range(sentences)}
        (root / "sentences.json").write_text(json.dumps([[str(i), s] for i, s in self.sentences.items()]))
        self.expected = Counter(w for s in self.sentences.values() for w in s.split())

    def acked(self) -> set[int]:
        path = self.dir / "acked.log"
        if not path.exists():
            return set()
        return {int(line) for line in path.read_text().splitlines() if line.strip()}

    def counts(self) -> Counter[str]:
        """Exact counts: a (sentence, index) counted twice (a replay) counts once."""
        seen: dict[tuple[int, int], str] = {}
        for path in self.dir.glob("counted-*.log"):
            for line in path.read_text().splitlines():
                parts = line.split()
                if len(parts) == 3:
                    seen[(int(parts[0]), int(parts[1]))] = parts[2]
        return Counter(seen.values())

    def done(self) -> bool:
        return len(self.acked()) == len(self.sentences)

    def submit(self, cluster: DevCluster, name: str, *conf: str) -> None:
        squall_cli(cluster, "submit", str(TOPOLOGIES / "durable_wordcount.py"), "--name", name,
                   "--conf", f"squall.test.dir={self.dir}", *(c for kv in conf for c in ("--conf", kv)))
