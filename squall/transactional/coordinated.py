"""The bolt every user bolt of a transactional topology runs inside (Storm's
CoordinatedBolt wrapped around a BatchBoltExecutor, in one class named for what it
completes: a batch).

It routes each arriving tuple: a batch tuple to the batch's own bolt
instance (a fresh :class:`BatchBolt` per attempt, or the task's one plain
:class:`~squall.Bolt`), a count tuple or the commit tuple to the
:class:`~squall.transactional.tracking.BatchTracker`, and carries out what
the tracker decides: finish the batch, report counts downstream, ack or
fail what it held.  The user never acks or anchors.

A committer checks the fence (squall.cluster.fence) just before its
``finish_batch``: the commit's epoch must be the coordinator's latest and
its txid the current one, else the commit is refused and fails.  A
superseded coordinator's commit, or one delivered late after the txid
committed and later ones followed, never reaches the user's state.
"""

from __future__ import annotations

from typing import Any

from squall.cluster.fence import Fence, FencedOut
from squall.cluster.fenced_state import COORDINATOR
from squall.errors import CoordinationError, FailedException, SerializationError
from squall.topology.component import Bolt
from squall.topology.loading import resolve_class
from squall.topology.wrapper import WrapperBolt
from squall.transactional.attempt import TransactionAttempt
from squall.transactional.bolts import BatchBolt
from squall.transactional.emitter import state_id
from squall.transactional.output import COMMIT_STREAM, COUNT_STREAM, BatchOutput, count_sources, count_targets
from squall.transactional.state import open_backend
from squall.transactional.tracking import BatchTracker, Step, Track


