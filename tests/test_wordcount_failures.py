"""A word count whose bolts fail 10% of tuples at random loses nothing.

The spout is reliable and replays on fail; the split and count bolts each
fail one tuple in ten.  At the end every sentence was acked exactly once at
the spout, every word was counted at least once, and a sink that ignores
replays it has already seen holds the exact counts.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from typing import Any

from squall import Bolt, FailedException, Grouping, LocalCluster, Topology
from squall.testing import poll_for
from tests.helpers import Broker, BrokerSpout

VOCAB = [f"w{i}" for i in range(50)]


def test_word_count_with_random_failures_is_exact() -> None:
    rng = random.Random(7)
    sentences = [(i, " ".join(rng.choices(VOCAB, k=8))) for i in range(1500)]
    expected = Counter(w for _, s in sentences for w in s.split())
    broker = Broker(sentences)
    lock = threading.Lock()
    at_least_once: Counter[str] = Counter()
    seen: set[tuple[int, int]] = set()
    exact: Counter[str] = Counter()
    failures = Counter()

    class Split(Bolt):
        outputs = ["id", "index", "word"]

        def initialize(self, conf: dict[str, Any], context: Any) -> None:
            self.rng = random.Random(context.task_id)

        def process(self, tup: Any) -> None:
            words = tup.values.body.split()
            fail_at = self.rng.randrange(len(words)) if self.rng.random() < 0.1 else None
            for i, word in enumerate(words):
                if i == fail_at:  # fail midway: some children are already out
                    failures["split"] += 1
                    raise FailedException("split failed at random")
                self.emit([tup.values.id, i, word])

    class Count(Bolt):
        def initialize(self, conf: dict[str, Any], context: Any) -> None:
            self.rng = random.Random(1000 + context.task_id)

        def process(self, tup: Any) -> None:
            if self.rng.random() < 0.1:
                failures["count"] += 1
                raise RuntimeError("count failed at random")
            key = (tup.values.id, tup.values.index)
            with lock:
                at_least_once[tup.values.word] += 1
                if key not in seen:  # a replay of a word already counted
                    seen.add(key)
                    exact[tup.values.word] += 1

    class WordCount(Topology):
        config = {"topology.max.spout.pending": 200}
        sentences = type("Sentences", (BrokerSpout,), {"broker": broker}).spec()
        split = Split.spec(inputs=[sentences], par=2)
        count = Count.spec(inputs={split: Grouping.fields("word")}, par=2)

    with LocalCluster() as cluster:
        cluster.submit("wc", WordCount)
        poll_for(lambda: broker.done, timeout=60, message="every sentence acked")
        stats = cluster.stats("wc")
        errors = cluster.errors("wc")

    assert failures["split"] > 50 and failures["count"] > 500  # failures really happened
    assert sorted(broker.acks) == [i for i, _ in sentences]
    assert set(broker.acks.values()) == {1}  # acked exactly once each
    assert all(at_least_once[w] >= n for w, n in expected.items())
    assert exact == expected
    assert stats["sentences"]["failed"] >= failures["split"]
    assert not any(e.fatal for e in errors)
    assert all(e.component == "count" for e in errors)  # FailedException is not an error
