"""A transactional topology's spout, plain bolts and batch bolts run inside
wrappers (the coordinator spout, the emitter, the coordinated bolt); each is
still built from the recipe a Flux file's constructorArgs / properties /
configMethods leave in its options, as an unwrapped component is."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from squall import Grouping, LocalCluster
from squall.flux.objects import BUILDER, BUILDER_KEY, CONSTRUCT_OPTION
from squall.testing import poll_for
from squall.transactional import TransactionalTopology
from tests.transactional.topologies import CommitCounts, PartialCount, Sentences, Split, sentences

pytestmark = pytest.mark.timeout(60)

MOD = "tests.transactional.test_construct"
DATA = sentences(2, 12, seed=7)


class RepeatingSentences(Sentences):
    """Emits each sentence ``times`` (a constructor arg) times."""

    def __init__(self, times: int = 1) -> None:
        super().__init__()
        self.times = times

    def _emit_range(self, attempt: Any, emit: Any, partition: int, start: int, end: int) -> None:
        for _ in range(self.times):
            super()._emit_range(attempt, emit, partition, start, end)


class FirstWords(Split):
    """Splits only the first ``keep`` (a constructor arg) words of a sentence."""

    def __init__(self, keep: int = 5) -> None:
        super().__init__()
        self.keep = keep

    def process(self, tup: Any) -> None:
        for word in tup.values.sentence.split()[:self.keep]:
            self.emit([tup.values[0], word])


class WeightedCount(PartialCount):
    """Counts each word ``weight`` (a property, scaled by a config method) at a time."""

    weight = 1

    def scale_by(self, factor: int) -> None:
        self.weight *= factor

    def process(self, tup: Any) -> None:
        self.counts[tup.values.word] += self.weight


def recipe(cls: type, **steps: Any) -> dict[str, Any]:
    return {CONSTRUCT_OPTION: {"class": f"{MOD}:{cls.__name__}", BUILDER_KEY: BUILDER, **steps}}


class Constructed(TransactionalTopology):
    config = {"topology.max.spout.pending": 3}
    spout = RepeatingSentences.spec(data=DATA, fields=["sentence"], take_per_batch=4, par=2,
                                    **recipe(RepeatingSentences, args=[2]))
    split = FirstWords.spec(inputs=[spout], par=2, **recipe(FirstWords, args=[3]))
    partial = WeightedCount.spec(inputs={split: Grouping.fields("word")}, par=2,
                                 **recipe(WeightedCount, properties=[["weight", 5]],
                                          calls=[["scale_by", [3]]]))
    commit = CommitCounts.spec(inputs={partial: Grouping.fields("word")}, par=2)


def test_wrapped_transactional_components_are_built_from_their_recipes(run: Any) -> None:
    r = run()
    # Each sentence twice (the spout's constructor arg), its first 3 words (the plain bolt's),
    # each counted 5 * 3 (the batch bolt's property and config method)
    expected = Counter[str]()
    for part in DATA:
        for (s,) in part:
            for word in s.split()[:3]:
                expected[word] += 2 * 5 * 3
    with LocalCluster() as cluster:
        cluster.submit("constructed", Constructed, {"test.run": r.name})
        poll_for(lambda: r.counts() == dict(expected), timeout=30,
                 message=f"the weighted counts (now {r.counts()})")
        assert not cluster.errors("constructed")
