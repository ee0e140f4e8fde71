"""When has a task everything of a batch? (squall.transactional.tracking, a pure core)

Storm's CoordinatedBolt idea: every upstream task reports how many tuples it
sent (zero included); a task is done when all reported and the tuples
received add up.  A committer also waits for the commit tuple, and a task
downstream of a committer (the seed's bolt C below committer B) finishes in
the commit phase but must let the processing phase end first.

Data tuples are counted by the caller (``tr.received += 1``, then ``step``).
"""

from __future__ import annotations

from squall.transactional.attempt import TransactionAttempt
from squall.transactional.tracking import BatchTracker, Step, Track


class Tup:
    """A stand-in for a held count or commit tuple (always truthy, compared by identity)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Tup({self.name})"


NOTHING = Step([])
TX = TransactionAttempt(1, 11)


def data(tracker: BatchTracker, tr: Track, n: int = 1, late: bool = False) -> list[Step]:
    """``n`` data tuples arrive, counted as the shell counts them; the steps after each."""
    steps = []
    for _ in range(n):
        if late:
            tr.received_late += 1
        else:
            tr.received += 1
        steps.append(tracker.step(tr))
    return steps


def new(tracker: BatchTracker, attempt: TransactionAttempt = TX, now: float = 0.0) -> Track:
    return tracker.track(attempt, now)


# -- processing-phase tasks ----------------------------------------------------------


def test_two_upstream_tasks_counts_before_data() -> None:
    # Given a task with 2 upstream tasks
    tracker = BatchTracker(2, 0, committer=False)
    tr = new(tracker)
    c1, c2 = Tup("c1"), Tup("c2")

    # When both report (2 + 1) before any data arrives
    assert tracker.count(tr, 2, c1, False, 1.0) == NOTHING
    assert tracker.count(tr, 1, c2, False, 1.0) == NOTHING

    # Then it finishes exactly on the third data tuple
    first, second, third = data(tracker, tr, 3)
    assert first == NOTHING and second == NOTHING
    assert third.finish and not third.fail
    assert third.release == []
    assert third.anchor is c1
    assert third.done == [c1, c2]
    assert tr.finished


def test_two_upstream_tasks_data_before_counts() -> None:
    tracker = BatchTracker(2, 0, committer=False)
    tr = new(tracker)
    c1, c2 = Tup("c1"), Tup("c2")

    # Given all 3 data tuples arrived first
    assert data(tracker, tr, 3) == [NOTHING] * 3

    # When one upstream task reports, it is not done: the other has not
    assert tracker.count(tr, 2, c1, False, 1.0) == NOTHING
    # When the second reports, it is
    step = tracker.count(tr, 1, c2, False, 1.0)
    assert step.finish
    assert step.anchor is c1
    assert step.done == [c1, c2]


def test_counts_interleaved_with_data() -> None:
    tracker = BatchTracker(2, 0, committer=False)
    tr = new(tracker)
    c1, c2 = Tup("c1"), Tup("c2")

    assert data(tracker, tr, 1) == [NOTHING]
    assert tracker.count(tr, 2, c1, False, 1.0) == NOTHING
    # received (2) == expected (2) but only one of two tasks reported
    assert data(tracker, tr, 1) == [NOTHING]
    assert tracker.count(tr, 1, c2, False, 1.0) == NOTHING
    (step,) = data(tracker, tr, 1)
    assert step.finish and step.done == [c1, c2]


def test_not_done_while_fewer_tuples_arrived_than_reported() -> None:
    tracker = BatchTracker(1, 0, committer=False)
    tr = new(tracker)
    assert tracker.count(tr, 5, Tup("c"), False, 1.0) == NOTHING
    assert data(tracker, tr, 4) == [NOTHING] * 4
    assert not tr.finished


def test_a_task_that_receives_nothing_finishes_on_counts_of_zero() -> None:
    # Given 2 upstream tasks that sent this task nothing
    tracker = BatchTracker(2, 0, committer=False)
    tr = new(tracker)
    c1, c2 = Tup("c1"), Tup("c2")

    # When both report 0
    assert tracker.count(tr, 0, c1, False, 1.0) == NOTHING
    step = tracker.count(tr, 0, c2, False, 1.0)

    # Then it finishes: a zero count is a report too
    assert step.finish
    assert step.anchor is c1
    assert step.done == [c1, c2]


def test_a_plain_processing_phase_task_never_releases_early() -> None:
    # Given a processing-phase task that has all its input
    tracker = BatchTracker(1, 0, committer=False)
    tr = new(tracker)
    c = Tup("c")
    tracker.count(tr, 1, c, False, 1.0)

    # When the last tuple arrives
    (step,) = data(tracker, tr, 1)

    # Then its count tuple is not released: it is in done, acked after finish
    assert step.release == []
    assert step.finish
    assert step.done == [c]
    assert not tr.released


# -- committers and commit-phase tasks ----------------------------------------------


def test_a_committer_waits_for_the_commit_tuple_even_when_complete() -> None:
    # Given a committer (bolt B) with one upstream task
    tracker = BatchTracker(1, 0, committer=True)
    tr = new(tracker)
    c, commit = Tup("count"), Tup("commit")
    tracker.count(tr, 2, c, False, 1.0)

    # When all its data arrived
    steps = data(tracker, tr, 2)

    # Then it does not finish; its processing-phase count is released so the
    # processing phase can end (else the commit would never come)
    assert not any(s.finish for s in steps)
    assert steps[0] == NOTHING
    assert steps[1].release == [c]
    assert not tr.finished
    assert tracker.step(tr) == NOTHING  # released once only

    # When the commit tuple arrives
    step = tracker.commit(tr, commit, 2.0)

    # Then it finishes, anchored to the commit tuple, which is acked after finish
    assert step.finish and not step.fail
    assert step.anchor is commit
    assert step.done == [commit]
    assert step.release == []


def test_a_committer_does_not_finish_on_a_commit_tuple_before_its_input_is_complete() -> None:
    tracker = BatchTracker(1, 0, committer=True)
    tr = new(tracker)
    c, commit = Tup("count"), Tup("commit")
    tracker.count(tr, 1, c, False, 1.0)

    assert tracker.commit(tr, commit, 2.0) == NOTHING
    (step,) = data(tracker, tr, 1)

    assert step.finish
    assert step.release == [c]
    assert step.anchor is commit
    assert step.done == [commit]


def test_a_task_downstream_of_a_committer_releases_processing_counts_then_finishes_on_late_counts() -> None:
    # The seed's bolt C: input from A (processing phase) and from committer B
    # (whose counts only come in the commit phase).
    tracker = BatchTracker(1, 1, committer=False)
    tr = new(tracker)
    from_a, from_b = Tup("count from A"), Tup("count from B")

    # Given A reported 2 and both of A's tuples arrived
    assert tracker.count(tr, 2, from_a, False, 1.0) == NOTHING
    first, second = data(tracker, tr, 2)

    # Then A's count tuple is released right away (the processing phase can end),
    # but C does not finish: it does not know what B will send
    assert first == NOTHING
    assert second.release == [from_a]
    assert not second.finish and not second.fail
    assert tr.released and not tr.finished

    # When B commits and reports 1 tuple, the count before its data
    assert tracker.count(tr, 1, from_b, True, 2.0) == NOTHING
    (step,) = data(tracker, tr, 1, late=True)

    # Then C finishes, anchored to B's count, and holds nothing of A's any more
    assert step.finish
    assert step.release == []
    assert step.anchor is from_b
    assert step.done == [from_b]


def test_a_commit_phase_task_finishes_when_late_data_comes_before_the_late_count() -> None:
    tracker = BatchTracker(1, 1, committer=False)
    tr = new(tracker)
    from_a, from_b = Tup("A"), Tup("B")
    tracker.count(tr, 0, from_a, False, 1.0)  # A sent C nothing
    assert tr.released

    assert data(tracker, tr, 2, late=True) == [NOTHING, NOTHING]
    step = tracker.count(tr, 2, from_b, True, 2.0)

    assert step.finish and step.done == [from_b] and step.anchor is from_b


def test_late_counts_do_not_finish_a_task_before_its_processing_input_is_complete() -> None:
    # Given B's count arrived but one of A's tuples is still missing
    tracker = BatchTracker(1, 1, committer=False)
    tr = new(tracker)
    from_a, from_b = Tup("A"), Tup("B")
    tracker.count(tr, 2, from_a, False, 1.0)
    data(tracker, tr, 1)
    assert tracker.count(tr, 0, from_b, True, 2.0) == NOTHING

    # When the last of A's tuples arrives, it releases A's count and finishes in one step
    (step,) = data(tracker, tr, 1)
    assert step.release == [from_a]
    assert step.finish
    assert step.done == [from_b]


def test_a_committer_with_only_late_sources_waits_for_late_counts_and_the_commit() -> None:
    # The seed's bolt D: a committer downstream of C
    tracker = BatchTracker(0, 1, committer=True)
    tr = new(tracker)
    from_c, commit = Tup("C"), Tup("commit")

    assert tracker.commit(tr, commit, 1.0) == NOTHING
    step = tracker.count(tr, 0, from_c, True, 2.0)

    assert step.finish
    assert step.anchor is commit
    assert step.done == [from_c, commit]


# -- failure ---------------------------------------------------------------------------


def test_fail_fails_everything_held() -> None:
    tracker = BatchTracker(2, 1, committer=True)
    tr = new(tracker)
    c1, late, commit = Tup("c1"), Tup("late"), Tup("commit")
    tracker.count(tr, 3, c1, False, 1.0)
    tracker.count(tr, 3, late, True, 1.0)
    tracker.commit(tr, commit, 1.0)

    step = tracker.fail(tr)

    assert step.fail and not step.finish
    assert step.done == [c1, late, commit]
    assert step.release == []
    assert tr.failed


def test_count_tuples_on_a_failed_track_are_failed_on_arrival() -> None:
    # Given a failed track that held nothing
    tracker = BatchTracker(2, 0, committer=False)
    tr = new(tracker)
    assert tracker.fail(tr) == NOTHING
    c1, c2, commit = Tup("c1"), Tup("c2"), Tup("commit")

    # When count tuples (or a commit tuple) arrive later, each is failed at once
    step = tracker.count(tr, 0, c1, False, 1.0)
    assert step.fail and step.done == [c1]
    step = tracker.count(tr, 0, c2, False, 1.0)
    assert step.fail and step.done == [c2]
    step = tracker.commit(tr, commit, 1.0)
    assert step.fail and step.done == [commit]

    # and it never finishes, although the counts would add up
    assert tracker.step(tr) == NOTHING
    assert not tr.finished


def test_a_failed_track_fails_only_what_it_still_holds() -> None:
    # Given a commit-phase task that already released its processing-phase counts
    tracker = BatchTracker(1, 1, committer=False)
    tr = new(tracker)
    from_a, from_b = Tup("A"), Tup("B")
    tracker.count(tr, 0, from_a, False, 1.0)
    tracker.count(tr, 1, from_b, True, 1.0)

    step = tracker.fail(tr)

    assert step.fail and step.done == [from_b]


# -- after the end ----------------------------------------------------------------------


def test_a_finished_track_yields_nothing_on_further_steps() -> None:
    tracker = BatchTracker(1, 0, committer=False)
    tr = new(tracker)
    tracker.count(tr, 0, Tup("c"), False, 1.0)
    assert tr.finished

    assert tracker.step(tr) == NOTHING
    data(tracker, tr, 1)
    assert tracker.step(tr) == NOTHING
    assert tracker.fail(tr) == NOTHING
    # a tracked tuple for a finished batch cannot come with true counts: it is failed, not kept
    late = Tup("commit")
    assert tracker.commit(tr, late, 2.0) == Step([], fail=True, done=[late])


def test_a_committer_finishes_once() -> None:
    tracker = BatchTracker(1, 0, committer=True)
    tr = new(tracker)
    tracker.count(tr, 0, Tup("c"), False, 1.0)
    assert tracker.commit(tr, Tup("commit"), 1.0).finish
    again = Tup("commit again")
    assert tracker.commit(tr, again, 1.0) == Step([], fail=True, done=[again])


# -- tracks ---------------------------------------------------------------------------


def test_track_returns_the_same_track_for_the_same_attempt() -> None:
    tracker = BatchTracker(1, 0, committer=False)
    tr = new(tracker)
    again = tracker.track(TransactionAttempt(1, 11), 5.0)
    assert again is tr
    assert tr.touched == 0.0  # looking it up is not hearing from the batch


def test_an_old_attempt_arriving_after_a_new_one_leaves_the_new_one_alone() -> None:
    # Given the live attempt 12 of txid 1, which has heard from one of two upstream tasks
    tracker = BatchTracker(2, 0, committer=False)
    live = new(tracker, TransactionAttempt(1, 12), 1.0)
    tracker.count(live, 1, Tup("c"), False, 1.0)
    live.received += 1
    # When a slow upstream task still delivers the failed attempt 11 of the same txid
    old = new(tracker, TransactionAttempt(1, 11), 2.0)
    # Then both are tracked apart: attempt 12 keeps what it heard
    assert old is not live
    assert tracker.tracks == {12: live, 11: old}
    assert live.reports == 1 and live.received == 1
    # and the dead attempt goes when it expires
    assert tracker.expire(1.0) == []
    assert tracker.expire(2.5) == [live, old]
    assert tracker.tracks == {}


def test_forget_removes_a_track() -> None:
    tracker = BatchTracker(1, 0, committer=False)
    tr = new(tracker)
    tracker.forget(tr)
    assert tracker.tracks == {}
    tracker.forget(tr)  # twice is fine
    again = new(tracker)
    assert again is not tr


def test_expire_removes_tracks_not_touched_since_before_and_keeps_recent_ones() -> None:
    # Given tracks made at t=0; one hears a count at t=10, one a commit at t=12
    tracker = BatchTracker(1, 0, committer=True)
    idle = new(tracker, TransactionAttempt(1, 11), now=0.0)
    counted = new(tracker, TransactionAttempt(2, 21), now=0.0)
    committed = new(tracker, TransactionAttempt(3, 31), now=0.0)
    tracker.count(counted, 5, Tup("c"), False, 10.0)
    tracker.commit(committed, Tup("commit"), 12.0)
    assert (counted.touched, committed.touched) == (10.0, 12.0)
    # data tuples do not touch a track (only count and commit tuples do)
    data(tracker, idle, 1)
    assert idle.touched == 0.0

    # When tracks not touched since t=5 expire
    assert tracker.expire(5.0) == [idle]

    # Then only the idle one is gone
    assert set(tracker.tracks) == {21, 31}

    # When t=11 passes, the counted one goes too; t=12 itself is not before 12
    assert tracker.expire(11.0) == [counted]
    assert tracker.expire(12.0) == []
    assert tracker.tracks == {31: committed}
