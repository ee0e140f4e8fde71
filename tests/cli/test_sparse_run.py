"""A project ``squall sparse quickstart`` writes -- streamparse's layout, ``from streamparse
import ...`` throughout, files unchanged -- runs with ``squall sparse run``, and counts right."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

from squall import LocalCluster
from squall.cli.args import load_topology
from squall.cli.sparse_project import invocation, load_project
from squall.cli.sparse_quickstart import quickstart
from squall.testing import poll_for


def test_sparse_run_runs_the_quickstart_project(tmp_path: Path) -> None:
    root = quickstart("wordcount", tmp_path)
    command = [sys.executable, "-m", "squall.cli", "--log-level", "info", "sparse", "run", "-t", "4"]
    proc = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    # squall local's stats table, with the project's components by their attribute names
    assert "--- wordcount after" in out
    assert "word_spout" in out and "count_bolt" in out
    # streamparse's line, logged through self.logger by the quickstart's bolt
    assert "counted [1,000] words" in out
    assert "Traceback" not in out


def test_the_quickstart_counts_each_word_as_streamparses_does(tmp_path: Path, monkeypatch: Any) -> None:
    root = quickstart("wordcount", tmp_path)
    monkeypatch.chdir(root)
    monkeypatch.syspath_prepend(str(root / "src"))
    inv = invocation(load_project(root), None, None, {}, local=True)
    topology = load_topology(str(inv.file))
    seen: dict[str, list[int]] = defaultdict(list)
    lock = threading.Lock()

    def capture(component: str, stream: str, values: Any) -> None:
        if component == "count_bolt":
            with lock:
                seen[values[0]].append(values[1])

    with LocalCluster() as cluster:
        cluster.submit("wordcount", topology, {k: v for k, v in inv.conf.items()
                                               if k != "topology.acker.executors"}, capture=capture)
        poll_for(lambda: all(len(seen[w]) >= 50 for w in ("dog", "cat", "zebra", "elephant")), timeout=60,
                 message="every word counted")
    # one count task per word (fields grouping): each emits its running count, dogs by ten
    with lock:
        for word, counts in seen.items():
            step = 10 if word == "dog" else 1
            assert counts == list(range(step, step * (len(counts) + 1), step)), word
