"""Two coordinators of one transactional id at once: the double count of issue 27.

On a cluster, a worker whose slot nimbus moved can run for a few seconds
beside its replacement (its supervisor relaunched it from an assignment that
was stale by then): two coordinators of the topology, one state in
ZooKeeper.  Here the two are two LocalClusters on one real ZooKeeper, and the
interleaving that counted words twice is made to happen, not waited for:

1. the old coordinator has committed up to txid c - 1 and stands idle;
2. the replacement starts: it reads the current txid, c, processes c, and
   its committer is about to write c (held at a gate);
3. the old one goes on: without fencing it commits c, c + 1, c + 2;
4. the replacement's commit of c lands after them.  Storm's rule ("skip a
   txid already stored") sees words stored at c + 2, not c, and adds c again.

With fencing the replacement's epoch supersedes the old coordinator at step
2, so at step 3 it commits nothing and stands by; every word is counted once.
The committer here is a user's, written to Storm's documented rule by hand
(not Squall's own TransactionalMap, which also skips lower txids).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any
from uuid import uuid4

import pytest

from squall import Grouping, LocalCluster
from squall import config as config_mod
from squall.cluster.zookeeper import DevZookeeper, start_client
from squall.testing import poll_for
from squall.transactional import BatchBolt, Committer, MemoryTransactionalSpout, TransactionalTopology
from tests.cluster.topologies.transactional_wordcount import PartialCount, Split
from tests.helpers import keyring_conf
from tests.transactional.topologies import expected_counts, sentences

DATA = sentences(4, 30, seed=27)
LEDGERS: dict[str, Ledger] = {}


class Ledger:
    """The user's database both topologies commit to, and who committed what."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.table: dict[str, list[int]] = {}  # word -> [count, txid that last changed it]
        self.commits: list[tuple[str, int]] = []  # (role, txid)
        self.held: set[int] = set()  # txids the replacement's committers hold at the gate
        self.gate = threading.Event()

    def committed(self, role: str) -> list[int]:
        with self.lock:
            return [t for r, t in self.commits if r == role]

    def words(self) -> int:
        with self.lock:
            return sum(n for n, _t in self.table.values())


class StormRuleCommit(Committer, BatchBolt):
    """Adds a batch's counts, skipping each word whose stored txid is this one."""

    outputs = []

    def initialize(self, conf: dict[str, Any], context: Any, attempt: Any) -> None:
        self.ledger = LEDGERS[conf["test.ledger"]]
        self.role = conf["test.role"]
        self.txid = attempt.txid
        self.counts: Counter[str] = Counter()

    def process(self, tup: Any) -> None:
        self.counts[tup.values.word] += tup.values.count

    def finish_batch(self) -> None:
        ledger = self.ledger
        if self.role == "replacement":
            with ledger.lock:
                ledger.held.add(self.txid)
            assert ledger.gate.wait(120), "the test never opened the gate"
        with ledger.lock:
            for word, n in self.counts.items():
                stored = ledger.table.get(word)
                if stored is not None and stored[1] == self.txid:
                    continue  # a replay of a batch already applied
                ledger.table[word] = [(stored[0] if stored else 0) + n, self.txid]
            ledger.commits.append((self.role, self.txid))


class WordCount(TransactionalTopology):
    config = {"topology.max.spout.pending": 3}
    sentences = MemoryTransactionalSpout.spec(data=DATA, fields=["sentence"], take_per_batch=2, par=2)
    split = Split.spec(inputs=[sentences], par=2)
    partial = PartialCount.spec(inputs={split: Grouping.fields("word")}, par=2)
    commit = StormRuleCommit.spec(inputs={partial: Grouping.fields("word")}, par=2)


@pytest.fixture
def ledger() -> Iterator[tuple[str, Ledger]]:
    name = uuid4().hex
    LEDGERS[name] = Ledger()
    yield name, LEDGERS[name]
    LEDGERS[name].gate.set()
    del LEDGERS[name]


