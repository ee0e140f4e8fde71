"""Stateful word counts on the dev cluster (2 supervisors, 4 workers, SQLite
state), with workers SIGKILLed mid-run."""

from __future__ import annotations

import json
import os
import random
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from squall.cluster.transactional_state import ZooKeeperBackend
from squall.testing import poll_for
from tests.cluster.conftest import VOCAB, busy_workers, squall_cli
from tests.helpers import committed_states

TOPOLOGY = Path(__file__).resolve().parent / "topologies" / "stateful_wordcount.py"

pytestmark = pytest.mark.timeout(150)


class StatefulRun:
    def __init__(self, root: Path, sentences: int, seed: int = 3) -> None:
        self.dir = root
        self.state_dir = root / "state"
        self.state_dir.mkdir(parents=True)
        rng = random.Random(seed)
        text = {i: " ".join(rng.choices(VOCAB[:50], k=6)) for i in range(sentences)}
        (root / "sentences.json").write_text(json.dumps([[str(i), s] for i, s in text.items()]))
        self.expected = Counter(w for s in text.values() for w in s.split())
        self.total = sum(self.expected.values())
        self.n = sentences
        self.name = ""
        self.submitted = ""

    def submit(self, cluster: Any, name: str, topology: str, *conf: str) -> None:
        self.name = topology  # state is keyed by the topology's definition (class) name
        self.submitted = name
        squall_cli(cluster, "submit", str(TOPOLOGY), "--topology", topology, "--name", name,
                   "--conf", f"squall.test.dir={self.dir}", "--conf", f"squall.state.dir={self.state_dir}",
                   *(c for kv in conf for c in ("--conf", kv)))

    def committed(self) -> Counter[str]:
        """The counts as of the last commit of every counter task."""
        out: Counter[str] = Counter()
        for data in committed_states(self.state_dir / f"{self.name}.sqlite", "count"):
            out.update(data)
        return out

    def acked(self) -> set[str]:
        path = self.dir / "acked.log"
        return set(path.read_text().split()) if path.exists() else set()

    def restores(self) -> list[str]:
        path = self.dir / "restores.log"
        return path.read_text().split() if path.exists() else []


def kill_workers(cluster: Any, run: StatefulRun, times: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    killed = []
    for _ in range(times):
        poll_for(lambda: len(cluster.worker_pids()) == 4, timeout=30, message="all workers up")
        before = sum(run.committed().values())
        poll_for(lambda b=before: sum(run.committed().values()) > b + 100, timeout=30,
                 message="checkpoints commit")
        slot, pid = rng.choice(sorted(busy_workers(cluster, run.submitted).items()))
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)
        poll_for(lambda s=slot, p=pid: cluster.worker_pids().get(s) not in (None, p), timeout=30,
                 message=f"worker on {slot} restarted")
    return killed


def test_a_checkpointed_spout_makes_the_state_exact_through_kills(make_cluster: Any, tmp_path: Path) -> None:
    # Given a stateful word count fed by a rewinding spout on 2 nodes, 4 workers
    cluster = make_cluster(supervisors=2, slots=2)
    run = StatefulRun(tmp_path / "exact", sentences=1600)
    run.submit(cluster, "exact", "ExactWordCount", "topology.workers=4", "squall.test.rate=120")
    # When random workers are SIGKILLed twice mid-run
    kill_workers(cluster, run, times=2, seed=11)
    # Then the committed counts reach the total, and every word is counted exactly once
    poll_for(lambda: sum(run.committed().values()) >= run.total, timeout=60, message="every word committed")
    assert run.committed() == run.expected
    assert len(run.restores()) >= 2  # the start, and a rewind after a kill
    # and the checkpoint record in ZooKeeper has the spout's position committed at the end
    poll_for(lambda: checkpoint_record(cluster, "ExactWordCount").get("position") == run.n, timeout=20,
             message="the final position committed in ZooKeeper")
    # When the topology is killed and its definition submitted again under another name
    squall_cli(cluster, "kill", "exact", "-w", "0")
    poll_for(lambda: not cluster.worker_pids(), timeout=30, message="the killed topology's workers gone")
    restored = len(run.restores())
    run.submit(cluster, "exact-renamed", "ExactWordCount", "topology.workers=4")
    # Then it resumes from the committed position and state (both keyed by the definition's
    # name): nothing is read or counted again
    poll_for(lambda: len(run.restores()) > restored, timeout=60, message="the renamed topology restored")
    assert run.restores()[-1] == str(run.n)
    assert run.committed() == run.expected


def checkpoint_record(cluster: Any, topology: str) -> dict[str, Any]:
    backend = ZooKeeperBackend.for_cluster_conf(dict(cluster.conf))
    try:
        return backend.open(topology, "checkpoint").get_data("record") or {}
    finally:
        backend.close()


def test_a_plain_reliable_spout_loses_no_word_through_kills(make_cluster: Any, tmp_path: Path) -> None:
    # Given the same word count fed by a plain reliable spout
    cluster = make_cluster(supervisors=2, slots=2)
    # (nimbus checks the state config as submitted: an interval over the message timeout is refused)
    bad = squall_cli(cluster, "submit", str(TOPOLOGY), "--topology", "ReliableWordCount", "--name", "bad",
                     "--conf", "topology.state.checkpoint.interval.ms=7000", check=False)
    assert bad.returncode != 0
    assert "must be below topology.message.timeout.secs (6 s)" in bad.stdout + bad.stderr
    run = StatefulRun(tmp_path / "reliable", sentences=1600)
    run.submit(cluster, "reliable", "ReliableWordCount", "topology.workers=4", "squall.test.rate=120")
    kill_workers(cluster, run, times=2, seed=12)
    # Then every sentence is acked, which happens only once its words are committed
    poll_for(lambda: len(run.acked()) == run.n, timeout=60, message="all sentences acked")
    counts = run.committed()
    # and no word is lost (replays may count some twice: at least once)
    assert all(counts[w] >= n for w, n in run.expected.items()), run.expected - counts


def test_a_checkpoint_prepared_but_never_committed_is_rolled_back(make_cluster: Any, tmp_path: Path) -> None:
    # Given the exact word count, and a counter task set to kill its worker inside
    # the prepare of a checkpoint another counter task has already prepared
    cluster = make_cluster(supervisors=2, slots=2)
    run = StatefulRun(tmp_path / "rollback", sentences=1200)
    run.submit(cluster, "rollback", "ExactWordCount", "topology.workers=4", "squall.test.rate=120")
    poll_for(lambda: sum(run.committed().values()) > 300, timeout=40, message="checkpoints commit")
    (run.dir / "kill-in-prepare").write_text("")
    # When that worker dies between prepare and commit
    poll_for(lambda: (run.dir / "killed-in-prepare").exists(), timeout=30, message="the kill in prepare")
    txid = int((run.dir / "killed-in-prepare").read_text())
    # Then the prepared checkpoint is rolled back (the spout rewinds to the last commit),
    # and the final state is exact all the same
    poll_for(lambda: len(run.restores()) >= 2, timeout=40, message="a rollback rewound the spout")
    poll_for(lambda: sum(run.committed().values()) >= run.total, timeout=60, message="every word committed")
    assert run.committed() == run.expected
    assert txid >= 1
