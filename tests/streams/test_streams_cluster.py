"""The Streams API on the dev cluster (ZooKeeper, nimbus, 2 supervisors, worker
processes, ZeroMQ between them): Storm's StateQueryExample and JoinExample, with
a worker that runs generated bolts SIGKILLed mid-run, and nothing lost."""

from __future__ import annotations

import json
import os
import random
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from squall.testing import poll_for
from tests.cluster.conftest import VOCAB, squall_cli, worker_logs, workers_running
from tests.helpers import committed_states

TOPOLOGY = Path(__file__).resolve().parent / "topologies" / "streams_examples.py"

pytestmark = pytest.mark.timeout(150)


def lines(directory: Path, pattern: str) -> list[Any]:
    return [json.loads(line) for path in sorted(directory.glob(pattern))
            for line in path.read_text().splitlines() if line.strip()]


def submit(cluster: Any, topology: str, name: str, *conf: str) -> None:
    squall_cli(cluster, "submit", str(TOPOLOGY), "--topology", topology, "--name", name,
               *(c for kv in conf for c in ("--conf", kv)))


def kill_a_worker_running(cluster: Any, topology: str, components: set[str]) -> tuple[tuple[int, int], int]:
    """SIGKILL a worker that runs a task of one of ``components`` (from the assignment);
    returns once its supervisor has started another on its slot."""
    running = workers_running(cluster, topology, lambda c: c in components)
    assert running, f"no worker runs {sorted(components)}"
    slot, pid = min(running.items())
    os.kill(pid, signal.SIGKILL)
    poll_for(lambda: cluster.worker_pids().get(slot) not in (None, pid), timeout=30,
             message=f"the worker on {slot} restarted")
    return slot, pid


def committed_counts(state_dir: Path, definition: str) -> Counter[str]:
    """update_state_by_key's counts as of each state task's last commit (keys as JSON)."""
    out: Counter[str] = Counter()
    for data in committed_states(state_dir / f"{definition}.sqlite", "state1"):
        out.update({json.loads(k): v for k, v in data.items()})
    return out


def test_state_query_counts_are_exact_through_a_worker_kill(make_cluster: Any, tmp_path: Path) -> None:
    """A CheckpointedSpout of words, repartitioned to 2 tasks, counted by
    update_state_by_key (2 tasks, SQLite state), queried by state_query (a reliable spout of
    2 tasks) once every word is committed.  The spout rewinds to the last committed
    position after the kill, and the state rolls back with it: each count is exact,
    committed and queried."""
    # Given the state query example on 2 nodes, 3 workers, words flowing
    cluster = make_cluster(supervisors=2, slots=2)
    run, state_dir = tmp_path / "run", tmp_path / "state"
    run.mkdir()
    state_dir.mkdir()
    rng = random.Random(7)
    words = rng.choices(VOCAB[:40], k=1800)
    (run / "words.json").write_text(json.dumps(words))
    expected = Counter(words)
    submit(cluster, "StreamsWordCount", "counts", f"squall.test.dir={run}", f"squall.state.dir={state_dir}",
           "topology.workers=3", "squall.test.rate=300")
    poll_for(lambda: sum(committed_counts(state_dir, "StreamsWordCount").values()) > 300, timeout=40,
             message="counts committed")
    # When a worker running the state bolt is SIGKILLed mid-run
    total = len(words)
    assert sum(committed_counts(state_dir, "StreamsWordCount").values()) < total  # words flowing
    kill_a_worker_running(cluster, "counts", {"state1"})
    # Then every word is committed, each counted exactly once
    poll_for(lambda: sum(committed_counts(state_dir, "StreamsWordCount").values()) >= total, timeout=60,
             message="every word committed")
    assert committed_counts(state_dir, "StreamsWordCount") == expected
    restores = (run / "restores.log").read_text().split()
    assert len(restores) >= 2  # the start, and a rewind after the kill
    # and state_query answers each word with its exact count, nothing for an unknown word
    queries = [*sorted(expected), "never-said"]
    (run / "queries.json.tmp").write_text(json.dumps(queries))
    (run / "queries.json.tmp").rename(run / "queries.json")  # whole when the spout sees it
    poll_for(lambda: len(set(lines(run, "acked-Queries.log"))) == len(queries), timeout=30,
             message="every query acked")
    answers = lines(run, "answers-*.log")
    assert {word: count for word, count in answers} == dict(expected)
    assert len(answers) == len(expected)  # no kill now: each query answered once
    logs = worker_logs(cluster)
    assert all(f"({word!r}, {count})" in logs for word, count in expected.items())  # print()ed


