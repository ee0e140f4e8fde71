"""Word count with a subprocess spout and a pystorm split bolt, in local mode:
exact counts, and no sentence lost when a child is killed mid-stream."""

from __future__ import annotations

import json
import os
import random
import signal
import threading
from collections import Counter
from typing import Any

import pytest

from squall import Bolt, Grouping, Stream, Topology
from squall.multilang import MSGPACK_SERIALIZER, ShellBolt, ShellSpout
from squall.testing import poll_for
from tests.multilang.harness import CHILDREN, PY, errors, pid_alive, running, shells

VOCABULARY = [f"w{i}" for i in range(50)]


def sentences(n: int, seed: int = 7) -> list[list[Any]]:
    rng = random.Random(seed)
    return [[f"s{i}", " ".join(rng.choices(VOCABULARY, k=5))] for i in range(n)]


class Tally:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: Counter[str] = Counter()
        self.acked: set[str] = set()
        self.failed = 0

    def count(self, word: str) -> None:
        with self.lock:
            self.counts[word] += 1

    def event(self, what: list[Any]) -> None:
        with self.lock:
            if what[0] == "ack":
                self.acked.add(what[1])
            elif what[0] == "fail":
                self.failed += 1


def word_count(tally: Tally, items: list[list[Any]], serializer: str, split_par: int = 1,
               conf: dict[str, Any] | None = None) -> type[Topology]:
    class Count(Bolt):

        def process(self, tup: Any) -> None:
            tally.count(tup.values.word)

    class Events(Bolt):
        def process(self, tup: Any) -> None:
            tally.event(json.loads(tup.values.event))

    settings = {"test.spout.items": items, "test.spout.replay": True, "topology.max.spout.pending": 100,
                **(conf or {})}
    if serializer == "msgpack":
        settings["topology.multilang.serializer"] = MSGPACK_SERIALIZER

    class WordCount(Topology):
        config = settings
        sentences = ShellSpout.spec(command=PY, script="pystorm_spout.py", args=[serializer], cwd=CHILDREN,
                                    outputs=[Stream(["sentence"]), Stream(["event"], "events")])
        split = ShellBolt.spec(command=PY, script="pystorm_split.py", args=[serializer], cwd=CHILDREN,
                               outputs=["word"], inputs=[sentences], par=split_par)
        count = Count.spec(inputs={split: Grouping.fields("word")}, par=2)
        events = Events.spec(inputs=[sentences["events"]])

    return WordCount


def expected(items: list[list[Any]]) -> Counter[str]:
    return Counter(word for _id, sentence in items for word in sentence.split())


@pytest.mark.parametrize("serializer", ["json", "msgpack"])
def test_word_count_is_exact(serializer: str) -> None:
    tally = Tally()
    items = sentences(300)
    with running(word_count(tally, items, serializer)) as runner:
        poll_for(lambda: len(tally.acked) == len(items), 20, "every sentence acked")
        poll_for(runner.idle, 5, "the topology to go idle")
        assert errors(runner) == [] and tally.failed == 0
    assert tally.counts == expected(items)


def test_killing_the_split_child_mid_stream_loses_no_sentence() -> None:
    tally = Tally()
    items = sentences(600)
    with running(word_count(tally, items, "json", split_par=2)) as runner:
        poll_for(lambda: len(tally.acked) >= 50, 10, "the stream to flow")
        victim = shells(runner, "split")[0]
        pid = victim.proc.pid
        os.kill(pid, signal.SIGKILL)
        [death] = poll_for(lambda: errors(runner, "ChildDied"), 5, "the death to be reported")
        assert "killed by signal SIGKILL" in death.error
        poll_for(lambda: len(tally.acked) == len(items), 30, "every sentence acked")
        assert not pid_alive(pid) and victim.restarts == 1
    want = expected(items)
    # At least once: every word of every sentence counted, replays may count some twice.
    assert all(tally.counts[w] >= n for w, n in want.items())


def test_killing_the_spout_child_mid_stream_loses_no_sentence() -> None:
    tally = Tally()
    items = sentences(400)
    with running(word_count(tally, items, "json")) as runner:
        poll_for(lambda: len(tally.acked) >= 50, 10, "the stream to flow")
        [spout] = shells(runner, "sentences")
        pid = spout.proc.pid
        os.kill(pid, signal.SIGKILL)
        poll_for(lambda: spout.proc is not None and spout.proc.pid != pid, 10, "a new spout child")
        # The new child starts its (in-memory) source over; acks of the old child's tuples reach it.
        poll_for(lambda: len(tally.acked) == len(items), 30, "every sentence acked")
    want = expected(items)
    assert all(tally.counts[w] >= n for w, n in want.items())
