"""Storm's exactly-once, chaos-tested: a transactional word count on a real
cluster (ZooKeeper, nimbus, 2 supervisors, 4 workers) commits into SQLite and
stays exact while workers are SIGKILLed, nimbus dies, ZooKeeper restarts and
a whole node goes down."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from squall.state import SQLiteStore, TransactionalMap, TransactionalValue
from squall.testing import poll_for
from squall.transactional.output import coordinator_name
from tests.cluster.conftest import (
    REPO,
    TOPOLOGIES,
    VOCAB,
    WordCountRun,
    busy_workers,
    nimbus_answers,
    squall_cli,
    worker_logs,
    workers_running,
)
from tests.helpers import stay

TOPOLOGY = str(TOPOLOGIES / "transactional_wordcount.py")


class Committed:
    """What the committers wrote: counts in SQLite, commit logs per process."""

    def __init__(self, run: WordCountRun) -> None:
        self.run = run
        self.path = run.dir / "counts.sqlite"

    def counts(self) -> dict[str, int]:
        if not self.path.exists():
            return {}
        with SQLiteStore(self.path) as store:
            values = TransactionalMap(store).get_many(VOCAB)
        return {w: n for w, n in zip(VOCAB, values, strict=True) if n}

    def words(self) -> int:
        return sum(self.counts().values())

    def txids(self) -> list[list[int]]:
        """Per committer process and task, the txids committed, in order."""
        out = []
        for path in sorted(self.run.dir.glob("commits-*.log")):
            out.append([int(line.split()[0]) for line in path.read_text().splitlines() if line.strip()])
        return out


def test_transactional_word_count_stays_exact_through_chaos(make_cluster: Any, tmp_path: Path) -> None:
    # Given a cluster of 2 nodes with 3 slots each, and a transactional word count
    # on 4 workers whose committers write to SQLite
    cluster = make_cluster(supervisors=2, slots=3)
    run = WordCountRun(tmp_path / "tx", sentences=2400, seed=7)  # 120 batches, 4 a second at most
    committed = Committed(run)
    total = sum(run.expected.values())
    squall_cli(cluster, "submit", TOPOLOGY, "--name", "txwc", "--conf", f"squall.test.dir={run.dir}",
               "--conf", "topology.workers=4", "--conf", "squall.test.batches.per.sec=4")
    poll_for(lambda: len(cluster.worker_pids()) == 4, timeout=60, message="4 workers up")

    def progress(message: str, timeout: float = 60) -> None:
        before = committed.words()
        poll_for(lambda: committed.words() > before, timeout=timeout, message=message)

    progress("first commits")
    # (its state keyed by the name it was submitted under, not its class's: another
    # submission of the same class must not share, or fight over, its transactions)
    assert 'transactional_id=txwc' in worker_logs(cluster)
    # When a worker that counts every batch, but does not coordinate them, freezes
    # (SIGSTOP) past the message timeout, the batches in flight there time out and the
    # coordinator replays them; then it is SIGKILLed.  (A worker killed outright between
    # batches often loses nothing: ZeroMQ holds what is sent to it until it is back.)
    coordinator = coordinator_name("sentences")
    coordinating = workers_running(cluster, "txwc", lambda c: c == coordinator)
    counting = workers_running(cluster, "txwc", lambda c: c == "partial")
    slot, pid = min(set(counting.items()) - set(coordinating.items()))
    os.kill(pid, signal.SIGSTOP)
    try:
        poll_for(lambda: "transactions replayed" in worker_logs(cluster), timeout=60,
                 message="the coordinator replayed the batches the frozen worker held")
    finally:
        os.kill(pid, signal.SIGKILL)
    poll_for(lambda s=slot, p=pid: cluster.worker_pids().get(s) not in (None, p), timeout=30,
             message=f"worker on {slot} restarted")
    progress("commits after the frozen worker was killed")
    # and then random workers are SIGKILLed, one after the other
    rng = random.Random(3)
    for _ in range(3):
        slot, pid = rng.choice(sorted(busy_workers(cluster, "txwc").items()))
        os.kill(pid, signal.SIGKILL)
        poll_for(lambda s=slot, p=pid: cluster.worker_pids().get(s) not in (None, p), timeout=30,
                 message=f"worker on {slot} restarted")
        progress("commits after a worker was killed")
    # and nimbus dies: the topology goes on committing without it
    cluster.kill_process("nimbus-0")
    progress("commits without nimbus")
    cluster.start_nimbus(0)
    poll_for(lambda: nimbus_answers(cluster), timeout=60, message="nimbus back")
    # and ZooKeeper (which holds the transactions' state) goes down and comes back
    cluster.zk.stop()
    assert stay(lambda: len(cluster.worker_pids()) == 4, 3.0)  # no worker dies of the outage
    cluster.start_zookeeper()
    progress("commits after ZooKeeper restarted", timeout=90)
    # and a whole node dies with its workers: nimbus moves them to the other node
    cluster.kill_supervisor_node(0)
    progress("commits after a node died", timeout=90)

    assert committed.words() < total, "the data ran out before the chaos did: give it more"
    # Then every word is committed exactly once
    poll_for(lambda: committed.words() >= total, timeout=120,
             message=f"all {total} words committed (now {committed.words()})")
    assert committed.counts() == dict(run.expected)
    # and each committer committed its txids in strictly increasing order, and all of them
    logs = committed.txids()
    for txids in logs:
        firsts = list(dict.fromkeys(txids))
        assert firsts == sorted(firsts), f"commits out of order: {firsts}"
    done = sorted({t for txids in logs for t in txids})
    assert done == list(range(1, done[-1] + 1))




def test_the_documented_global_count_example_runs_on_a_cluster(make_cluster: Any, tmp_path: Path) -> None:
    # Given a dev cluster, when docs/transactional.md's command submits the seed's global count
    # (with --config before the command, as the page writes it)
    cluster = make_cluster(supervisors=1, slots=2)
    db = tmp_path / "global-count.sqlite"
    proc = subprocess.run([sys.executable, "-m", "squall.cli", "--config", str(cluster.config_file),
                           "submit", str(REPO / "examples" / "transactional" / "global_count.py"),
                           "--conf", f"example.db={db}", "--conf", "topology.workers=2"],
                          capture_output=True, text=True, timeout=120, cwd=REPO, check=False)
    assert proc.returncode == 0, proc.stderr

    # Then its committer, on another worker process than the counters, commits the
    # exact total of the example's 16 tuples into SQLite
    def total() -> Any:
        if not db.exists():
            return None
        with SQLiteStore(db, namespace="TransactionalGlobalCount") as store:
            return TransactionalValue(store, "global-count").get()

    poll_for(lambda: total() == 16, timeout=60, message=f"the global count committed (now {total()})")
    # and the committer's own metric reaches nimbus with the workers' heartbeats
    def commits() -> int:
        info = cluster.api("GET", "topologies/TransactionalGlobalCount")
        return sum(t["counters"].get("commits", 0) for t in info.get("metrics", {}).get("total", {}).values())

    poll_for(lambda: commits() >= 2, timeout=60, message="the committer's metric in nimbus's topology info")
    # and nimbus's windows hold Storm's numbers per component, from the workers' statistics
    def executed() -> int:
        info = cluster.api("GET", "topologies/TransactionalGlobalCount")
        return info["components"].get("partial", {}).get("executed", 0)

    poll_for(lambda: executed() > 0, timeout=60, message="the batch bolt's tuples in nimbus's window")
