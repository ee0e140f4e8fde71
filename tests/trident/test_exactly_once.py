"""Trident's promise: a persistent aggregate over a transactional or opaque map counts each
tuple once, even when a batch fails after its state was updated and is replayed under the
same txid (Trident-state.md's walk-through), and a FailedException anywhere fails the whole
batch, which feed() waits out."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from squall import LocalCluster
from squall.drpc import LocalDRPC
from squall.errors import FailedException
from squall.trident import Count, Filter, Function, MapGet, MemoryMapState, StateType, Sum, TridentTopology
from squall.trident.testing import FeederBatchSpout, Split

FAILURES: dict[str, int] = {}
LOCK = threading.Lock()


class FailOnce(Filter):
    """Fails the batch (FailedException) the first time it sees ``word``, per ``key``."""

    def __init__(self, key: str, word: str) -> None:
        super().__init__()
        self.key, self.word = key, word

    def is_keep(self, tup: Any) -> bool:
        if tup[0] == self.word:
            with LOCK:
                seen = FAILURES.get(self.key, 0)
                FAILURES[self.key] = seen + 1
            if seen == 0:
                raise FailedException(f"the first {self.word!r} fails its batch")
        return True


class SplitFailingOnce(Function):
    """Split, but the first sentence holding ``word`` fails its batch before anything is stored."""

    def __init__(self, key: str, word: str) -> None:
        super().__init__()
        self.fail = FailOnce(key, word)

    def execute(self, tup: Any, collector: Any) -> None:
        for word in tup[0].split(" "):
            if word:
                self.fail.is_keep(_One(word))
                collector.emit([word])


class _One:
    def __init__(self, value: Any) -> None:
        self.value = value

    def __getitem__(self, i: int) -> Any:
        return self.value


@pytest.fixture
def run() -> Iterator[tuple[LocalCluster, LocalDRPC]]:
    FAILURES.clear()
    with LocalCluster() as cluster, LocalDRPC() as drpc:
        yield cluster, drpc


@pytest.mark.parametrize("kind", [StateType.OPAQUE, StateType.TRANSACTIONAL])
def test_a_batch_replayed_after_its_commit_is_counted_once(run: tuple[LocalCluster, LocalDRPC],
                                                           kind: Any) -> None:
    cluster, drpc = run
    topo = TridentTopology()
    feeder = FeederBatchSpout(["sentence"])
    counts = (topo.new_stream("tester", feeder).each(["sentence"], Split(), ["word"]).group_by(["word"])
              .persistent_aggregate(MemoryMapState.factory(kind), Count(), ["count"]).parallelism_hint(3))
    # After the state was updated, in the commit phase: the first "the" it sees fails the batch
    counts.new_values_stream().each(["word", "count"], FailOnce(f"after-{kind}", "the"))
    (topo.new_drpc_stream("words", drpc).each(["args"], Split(), ["word"]).group_by(["word"])
     .state_query(counts, ["word"], MapGet(), ["count"])
     .aggregate(["count"], Sum(), ["sum"]).project(["sum"]))
    cluster.submit("exact", topo.build())
    feeder.feed([["the cow"], ["the moon"]])  # its commit fails once, then passes
    assert FAILURES[f"after-{kind}"] >= 2
    assert json.loads(drpc.execute("words", "the")) == [[2]]
    assert json.loads(drpc.execute("words", "cow moon")) == [[2]]
    feeder.feed([["the end"]])
    assert json.loads(drpc.execute("words", "the")) == [[3]]


def test_a_failure_before_the_state_fails_the_batch_and_it_is_counted_once(
        run: tuple[LocalCluster, LocalDRPC]) -> None:
    cluster, drpc = run
    topo = TridentTopology()
    feeder = FeederBatchSpout(["sentence"])
    counts = (topo.new_stream("tester", feeder)
              .each(["sentence"], SplitFailingOnce("before", "boom"), ["word"])
              .group_by(["word"]).persistent_aggregate(MemoryMapState.factory(), Count(), ["count"]))
    (topo.new_drpc_stream("words", drpc).each(["args"], Split(), ["word"]).group_by(["word"])
     .state_query(counts, ["word"], MapGet(), ["count"])
     .aggregate(["count"], Sum(), ["sum"]).project(["sum"]))
    cluster.submit("exact", topo.build())
    feeder.feed([["a boom"], ["a b"]])
    assert FAILURES["before"] >= 2
    assert json.loads(drpc.execute("words", "a boom b")) == [[4]]