def numbers(directory: Path, name: str) -> list[int]:
    path = directory / name
    return [int(x) for x in path.read_text().split()] if path.exists() else []


TAIL = 4  # numbers past the checked ones: 2 s windows, 1 s lag, ts = n * 1000


def test_the_join_loses_nothing_through_a_worker_kill(make_cluster: Any, tmp_path: Path) -> None:
    """Squares (n, n*n) windowed and joined with cubes (n, n**3), both reliable spouts that
    replay what fails.  The windows are event time, on ``ts = n * 1000`` both spouts
    declare, so both sides of an n fall in the same window however often they are
    replayed; a value that comes back after its window ended (a replay after the kill)
    goes to the late-tuple stream, which is sinked too.  So with the join bolt's worker
    SIGKILLed mid-run: every result is right, every n is joined or reported late, a late
    n is one a spout emitted again (an n emitted once a side is joined exactly once), and
    every spout tuple is acked in the end.  (An event-time window ends only once a later
    value moves the watermark past it, as Storm's do: the spouts go on TAIL numbers past
    those checked, so that the last checked window ends.)"""
    # Given the join example on 2 nodes, 2 workers, numbers flowing
    cluster = make_cluster(supervisors=2, slots=1)
    run = tmp_path / "run"
    run.mkdir()
    n = 600
    submit(cluster, "StreamsJoin", "join", f"squall.test.dir={run}", f"squall.test.n={n + TAIL}",
           "topology.workers=2", "squall.test.rate=100")
    poll_for(lambda: len(lines(run, "joined-*.log")) > 100, timeout=40, message="joins made")
    # When the worker running the windowed join bolt is SIGKILLed mid-run
    windowed = [c["name"] for c in cluster.api("GET", "topologies/join")["definition"]["components"]
                if c["class"].endswith("WindowedProcessorBolt")]
    assert len(numbers(run, "acked-Squares.log")) < n  # numbers flowing
    kill_a_worker_running(cluster, "join", set(windowed))
    # Then every spout tuple is acked in the end
    everything = set(range(n))
    poll_for(lambda: set(numbers(run, "acked-Squares.log")) >= everything
             and set(numbers(run, "acked-Cubes.log")) >= everything, timeout=60,
             message="every square and cube acked")
    joined = lines(run, "joined-*.log")
    late = lines(run, "late-*.log")
    # every result is right, crossing as lists: [n, [n*n, n**3]] (then the window's end)
    assert all(r[:2] == [r[0], [r[0] ** 2, r[0] ** 3]] for r in joined), joined[:5]
    assert all(v in (k**2, k**3) for k, v in late), late[:5]
    # every n is joined or reported late, and only a replayed n is late
    joined_ns = {r[0] for r in joined} & everything
    late_ns = {k for k, _v in late} & everything
    assert joined_ns | late_ns == everything, sorted(everything - joined_ns - late_ns)[:20]
    emitted = Counter(numbers(run, "emitted-Squares.log")) + Counter(numbers(run, "emitted-Cubes.log"))
    replayed = {k for k, times in emitted.items() if times > 2}
    assert replayed  # the values the killed join bolt held were emitted again
    assert late_ns <= replayed
    # and an n whose square and cube were each emitted once is joined exactly once
    results = Counter(r[0] for r in joined)
    once = everything - replayed
    assert all(results[k] == 1 for k in once), sorted(k for k in once if results[k] != 1)[:20]
