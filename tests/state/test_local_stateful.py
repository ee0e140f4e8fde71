"""Stateful word counts in local mode (real executors, one process)."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from squall import Bolt, Grouping, Topology
from squall.errors import FailedException
from squall.local.cluster import LocalCluster
from squall.state import CheckpointedSpout, StatefulBolt
from squall.testing import poll_for
from tests.helpers import committed_states

pytestmark = pytest.mark.timeout(60)

SENTENCES = [f"s{i % 13} common w{i % 7}" for i in range(3000)]
EXPECTED = Counter(w for s in SENTENCES for w in s.split())


class Probe:
    """What the test sees of the run (one process: module state is shared)."""

    lock = threading.Lock()
    restores: list[Any] = []
    fail_once: set[str] = set()


class Sentences(CheckpointedSpout):
    outputs = ["sentence"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.pos = 0

    def snapshot(self) -> int:
        return self.pos

    def restore(self, position: Any) -> None:
        with Probe.lock:
            Probe.restores.append(position)
        self.pos = position or 0

    def next_tuple(self) -> None:
        if self.pos < len(SENTENCES):
            self.emit([SENTENCES[self.pos]])
            self.pos += 1


class Split(Bolt):
    outputs = ["word"]

    def process(self, tup: Any) -> None:
        for word in tup.values.sentence.split():
            self.emit([word])


class Count(StatefulBolt):
    def init_state(self, state: Any) -> None:
        self.counts = state

    def process(self, tup: Any) -> None:
        word = tup.values.word
        with Probe.lock:
            if word in Probe.fail_once:
                Probe.fail_once.discard(word)
                raise FailedException(f"{word} fails once")  # noqa: EM102 - a test's own message
        self.counts.put(word, self.counts.get(word, 0) + 1)


def committed(db: Path) -> Counter[str]:
    out: Counter[str] = Counter()
    for data in committed_states(db, "count"):
        out.update(data)
    return out


def topology(db: Path | None) -> type[Topology]:
    """``db``: the SQLite file; None: the default one, ``<squall.state.dir>/LocalCount.sqlite``."""
    class LocalCount(Topology):
        config = {"topology.state.checkpoint.interval.ms": 100,
                  **({"topology.state.provider.config": {"path": str(db)}} if db else {})}
        sentences = Sentences.spec()
        split = Split.spec(inputs=[sentences], par=2)
        count = Count.spec(inputs={split: Grouping.fields("word")}, par=2)

    return LocalCount


@pytest.fixture(autouse=True)
def _probe() -> None:
    Probe.restores.clear()
    Probe.fail_once.clear()


def test_the_committed_state_is_exact(tmp_path: Path) -> None:
    db = tmp_path / "state.sqlite"
    with LocalCluster() as cluster:
        cluster.submit("count", topology(db))
        poll_for(lambda: sum(committed(db).values()) >= sum(EXPECTED.values()), timeout=30,
                 message="every word committed")
        assert not cluster.errors("count")
    assert committed(db) == EXPECTED
    assert Probe.restores == [None]  # one start, no rollback


def test_a_failed_tuple_of_a_checkpointed_spout_rolls_back_instead_of_being_lost(tmp_path: Path) -> None:
    # Given a counter that fails the word "common" once, on a tuple the acker does not track
    Probe.fail_once.add("common")
    db = tmp_path / "state.sqlite"
    with LocalCluster() as cluster:
        cluster.submit("count", topology(db))
        poll_for(lambda: sum(committed(db).values()) >= sum(EXPECTED.values()), timeout=30,
                 message="every word committed")
    # Then the checkpoint after it did not commit: the spout rewound, and nothing is missing
    assert not Probe.fail_once
    assert len(Probe.restores) >= 2
    assert committed(db) == EXPECTED


def test_a_second_run_resumes_from_the_committed_position(tmp_path: Path) -> None:
    db = tmp_path / "state.sqlite"
    with LocalCluster() as cluster:
        cluster.submit("count", topology(db))
        poll_for(lambda: sum(committed(db).values()) > 500, timeout=30, message="a commit")
    first = Probe.restores[:]
    with LocalCluster() as cluster:
        cluster.submit("count", topology(db))
        poll_for(lambda: sum(committed(db).values()) >= sum(EXPECTED.values()), timeout=30,
                 message="every word committed")
    assert first == [None] and Probe.restores[1] > 0
    assert committed(db) == EXPECTED


def test_a_restart_under_another_name_resumes_the_same_state(tmp_path: Path) -> None:
    # Given a run of LocalCount, submitted as "count", that committed part of its input
    # to the default SQLite file
    conf = {"squall.state.dir": str(tmp_path)}
    db = tmp_path / "LocalCount.sqlite"  # named after the definition, not the submitted name
    with LocalCluster(conf) as cluster:
        cluster.submit("count", topology(None))
        poll_for(lambda: sum(committed(db).values()) > 500, timeout=30, message="a commit")
    # When the same definition is submitted again under another name
    with LocalCluster(conf) as cluster:
        cluster.submit("count-renamed", topology(None))
        poll_for(lambda: sum(committed(db).values()) >= sum(EXPECTED.values()), timeout=30,
                 message="every word committed")
    # Then it resumed from the first run's committed position and state (state is keyed by
    # the definition's name, as on a cluster): every word counted once, none twice
    assert Probe.restores[0] is None and Probe.restores[1] > 0
    assert committed(db) == EXPECTED
    assert sorted(p.name for p in tmp_path.glob("*.sqlite")) == ["LocalCount.sqlite"]


def test_the_redis_provider_keeps_the_same_exact_state(tmp_path: Path) -> None:
    from squall.contrib.redis.devserver import DevRedis
    from squall.contrib.redis.store import RedisStore

    with DevRedis(tmp_path / "redis") as redis:
        conf = {"topology.state.provider": "redis", "topology.state.provider.config": {"url": redis.url}}
        with LocalCluster() as cluster:
            cluster.submit("count", topology(tmp_path / "unused.sqlite"), conf)
            store = RedisStore(redis.url, "checkpointed:LocalCount")  # the definition's name
            keys = [f"count/{task}/committed" for task in range(1, 40)]

            def counts() -> Counter[str]:
                out: Counter[str] = Counter()
                for record in store.get_many(keys):
                    if record:
                        out.update(record["data"])
                return out

            poll_for(lambda: sum(counts().values()) >= sum(EXPECTED.values()), timeout=30,
                     message="every word committed in Redis")
            assert counts() == EXPECTED
            store.close()
    assert not (tmp_path / "unused.sqlite").exists()