class BatchCoordinatedBolt(WrapperBolt):
    # Squall acks and anchors; user emits go out untracked and counted.
    wrapped_refusal = "is neither a BatchBolt nor a Bolt"

    @classmethod
    def wrapped_kinds(cls) -> tuple[type, ...]:
        return (BatchBolt, Bolt)

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        opts = self.options
        self.user_cls = resolve_class(opts["bolt"])
        self.user_options = dict(opts.get("bolt_options") or {})
        self.batch = issubclass(self.user_cls, BatchBolt)
        self.timeout = conf["topology.message.timeout.secs"]
        self.out = BatchOutput(context.component_id, self.emit, count_targets(context))
        self.coordinator = opts["coordinator"]
        late = set(opts.get("late_sources") or ())
        sources = count_sources(context)
        self.late_sources = frozenset(c for c in sources if c in late)
        self.tracker = BatchTracker(sum(n for c, n in sources.items() if c not in late),
                                    sum(n for c, n in sources.items() if c in late),
                                    bool(opts.get("committer")))
        self.last: Track | None = None
        self.fence_state: Any = None  # the coordinator's state, opened at the first commit
        self.refused = self.metrics.counter("commits_refused") if self.tracker.committer else None
        if not self.batch:  # a plain bolt: one per task (a batch bolt: one per batch, on its track)
            self.user = self._make_user()
            self.user.initialize(conf, context)

    def _make_user(self) -> Any:
        user = self.build_inner(self.user_cls, self.user_options)
        user.emit = self.out.emit
        # Squall acks and anchors: a plain bolt's own ack/fail calls change nothing.
        user.ack = user.fail = _ignore
        return user

    # -- arrivals --------------------------------------------------------------

    def process(self, tup: Any) -> None:
        stream = tup.stream
        if stream == COUNT_STREAM:
            tr = self._track(tup.values[0])
            if tr is None:
                self.fail(tup)
                return
            self._apply(tr, self.tracker.count(tr, tup.values[1], tup, tup.component in self.late_sources,
                                               self.clock.now()))
        elif stream == COMMIT_STREAM and tup.component == self.coordinator:
            tr = self._track(tup.values[0])
            if tr is None:
                self.fail(tup)
                return
            self._apply(tr, self.tracker.commit(tr, tup, self.clock.now()))
        else:
            attempt = tup.values[0]
            tr = self.last
            if tr is None or attempt is not tr.attempt:
                tr = self._track(attempt)
                if tr is None:
                    return
            late = tup.component in self.late_sources
            if late:
                tr.received_late += 1
            else:
                tr.received += 1
            if tr.failed:
                return
            out = self.out
            out.current = tr
            try:
                if tr.bolt is not None:
                    tr.bolt.process(tup)
                else:
                    self.user.process(tup)
            except Exception as e:  # noqa: BLE001 - user code: the batch fails, the worker lives
                self._failed(tr, e)
            finally:
                out.current = None
            tracker = self.tracker
            # The last tuple may complete the batch (its counts came first).
            if ((tr.received_late == tr.expected_late and tr.reports_late == tracker.late_sources) if late
                    else (tr.received == tr.expected and tr.reports == tracker.sources)):
                self._apply(tr, tracker.step(tr))  # the last tuple may complete the batch

    def _track(self, attempt: Any) -> Track | None:
        """The track of ``attempt``, made (with its batch bolt) when new."""
        if type(attempt) is not TransactionAttempt:
            self.report_error(ValueError(f"a tuple's first value is not a TransactionAttempt: {attempt!r}"))
            return None
        tracker = self.tracker
        existing = tracker.tracks.get(attempt.attempt_id)
        if existing is not None:
            self.last = existing
            return existing
        now = self.clock.now()
        for old in tracker.expire(now - self.timeout):
            self._drop(old)
        tr = tracker.track(attempt, now)
        if self.batch:
            tr.bolt = self._make_user()
            self.out.current = tr
            try:
                tr.bolt.initialize(self.conf, self.context, attempt)
            except Exception as e:  # noqa: BLE001
                self._failed(tr, e)
            finally:
                self.out.current = None
        self.last = tr
        return tr

    def _drop(self, tr: Track) -> None:
        """A track nobody will finish: fail what it held so its tree ends now."""
        for tup in tr.held + tr.held_late + ([tr.commit_tuple] if tr.commit_tuple is not None else []):
            self.fail(tup)
        if self.last is tr:
            self.last = None

    # -- decisions -------------------------------------------------------------

    def _failed(self, tr: Track, error: Exception) -> None:
        if isinstance(error, SerializationError):
            raise error  # fatal, as for any bolt: the worker restarts
        if not isinstance(error, FailedException):
            self.report_error(error)
        self._apply(tr, self.tracker.fail(tr))

    def _apply(self, tr: Track, step: Step) -> None:
        for tup in step.release:
            self.ack(tup)
        if step.fail:
            for tup in step.done:
                self.fail(tup)
            return
        if not step.finish:
            return
        if self.tracker.committer and not self._may_commit(tr):
            for tup in step.done:
                self.fail(tup)
            tr.finished, tr.failed = False, True
            return
        out = self.out
        if tr.bolt is not None:
            out.current = tr
            try:
                tr.bolt.finish_batch()
            except Exception as e:  # noqa: BLE001
                # Not done after all: fail what it held, and whatever comes later.
                for tup in step.done:
                    self.fail(tup)
                tr.finished, tr.failed = False, True
                if isinstance(e, SerializationError):
                    raise
                if not isinstance(e, FailedException):
                    self.report_error(e)
                return
            finally:
                out.current = None
        out.send_counts(tr.attempt, tr.sent, step.anchor)
        for tup in step.done:
            self.ack(tup)
        self.tracker.forget(tr)
        if self.last is tr:
            self.last = None

    def _may_commit(self, tr: Track) -> bool:
        attempt = tr.attempt
        try:
            if self.fence_state is None:
                tid = state_id(self.options, self.conf, self.context)
                self.fence_state = open_backend(self.conf, self.context.resources).open(tid, COORDINATOR)
            self.fence_state.check(Fence(attempt.epoch, attempt.txid))
        except FencedOut as e:
            self.logger.warning("commit refused", txid=attempt.txid, epoch=attempt.epoch, reason=str(e))
            self.refused.inc()
            return False
        except CoordinationError as e:
            self.logger.warning("cannot check the commit's fence; the commit is replayed", txid=attempt.txid,
                                error=str(e))
            return False
        return True

    def cleanup(self) -> None:
        super().cleanup()
        # A batch bolt keeping what its task made across batches (Trident's states) lets it go.
        task_cleanup = getattr(self.user_cls, "task_cleanup", None)
        if self.batch and callable(task_cleanup):
            task_cleanup(self.context)


def _ignore(*_args: Any, **_kwargs: Any) -> None:
    return None
