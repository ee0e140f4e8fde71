"""Transactional topologies in local mode: exact counts through injected
failures, strictly ordered commits, pipelining, the opaque case, and state
that outlives a kill.  Real workers, real queues, the real acker."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from squall import FakeClock, LocalCluster
from squall.state import OpaqueValue
from squall.testing import poll_for
from squall.worker.worker import Worker
from tests.helpers import stay
from tests.transactional.topologies import (
    NUMBERS,
    GlobalTotal,
    OpaqueSum,
    Run,
    WordCount,
    expected_counts,
)


def assert_strictly_ordered(r: Run) -> None:
    """Each committer task saw its successful commits in strictly increasing
    txid order, and every txid from 1 to the last one was committed."""
    txids = r.committed_txids()
    firsts = list(dict.fromkeys(txids))  # first successful commit of each txid, in order
    assert firsts == sorted(firsts), f"commits out of order: {firsts}"
    assert firsts == list(range(1, len(firsts) + 1)), f"a txid was never committed: {firsts}"


def test_word_count_is_exact_without_failures(run: Any) -> None:
    r = run()
    expected = expected_counts(WordCount.definition().components["spout"].options["spout_options"]["data"])
    with LocalCluster() as cluster:
        cluster.submit("wc", WordCount, {"test.run": r.name})
        poll_for(lambda: r.counts() == expected, timeout=30, message="exact word counts")
        assert not cluster.errors("wc")
    assert_strictly_ordered(r)


@pytest.mark.parametrize("workers", [1, 3])
def test_word_count_is_exact_through_injected_failures(run: Any, workers: int) -> None:
    # Given failures everywhere: batch bolts failing in process and finish_batch,
    # committers failing before and after their write, emitters raising
    r = run(process_failure=0.05, finish_failure={"p": 0.05, "txids": [2]},
            commit_failure_before={"p": 0.15, "txids": [3]}, commit_failure_after={"p": 0.15, "txids": [4]},
            emitter_error={"p": 0.05, "txids": [5]})
    data = WordCount.definition().components["spout"].options["spout_options"]["data"]
    with LocalCluster() as cluster:
        # When the word count runs to the end (across workers: tuples and attempts cross the wire)
        runner = cluster.submit("wc", WordCount, {"test.run": r.name, "topology.workers": workers})
        poll_for(lambda: r.counts() == expected_counts(data), timeout=60,
                 message=f"exact counts (injected so far: {dict(r.injected)})")
        # Then every kind of failure happened, the counts are exact all the same,
        assert {"finish_failure", "commit_failure_before", "commit_failure_after",
                "emitter_error"} <= set(r.injected)
        # commits came in strictly increasing txid order with none missing,
        assert_strictly_ordered(r)
        # ordinary errors were reported, and no worker died for them
        reported = {e.error for e in cluster.errors("wc")}
        assert any("injected after the write" in e for e in reported)
        assert any("injected emitter error" in e for e in reported)
        assert not any(e.fatal for e in cluster.errors("wc"))
        assert runner.restarts == 0


def test_a_replayed_partitioned_batch_is_identical_to_its_first_emission(run: Any) -> None:
    r = run(commit_failure_before={"p": 0.3, "txids": [1, 2]}, finish_failure=0.1)
    data = WordCount.definition().components["spout"].options["spout_options"]["data"]
    with LocalCluster() as cluster:
        cluster.submit("wc", WordCount, {"test.run": r.name})
        poll_for(lambda: r.counts() == expected_counts(data), timeout=60, message="exact counts")
    by_txid: dict[int, list[Counter[Any]]] = {}
    for (txid, _attempt), values in r.emitted.items():
        by_txid.setdefault(txid, []).append(Counter(values))
    replayed = {t: batches for t, batches in by_txid.items() if len(batches) > 1}
    assert replayed, "no transaction was replayed: the test injected nothing"
    for txid, batches in replayed.items():
        assert all(b == batches[0] for b in batches), f"txid {txid} replayed a different batch"


def test_processing_is_pipelined_while_a_commit_waits(run: Any) -> None:
    # Given a committer whose commits are held back
    r = run()
    r.commit_gate.clear()
    with LocalCluster() as cluster:
        cluster.submit("wc", WordCount, {"test.run": r.name, "topology.max.spout.pending": 3})
        # Then while txid 1 cannot commit, txids 2 and 3 are processed (their
        # partial counts finish), and nothing commits
        poll_for(lambda: {1, 2, 3} <= set(r.partials), timeout=20, message="three batches processed")
        assert not r.commits
        assert 4 not in r.partials  # at most topology.max.spout.pending in flight
        # When commits may go on, they do, in order
        r.commit_gate.set()
        poll_for(lambda: len(set(r.committed_txids())) >= 4, timeout=20, message="commits resume")
    assert_strictly_ordered(r)


def test_a_lost_tuple_times_the_batch_out_and_it_is_replayed(run: Any, monkeypatch: Any) -> None:
    # Given a fake clock (timeouts move only when told) and a link that loses
    # txid 2's first batch of tuples to the counting bolt
    clock = FakeClock()
    r = run()
    data = WordCount.definition().components["spout"].options["spout_options"]["data"]
    dropped: list[Any] = []
    send = Worker.send_data

    def lossy(worker: Worker, task: int, batch: list[Any]) -> None:
        if not dropped and worker.plan.task_component[task] == "partial":
            lost = [t for t in batch if t.stream == "default" and t.values[0].txid == 2]
            if lost:
                dropped.extend(lost)  # lost on the way
                batch = [t for t in batch if t not in lost]
        send(worker, task, batch)

    monkeypatch.setattr(Worker, "send_data", lossy)
    with LocalCluster(clock=clock) as cluster:
        cluster.submit("wc", WordCount, {"test.run": r.name, "topology.message.timeout.secs": 10})
        # When the batch is stuck: txid 1 commits, txid 2 never completes
        poll_for(lambda: dropped and 1 in r.committed_txids(), timeout=20, message="txid 2's tuples lost")
        assert stay(lambda: 2 not in r.committed_txids(), 0.5)
        # and the clock passes the message timeout
        for _ in range(4):
            clock.advance(10)
        # Then txid 2 is replayed and everything counts exactly once
        poll_for(lambda: r.counts() == expected_counts(data), timeout=30, message="exact counts after replay")
    assert_strictly_ordered(r)


def test_opaque_spout_whose_batches_change_on_replay_stays_exact(run: Any) -> None:
    # Given an opaque spout whose replayed batches differ from the first try, and
    # commits that fail (before or after writing) while later batches are in flight
    r = run(commit_failure_before={"p": 0.2, "txids": [2]}, commit_failure_after={"p": 0.2, "txids": [3]})
    total = sum(v[0] for part in NUMBERS for v in part)
    with LocalCluster() as cluster:
        cluster.submit("opaque", OpaqueSum, {"test.run": r.name})
        poll_for(lambda: OpaqueValue(r.store, "total").get() == total, timeout=60,
                 message=f"the exact total (injected: {dict(r.injected)})")
        assert r.injected["commit_failure_before"] and r.injected["commit_failure_after"]
    # Then the batches that counted (the last attempt of each txid the
    # committer completed) hold every number exactly once: none skipped
    # (the seed's "tuples 41-50"), none counted twice
    counted: Counter[Any] = Counter()
    last_attempt = dict(r.commits)  # txid -> the attempt that committed it last
    for (txid, attempt), values in r.emitted.items():
        if last_attempt.get(txid) == attempt:
            counted.update(values)
    everything = Counter((p, v[0]) for p, part in enumerate(NUMBERS) for v in part)
    assert counted == everything
    # and some replay did carry a different batch than its first try
    sizes: dict[int, set[int]] = {}
    for (txid, _attempt), values in r.emitted.items():
        sizes.setdefault(txid, set()).add(len(values))
    assert any(len(s) > 1 for s in sizes.values())
    assert_strictly_ordered(r)


def test_kill_and_resubmit_continues_the_txids_and_counts_nothing_twice(run: Any) -> None:
    r = run()
    total = sum(v[0] for part in NUMBERS for v in part)
    with LocalCluster() as cluster:
        cluster.submit("sum", GlobalTotal, {"test.run": r.name})
        poll_for(lambda: OpaqueValue(r.store, "total").get() == total, timeout=30, message="the total")
        cluster.kill("sum")
        last = max(r.committed_txids())
        # Only the last transactions' state is kept (rotated), not one entry per txid
        paths = cluster.transactional_state.paths()
        assert len(paths) < 4 * 6, paths
        # When the same topology is submitted again under the same name (its transactional id)
        cluster.submit("sum", GlobalTotal, {"test.run": r.name})
        # Then its txids continue after the last committed one, and nothing is counted again
        poll_for(lambda: max(r.committed_txids()) > last, timeout=30, message="a new commit")
        assert min(t for t in r.committed_txids()[r.committed_txids().index(last) + 1:]) == last + 1
        assert OpaqueValue(r.store, "total").get() == total
