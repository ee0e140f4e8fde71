"""Storm's statistics of a running topology, per component over a window: local
mode here; the cluster path (heartbeats -> ZooKeeper -> nimbus) in tests/cluster."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from squall import LocalCluster
from squall.testing import poll_for

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from wordcount import WordCount  # noqa: E402 - the example, as users run it


def test_the_word_count_shows_storms_numbers_per_component() -> None:
    with LocalCluster() as cluster:
        runner = cluster.submit("wc", WordCount)
        runner.component_stats()  # the first report starts the windows
        stats = poll_for(lambda: ((s := runner.component_stats("600"))["count"]["executed"] > 1000
                                  and s["sentences"]["acked"] > 0 and s),
                         timeout=30, message="executed tuples and acked trees in the window")
    split, count, spout = stats["split"], stats["count"], stats["sentences"]
    # split emits 8 words per sentence it executes; each goes to one task of count
    assert split["emitted"] >= 7 * split["executed"]
    assert split["transferred"] == split["emitted"]
    assert spout["acked"] > 0 and float(spout["completeLatency"]) > 0
    # (the count's execute latency can be under the 0.5 µs its 3 decimals of a ms show)
    assert float(split["executeLatency"]) > 0 and float(count["executeLatency"]) >= 0
    assert 0 < count["capacity"] <= 1.5
    assert split["executors"] == 2 and count["executors"] == 2
    # the paper's progress metric: acked trees, for a spout that reports none of its own
    assert spout["progress"] == spout["acked"]


def test_an_unknown_window_is_refused() -> None:
    with LocalCluster() as cluster:
        runner = cluster.submit("wc", WordCount)
        with pytest.raises(ValueError, match="window must be one of"):
            runner.component_stats("60")
