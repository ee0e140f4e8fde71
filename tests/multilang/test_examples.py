"""examples/multilang runs as it is: a Python-adapter spout and a Node.js split bolt,
children started in the example's resources/ directory."""

from __future__ import annotations

import os

from squall.cli.args import load_topology
from squall.testing import poll_for
from tests.multilang.harness import NODE, running, shells

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "multilang", "wordcount.py")


def test_multilang_word_count_example_counts_every_word() -> None:
    assert NODE is not None, "node is required for the Node.js multilang example"
    topology = load_topology(EXAMPLE)
    with running(topology, "example", {"sentences.limit": 300}) as runner:
        poll_for(lambda: runner.stats().get("sentences", {}).get("acked", 0) == 300, 20,
                 "300 sentences acked")
        poll_for(runner.idle, 5, "the topology to go idle")
        stats = runner.stats()
        split = shells(runner, "split")
        counted = sum(sum(b.bolt.counts.values()) for w in runner.workers for e in w.executors
                      if e.component == "count" for b in e.bolts.values())
    assert stats["sentences"]["failed"] == 0 and list(runner.errors) == []
    assert counted == 300 * 6
    resources = os.path.realpath(os.path.join(os.path.dirname(EXAMPLE), "resources"))
    assert len(split) == 2 and all(os.path.realpath(s.settings.cwd) == resources for s in split)
