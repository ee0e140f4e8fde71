"""The transaction state machine (squall.transactional.coordinator), a pure core.

Storm's Design 3: many transactions process at once (pipelined), commits are
strictly ordered by txid, and a failure replays the failed transaction and
every later active one with new attempts, so that a spout emitting "from
where the last transaction left off" skips nothing (the seed's 41-50 example).
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from squall.transactional.attempt import TransactionAttempt
from squall.transactional.coordinator import NOT_READY, StartBatch, StartCommit, TransactionCoordinator


def ids(first: int = 100) -> Any:
    counter = itertools.count(first)
    return lambda: next(counter)


def meta(txid: int) -> Any:
    return {"meta": txid}


class Starts:
    """A start callback that records which txids it was asked for."""

    def __init__(self, not_ready: set[int] | None = None) -> None:
        self.asked: list[int] = []
        self.not_ready = not_ready or set()

    def __call__(self, txid: int) -> Any:
        self.asked.append(txid)
        return NOT_READY if txid in self.not_ready else meta(txid)


def batches(out: list[Any]) -> list[StartBatch]:
    assert all(isinstance(a, StartBatch) for a in out), out
    return out


def started(out: list[Any]) -> list[int]:
    return [a.attempt.txid for a in out if isinstance(a, StartBatch)]


def commits(out: list[Any]) -> list[int]:
    return [a.attempt.txid for a in out if isinstance(a, StartCommit)]


def running(max_active: int = 3, current: int = 1) -> tuple[TransactionCoordinator, dict[int, Any]]:
    """A coordinator that has started its first window; txid -> live attempt."""
    co = TransactionCoordinator(current, max_active, ids())
    out = batches(co.sync(meta))
    return co, {a.attempt.txid: a.attempt for a in out}


# -- starting --------------------------------------------------------------------


def test_first_sync_starts_txids_1_to_max_active_in_order_with_distinct_attempts_and_metadata() -> None:
    # Given a fresh coordinator allowing 3 active transactions
    co = TransactionCoordinator(1, 3, ids())
    start = Starts()

    # When it first syncs
    out = batches(co.sync(start))

    # Then txids 1, 2, 3 start, in order, each with its own attempt id and its metadata
    assert [a.attempt.txid for a in out] == [1, 2, 3]
    assert start.asked == [1, 2, 3]
    assert len({a.attempt.attempt_id for a in out}) == 3
    assert [a.metadata for a in out] == [meta(1), meta(2), meta(3)]
    assert co.phases() == {1: "processing", 2: "processing", 3: "processing"}
    assert co.current == 1


def test_first_sync_starts_from_a_restored_current_txid() -> None:
    co = TransactionCoordinator(7, 2, ids())
    assert started(co.sync(meta)) == [7, 8]


def test_nothing_more_starts_while_max_active_are_active() -> None:
    # Given 3 of 3 transactions active
    co, _ = running(3)
    start = Starts()

    # When it syncs again (even after all are processed, none committed)
    assert co.sync(start) == []
    # Then nothing starts and start() is not even asked
    assert start.asked == []


def test_max_active_below_one_means_one() -> None:
    co = TransactionCoordinator(1, 0, ids())
    assert started(co.sync(meta)) == [1]
    assert co.sync(meta) == []


@pytest.mark.parametrize("current", [0, -1])
def test_current_below_one_is_refused(current: int) -> None:
    with pytest.raises(ValueError, match="txids start at 1"):
        TransactionCoordinator(current, 1, ids())


# -- committing -------------------------------------------------------------------


def test_a_processed_txid_that_is_not_current_does_not_commit() -> None:
    # Given 1, 2, 3 processing
    co, att = running(3)

    # When 2 and 3 finish processing first
    assert co.ack(att[2]) is None
    assert co.ack(att[3]) is None

    # Then neither commits: 1 is the current txid and is still processing
    assert co.sync(meta) == []
    assert co.phases() == {1: "processing", 2: "processed", 3: "processed"}


def test_the_current_txid_commits_once_processed() -> None:
    co, att = running(3)

    co.ack(att[1])
    out = co.sync(meta)

    assert out == [StartCommit(att[1])]
    assert co.phases()[1] == "committing"
    # A later sync does not send the commit again
    assert co.sync(meta) == []


def test_commits_are_strictly_in_txid_order_even_when_later_txids_process_first() -> None:
    # Given 1, 2, 3 processing, and they finish processing in reverse order
    co, att = running(3)
    start = Starts()
    for txid in (3, 2):
        co.ack(att[txid])
        assert commits(co.sync(start)) == []
    co.ack(att[1])

    # Then the commits go out one at a time, 1 then 2 then 3, each after the previous committed
    for txid in (1, 2, 3):
        assert commits(co.sync(start)) == [txid]
        assert commits(co.sync(start)) == []  # nothing more commits while txid is committing
        # When its commit is acked, current advances and the txid committed is returned
        assert co.ack(att[txid]) == txid
        assert co.current == txid + 1
    # and each freed slot was filled in order
    co.sync(start)
    assert start.asked == [4, 5, 6]
    assert co.phases() == {4: "processing", 5: "processing", 6: "processing"}


def test_ack_of_the_commit_advances_current_and_a_new_transaction_starts_in_the_freed_slot() -> None:
    # Given 1, 2 active (max 2), 1 processed and committing
    co, att = running(2)
    co.ack(att[1])
    assert commits(co.sync(meta)) == [1]

    # When the commit of 1 is acked
    assert co.ack(att[1]) == 1

    # Then current is 2, 1 is no longer active, and the next sync starts 3 (not 1 again)
    assert co.current == 2
    assert co.phases() == {2: "processing"}
    out = co.sync(meta)
    assert started(out) == [3]
    assert out[0].metadata == meta(3)
    assert out[0].attempt not in att.values()
    assert co.phases() == {2: "processing", 3: "processing"}


def test_commit_and_start_can_go_out_in_one_sync_commit_first() -> None:
    # Given 1 committed, 2 processed (max 2): the same sync commits 2 and starts 3
    co, att = running(2)
    co.ack(att[1])
    co.sync(meta)
    co.ack(att[2])
    co.ack(att[1])

    out = co.sync(meta)

    assert isinstance(out[0], StartCommit)
    assert out[0].attempt == att[2]
    assert started(out) == [3]


def test_a_processed_attempt_acked_twice_changes_nothing() -> None:
    co, att = running(2)
    co.ack(att[2])
    assert co.ack(att[2]) is None
    assert co.phases() == {1: "processing", 2: "processed"}


# -- failing ----------------------------------------------------------------------


def test_a_failure_drops_that_txid_and_every_later_one_but_not_earlier_ones() -> None:
    # Given 1..5 active; 1 processing, 2 processed, 3 processing, 4 and 5 processed
    co, att = running(5)
    for txid in (2, 4, 5):
        co.ack(att[txid])

    # When 3 fails
    dropped = co.fail(att[3])

    # Then 3, 4 and 5 are dropped (the processed ones too); 1 and 2 keep their state
    assert dropped == [3, 4, 5]
    assert co.phases() == {1: "processing", 2: "processed"}
    assert co.current == 1


def test_the_next_sync_restarts_the_dropped_txids_in_order_with_new_attempts() -> None:
    # The seed's example: A emits 1-50, B emits 51-100, A fails.  Failing B too
    # means B is re-emitted after A, so it starts where A's replay ends.
    co, att = running(3)
    co.ack(att[3])  # 3 had finished processing: it is replayed anyway
    co.fail(att[2])
    start = Starts()

    out = batches(co.sync(start))

    assert start.asked == [2, 3]
    assert [a.attempt.txid for a in out] == [2, 3]
    assert [a.metadata for a in out] == [meta(2), meta(3)]
    new = {a.attempt.txid: a.attempt for a in out}
    assert new[2] != att[2] and new[3] != att[3]
    assert new[2].attempt_id not in {a.attempt_id for a in att.values()}
    assert new[3].attempt_id not in {a.attempt_id for a in att.values()}
    assert co.phases() == {1: "processing", 2: "processing", 3: "processing"}


def test_41_to_50_are_not_skipped_a_replayed_batch_resumes_from_its_predecessor() -> None:
    # Given a spout that emits "from where the previous transaction left off"
    # (its metadata for txid t is made from t-1's, as the shell's rotating state does)
    ends: dict[int, int] = {}
    take = {1: 50, 2: 50}

    def start(txid: int) -> Any:
        first = ends.get(txid - 1, 0) + 1
        ends[txid] = first + take.get(txid, 50) - 1
        return (first, ends[txid])

    co = TransactionCoordinator(1, 2, ids())
    out = co.sync(start)
    assert [a.metadata for a in out] == [(1, 50), (51, 100)]
    a = {x.attempt.txid: x.attempt for x in out}
    co.ack(a[2])  # B processed

    # When A fails, and on replay only 40 tuples are there for it
    co.fail(a[1])
    take[1] = 40
    out = co.sync(start)

    # Then B is replayed too, after A, from where A's replay ended
    assert [x.metadata for x in out] == [(1, 40), (41, 90)]


def test_stale_acks_and_fails_change_nothing() -> None:
    # Given 2 failed and was restarted with a new attempt
    co, att = running(3)
    co.fail(att[2])
    new = {a.attempt.txid: a.attempt for a in co.sync(meta)}
    before = co.phases()

    # When the old attempt of 2 is acked or fails, or an unknown attempt is
    assert co.ack(att[2]) is None
    assert co.fail(att[2]) == []
    assert co.ack(TransactionAttempt(1, 999_999)) is None
    assert co.fail(TransactionAttempt(1, 999_999)) == []
    assert co.ack(TransactionAttempt(42, 1)) is None
    assert co.fail(TransactionAttempt(42, 1)) == []

    # Then nothing changed: the live attempts are still the new ones
    assert co.phases() == before
    assert co.sync(meta) == []
    assert co.ack(new[2]) is None
    assert co.phases()[2] == "processed"


def test_stale_ack_of_the_old_attempt_of_a_committing_txid_does_not_commit_it() -> None:
    # Given 1 failed once and its replay is now committing
    co, att = running(1)
    co.fail(att[1])
    (replay,) = co.sync(meta)
    co.ack(replay.attempt)
    assert commits(co.sync(meta)) == [1]

    # When the old attempt is acked
    assert co.ack(att[1]) is None

    # Then 1 is still committing
    assert co.current == 1
    assert co.phases() == {1: "committing"}
    assert co.ack(replay.attempt) == 1


def test_a_failure_during_committing_replays_the_transaction_from_processing() -> None:
    # Given 1 committing and 2 processed
    co, att = running(2)
    co.ack(att[1])
    co.ack(att[2])
    assert commits(co.sync(meta)) == [1]

    # When the commit of 1 fails
    assert co.fail(att[1]) == [1, 2]

    # Then 1 is not committed, and 1 and 2 process again with new attempts
    assert co.current == 1
    out = batches(co.sync(meta))
    assert [a.attempt.txid for a in out] == [1, 2]
    assert out[0].attempt != att[1]
    assert co.phases() == {1: "processing", 2: "processing"}
    # and 1 commits only after its new attempt processed
    assert commits(co.sync(meta)) == []
    co.ack(out[0].attempt)
    assert co.sync(meta) == [StartCommit(out[0].attempt)]


def test_a_failure_of_a_later_txid_while_the_current_one_commits_leaves_the_commit_alone() -> None:
    co, att = running(2)
    co.ack(att[1])
    co.sync(meta)

    assert co.fail(att[2]) == [2]

    assert co.phases() == {1: "committing"}
    assert co.ack(att[1]) == 1


# -- readiness and may_start -------------------------------------------------------


def test_not_ready_stops_later_txids_from_starting_in_that_sync() -> None:
    # Given a spout not ready for txid 2
    co = TransactionCoordinator(1, 4, ids())
    start = Starts(not_ready={2})

    # When it syncs
    out = co.sync(start)

    # Then 1 starts, 2 does not, and 3 and 4 are not even asked (strict order)
    assert started(out) == [1]
    assert start.asked == [1, 2]
    assert co.phases() == {1: "processing"}

    # When a later sync finds 2 ready
    start.not_ready.clear()
    out = co.sync(start)

    # Then 2 starts first, then 3 and 4
    assert started(out) == [2, 3, 4]
    assert start.asked == [1, 2, 2, 3, 4]


def test_not_ready_for_a_replayed_txid_keeps_later_ones_waiting() -> None:
    co, att = running(3)
    co.fail(att[2])

    start = Starts(not_ready={2})
    assert co.sync(start) == []
    assert start.asked == [2]
    assert co.phases() == {1: "processing"}

    start.not_ready.clear()
    assert started(co.sync(start)) == [2, 3]


def test_may_start_false_still_emits_a_due_commit_but_starts_nothing() -> None:
    # Given 1 processed and 2 failed (a free slot)
    co, att = running(2)
    co.ack(att[1])
    co.fail(att[2])
    start = Starts()

    # When it syncs without permission to start
    out = co.sync(start, may_start=False)

    # Then the commit of 1 goes out, nothing starts, start() is not asked
    assert out == [StartCommit(att[1])]
    assert start.asked == []
    assert co.phases() == {1: "committing"}

    # and once allowed, 2 starts again
    assert started(co.sync(start)) == [2]


def test_may_start_false_on_a_fresh_coordinator_starts_nothing() -> None:
    co = TransactionCoordinator(1, 3, ids())
    assert co.sync(meta, may_start=False) == []
    assert co.phases() == {}
