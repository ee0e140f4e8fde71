"""When has a task everything of a batch?  A pure core (Storm's CoordinatedBolt idea).

Every upstream task tells every downstream task how many tuples it sent it
for a batch (a count tuple, zero included), so a task knows it has the whole
batch exactly when every upstream task has reported and the tuples received
add up to the counts reported, in whatever order they arrived.

Batch tuples themselves are not tracked by the acker: the counts prove
completeness.  Only count tuples (and the coordinator's batch and commit
tuples) are; a task holds the ones it received until it is done, so the
coordinator's tree for the batch completes exactly when every task is, and
fails or times out when one fails or never gets all its tuples.

Two phases.  A committer finishes in the commit phase, and so does every
bolt downstream of one.  Such a task has sources of both kinds: counts from
processing-phase sources arrive in the processing tree, and are released as
soon as everything those sources sent has arrived (else the processing
phase could never end); counts from commit-phase sources arrive in the
commit tree and are held until the task finishes.  A committer also waits
for the commit tuple itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from squall.transactional.attempt import TransactionAttempt


@dataclass(eq=False)
class Track:
    """One batch attempt at one task."""

    attempt: TransactionAttempt
    touched: float  # when it last heard of its batch (a count or commit tuple)
    bolt: Any = None  # the batch bolt instance for this attempt, if any
    received: int = 0  # tuples from processing-phase sources
    expected: int = 0
    reports: int = 0
    received_late: int = 0  # tuples from commit-phase sources
    expected_late: int = 0
    reports_late: int = 0
    held: list[Any] = field(default_factory=list)  # count tuples of the processing tree
    held_late: list[Any] = field(default_factory=list)  # count tuples of the commit tree
    commit_tuple: Any = None
    released: bool = False  # held (processing tree) already acked
    failed: bool = False
    finished: bool = False
    sent: dict[int, int] = field(default_factory=dict)  # target task -> tuples sent


@dataclass(frozen=True)
class Step:
    """What the shell must do after an event: ack ``release``; if ``finish``,
    run the bolt's finish_batch, send counts anchored to ``anchor`` and ack
    ``done``; if ``fail``, fail ``done``."""

    release: list[Any]
    finish: bool = False
    fail: bool = False
    anchor: Any = None
    done: list[Any] = field(default_factory=list)


NOTHING = Step([])


class BatchTracker:
    def __init__(self, sources: int, late_sources: int, committer: bool) -> None:
        """``sources``/``late_sources``: how many upstream tasks report in the
        processing/commit phase; ``committer``: also wait for the commit tuple."""
        self.sources = sources
        self.late_sources = late_sources
        self.committer = committer
        self.commit_phase = committer or late_sources > 0
        # By attempt id.  An older attempt of a txid is not dropped when a newer
        # one shows up: ids are random, so which is newer cannot be told, and a
        # slow upstream task may still deliver the old one after the new one
        # began.  Dead attempts expire (see expire).
        self.tracks: dict[int, Track] = {}

    def track(self, attempt: TransactionAttempt, now: float) -> Track:
        """The track of ``attempt``, made if new."""
        tr = self.tracks.get(attempt.attempt_id)
        if tr is None:
            tr = self.tracks[attempt.attempt_id] = Track(attempt, now)
        return tr

    def forget(self, tr: Track) -> None:
        if self.tracks.get(tr.attempt.attempt_id) is tr:
            del self.tracks[tr.attempt.attempt_id]

    def count(self, tr: Track, n: int, tup: Any, late: bool, now: float) -> Step:
        if tr.finished:
            return Step([], fail=True, done=[tup])  # cannot happen with true counts: refuse it
        tr.touched = now
        if late:
            tr.reports_late += 1
            tr.expected_late += n
            tr.held_late.append(tup)
        else:
            tr.reports += 1
            tr.expected += n
            tr.held.append(tup)
        return self.step(tr)

    def commit(self, tr: Track, tup: Any, now: float) -> Step:
        if tr.finished:
            return Step([], fail=True, done=[tup])
        tr.touched = now
        tr.commit_tuple = tup
        return self.step(tr)

    def fail(self, tr: Track) -> Step:
        tr.failed = True
        return self.step(tr)

    def step(self, tr: Track) -> Step:
        """Decide after any event (a data tuple's arrival included)."""
        if tr.finished:
            return NOTHING
        if tr.failed:
            # Fail what is held now; what arrives later is failed on arrival.
            done = tr.held + tr.held_late
            if tr.commit_tuple is not None:
                done.append(tr.commit_tuple)
            tr.held, tr.held_late, tr.commit_tuple = [], [], None
            return Step([], fail=True, done=done) if done else NOTHING
        whole = tr.reports == self.sources and tr.received == tr.expected
        release: list[Any] = []
        if whole and self.commit_phase and not tr.released:
            release, tr.held = tr.held, []
            tr.released = True
        if not whole or tr.reports_late != self.late_sources or tr.received_late != tr.expected_late:
            return Step(release) if release else NOTHING
        if self.committer and tr.commit_tuple is None:
            return Step(release) if release else NOTHING
        tr.finished = True
        if tr.commit_tuple is not None:
            anchor = tr.commit_tuple
        else:
            anchor = tr.held_late[0] if tr.held_late else (tr.held[0] if tr.held else None)
        done = tr.held + tr.held_late
        if tr.commit_tuple is not None:
            done.append(tr.commit_tuple)
        tr.held, tr.held_late, tr.commit_tuple = [], [], None
        return Step(release, finish=True, anchor=anchor, done=done)

    def expire(self, before: float) -> list[Track]:
        """Tracks that heard nothing since ``before`` (a message timeout ago):
        their tree has failed at the coordinator by now.  Removed; the shell
        fails what they held.  A committer's batch waiting for its turn to
        commit hears nothing for a while, hence "since the last count", not
        "since it began"."""
        old = [tr for tr in self.tracks.values() if tr.touched < before]
        for tr in old:
            self.forget(tr)
        return old
