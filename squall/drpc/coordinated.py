"""The bolt each user bolt of a linear DRPC topology runs inside (Storm's CoordinatedBolt,
named here for what it completes: a request):
it counts the request's tuples through the chain (squall.drpc.tracking decides), calls the
bolt's ``finished_id(request_id)`` once this task has all of a request's tuples, and
tells the tasks downstream how many it sent each.

The user's bolt is an ordinary :class:`~squall.Bolt`: its ``auto_ack``, ``auto_anchor``
and ``auto_fail`` mean what they always do (this wrapper carries them out), and what
``finished_id`` emits is anchored to the tuple that completed the request, so the
request's tree stays open until the answer is out.  Every tuple it emits carries a
request id first (the id of a request this task is working on), as Storm's contract.
"""

from __future__ import annotations

from typing import Any

from squall.drpc.tracking import RequestTrack, RequestTracker, Step
from squall.errors import FailedException, SerializationError
from squall.topology.component import DEFAULT_STREAM
from squall.topology.loading import resolve_class
from squall.topology.wrapper import WrapperBolt

COORD_STREAM = "$coord"  # a task -> each downstream task: [request id, tuples sent it], direct
ID_STREAM = "id"  # PrepareRequest -> the last bolt, when it has a finished_id: [request id]


def has_finished_id(cls: Any) -> bool:
    return callable(getattr(cls, "finished_id", None))


class RequestCoordinatedBolt(WrapperBolt):
    # This wrapper acks, anchors and fails; the user's bolt says when.

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        opts = self.options
        user_cls = resolve_class(opts["bolt"])
        sources: dict[str, str] = dict(opts.get("sources") or {})
        reports = sum(1 if kind == "single" else len(context.component_tasks[c])
                      for c, kind in sources.items())
        self.id_source: str | None = opts.get("id_source")
        self.tracker = RequestTracker(reports, first=not sources, needs_id=self.id_source is not None)
        self.timeout = conf["topology.message.timeout.secs"]
        plan = context.plan
        subscribers = plan.subscribers.get(context.component_id, {}).get(COORD_STREAM, [])
        self.count_targets = sorted(t for target, _inp in subscribers for t in plan.component_tasks[target])
        self.current: Any = None  # the tuple the user's bolt is processing, or the one finishing a request
        user = self.user = self.build_inner(user_cls, opts.get("bolt_options"))
        self.user_ack = bool(user_cls.auto_ack)
        self.user_anchor = bool(user_cls.auto_anchor)
        self.user_fail = bool(user_cls.auto_fail)
        self.finished_id = user.finished_id if has_finished_id(user) else None
        user.emit = self._emit
        user.ack = self._ack
        user.fail = self._fail
        user.initialize(conf, context)

    # -- arrivals ------------------------------------------------------------------------------

    def process(self, tup: Any) -> None:
        stream = tup.stream
        if stream == COORD_STREAM:
            tr = self._track(tup.values[0])
            self._apply(tr, self.tracker.count(tr, tup.values[1], tup, self.clock.now()))
        elif stream == ID_STREAM and tup.component == self.id_source:
            tr = self._track(tup.values[0])
            self._apply(tr, self.tracker.got_id(tr, tup, self.clock.now()))
        else:
            tr = self._track(tup.values[0])
            if tr.failed or tr.finished:
                self.fail(tup)  # a tuple of a request that failed (or, with true counts, never)
                return
            self.current = tup
            try:
                self.user.process(tup)
            except Exception as e:  # noqa: BLE001 - user code: as a bolt's executor does
                if isinstance(e, SerializationError):
                    raise
                if not isinstance(e, FailedException):
                    self.report_error(e)
                if self.user_fail:
                    self._fail(tup)
            else:
                if self.user_ack:
                    self._ack(tup)
            finally:
                self.current = None

    def _track(self, request_id: Any) -> RequestTrack:
        tracker = self.tracker
        tr = tracker.get(request_id)
        if tr is not None:
            return tr
        now = self.clock.now()
        for old in tracker.expire(now - self.timeout):
            for held in old.held:
                self.fail(held)
        return tracker.track(request_id, now)

    # -- what the user's bolt calls ------------------------------------------------------------

    def _emit(self, values: Any, anchors: Any = None, stream: str | None = DEFAULT_STREAM,
              direct_task: int | None = None) -> Any:
        first = values[0] if isinstance(values, (list, tuple)) and values else None
        tr = self.tracker.get(first)
        if tr is None:
            msg = (f"component {self.context.component_id!r} emitted {values!r}: in a linear DRPC topology "
                   f"the first value of every tuple is the id of a request the bolt is working on")
            raise ValueError(msg)
        if anchors is None and self.user_anchor:
            anchors = self.current
        tasks = self.emit(values, anchors, stream or DEFAULT_STREAM, direct_task)
        sent = tr.sent
        for task in tasks:
            sent[task] = sent.get(task, 0) + 1
        return tasks

    def _ack(self, tup: Any) -> None:
        tr = self.tracker.get(tup.values[0]) if tup.stream not in (COORD_STREAM, ID_STREAM) else None
        if tr is None:
            self.ack(tup)
            return
        self._apply(tr, self.tracker.acked(tr, tup), then=tup)

    def _fail(self, tup: Any) -> None:
        self.fail(tup)
        tr = self.tracker.get(tup.values[0]) if tup.stream not in (COORD_STREAM, ID_STREAM) else None
        if tr is not None:
            self._apply(tr, self.tracker.fail(tr))

    # -- decisions -----------------------------------------------------------------------------

    def _apply(self, tr: RequestTrack, step: Step, then: Any = None) -> None:
        """Carry out ``step``; ``then``: the user's acked tuple, acked last (what finishing
        emits is anchored to it) or failed when finishing failed."""
        if step.fail:
            for tup in step.done:
                self.fail(tup)
        finished = self._finish(tr, step) if step.finish else True
        # Acked only now: what finishing emitted may be anchored to them.
        for tup in step.release:
            self.ack(tup)
        if then is not None and finished:
            self.ack(then)
        elif then is not None:
            self.fail(then)

    def _finish(self, tr: RequestTrack, step: Step) -> bool:
        if self.finished_id is not None:
            previous, self.current = self.current, step.anchor
            try:
                self.finished_id(tr.id)
            except Exception as e:  # noqa: BLE001 - user code: the request fails, the worker lives
                if isinstance(e, SerializationError):
                    raise
                if not isinstance(e, FailedException):
                    self.report_error(e)
                self.tracker.undo_finish(tr)  # kept, failed: what comes later fails too, until it expires
                for tup in step.done:
                    self.fail(tup)
                return False
            finally:
                self.current = previous
        for task in self.count_targets:
            self.emit([tr.id, tr.sent.get(task, 0)], step.anchor, COORD_STREAM, task)
        for tup in step.done:
            self.ack(tup)
        self.tracker.forget(tr)
        return True