def in_flight(zookeeper: DevZookeeper, base: str) -> list[int]:
    """The txids a coordinator started and has not committed, as its state in ZooKeeper says
    (metadata is stored before a batch goes out, the current txid after a commit)."""
    client = start_client(config_mod.merge({"storm.zookeeper.servers": ["127.0.0.1"],
                                            "storm.zookeeper.port": zookeeper.port,
                                            **keyring_conf(zookeeper.data_dir.parent)}))
    try:
        path = f"{base}/coordinator/currtx"
        current = int(client.get(path)[0]) if client.exists(path) else 1
        return [int(t) for t in client.get_children(f"{base}/coordinator/meta") if int(t) >= current]
    finally:
        client.stop()
        client.close()


def coordinator_gauges(cluster: LocalCluster, name: str) -> dict[str, Any]:
    """The coordinator's gauges: epoch, standby, in_flight (none before fencing existed:
    the test then runs the same steps, and its count tells what happened)."""
    tasks = cluster.metrics(name).get("sentences/coordinator", {})
    return next(iter(tasks.values()), {}).get("gauges", {})


def test_a_replacement_coordinator_supersedes_the_old_one_and_nothing_is_counted_twice(
        zookeeper: DevZookeeper, ledger: tuple[str, Ledger]) -> None:
    name, book = ledger
    root = f"/two-{name}"
    conf = {"transactional.zookeeper.servers": ["127.0.0.1"], "transactional.zookeeper.port": zookeeper.port,
            "transactional.zookeeper.root": root, "topology.transactional.id": "words",
            **keyring_conf(zookeeper.data_dir.parent)}
    total = sum(expected_counts(DATA).values())
    with LocalCluster(conf=conf) as old_cluster, LocalCluster(conf=conf) as new_cluster:
        # Given the old coordinator, which committed a few transactions and stands idle
        old_cluster.submit("old", WordCount, {"test.ledger": name, "test.role": "old"})
        poll_for(lambda: len(book.committed("old")) >= 2, timeout=60, message="the old topology's commits")
        old_cluster.deactivate("old")
        poll_for(lambda: not in_flight(zookeeper, f"{root}/words"), timeout=60,
                 message="the old coordinator's transactions all committed")
        following = max(book.committed("old")) + 1
        # When a replacement starts and is about to commit the next txid
        new_cluster.submit("new", WordCount, {"test.ledger": name, "test.role": "replacement"})
        poll_for(lambda: following in book.held, timeout=60,
                 message=f"the replacement's committer holding txid {following}")
        # and the old coordinator goes on: it commits later txids, or finds itself superseded
        old_cluster.activate("old")

        def old_moved_on() -> bool:
            old = book.committed("old")
            standing_by = coordinator_gauges(old_cluster, "old").get("standby")
            return (bool(old) and max(old) >= following + 2) or bool(standing_by)

        poll_for(old_moved_on, timeout=60, message="the old coordinator committing on, or standing by")
        # and only then does the replacement's commit land
        book.gate.set()
        poll_for(lambda: book.words() >= total, timeout=90,
                 message=f"every word committed ({book.words()} of {total})")
        # Then every word is counted exactly once
        got, want = Counter({w: n for w, (n, _t) in book.table.items()}), Counter(expected_counts(DATA))
        assert (sum((got - want).values()), sum((want - got).values())) == (0, 0), "(counted twice, lost)"
        assert got == want
        # because the old coordinator committed nothing once the replacement had started
        assert max(book.committed("old")) < following
        assert coordinator_gauges(old_cluster, "old")["standby"] == 1
        old_epoch = coordinator_gauges(old_cluster, "old")["epoch"]
        assert coordinator_gauges(new_cluster, "new")["epoch"] > old_epoch
        # and the replacement committed each txid from there on, in order
        mine = list(dict.fromkeys(book.committed("replacement")))
        assert mine == list(range(following, following + len(mine)))
        # And when the replacement stops, the old one takes over again, with an epoch of its own
        new_epoch = coordinator_gauges(new_cluster, "new")["epoch"]
        new_cluster.kill("new")
        poll_for(lambda: coordinator_gauges(old_cluster, "old")["standby"] == 0, timeout=30,
                 message="the old coordinator taking over")
        assert coordinator_gauges(old_cluster, "old")["epoch"] > new_epoch
        assert {w: n for w, (n, _t) in book.table.items()} == expected_counts(DATA)
