"""When has a task of a linear DRPC topology every tuple of a request?  A pure core
(Storm's CoordinatedBolt, as LinearDRPCTopologyBuilder uses it).

Every tuple carries its request id first.  A task counts, per request, the tuples its
bolt acked; every upstream task that worked on the request tells every task downstream
how many tuples it sent it (a count tuple, zero included) once it is done with the
request itself.  A task is done with a request when every report it expects has come
and it acked as many tuples as they add up to; then its bolt's ``finished_id`` runs
and it sends its own counts on.

* The first bolt expects no report: it gets exactly one tuple per request (the
  request's arguments), so it is done once that one is acked.
* The second expects one report (only the first bolt's task that got the request
  knows of it); any later one a report from every task of the bolt before it (each
  heard of the request through the counts).
* The last bolt, when it has a ``finished_id``, also waits for the request's id tuple
  (from PrepareRequest, grouped by request like the bolt's own input), so that the
  task that answers is the one the request's tuples went to.  Its count tuples are
  acked as they come and the id tuple is held; elsewhere the count tuples are held.

What a task holds keeps the request's tuple tree open until the task is done: it is
acked then, or failed when the bolt failed a tuple of the request or ``finished_id``
raised FailedException, which fails the request at its DRPC server at once.  The
regular tuples themselves are acked (or failed) as the bolt says.

Unlike the transactional topologies' tracker (squall.transactional.tracking), every
data tuple here is tracked by the acker, and there is no commit phase: a DRPC request
is one tree from its spout.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False)
class RequestTrack:
    """One request at one task."""

    id: Any
    touched: float  # when it last heard of the request
    expected: int = 0  # tuples the reports (or, at the first bolt, the contract) promise
    received: int = 0  # tuples the bolt acked
    reports: int = 0
    got_id: bool = False
    failed: bool = False
    finished: bool = False
    held: list[Any] = field(default_factory=list)
    sent: dict[int, int] = field(default_factory=dict)  # target task -> tuples sent it


@dataclass(frozen=True)
class Step:
    """What the shell does after an event: ack ``release`` now; if ``finish``, run the
    bolt's finished_id, send counts anchored to ``anchor`` and ack ``done``; if
    ``fail``, fail ``done``."""

    release: list[Any] = field(default_factory=list)
    finish: bool = False
    fail: bool = False
    anchor: Any = None
    done: list[Any] = field(default_factory=list)


NOTHING = Step()


class RequestTracker:
    def __init__(self, sources: int, first: bool, needs_id: bool) -> None:
        """``sources``: reports expected per request; ``first``: the first bolt (one tuple
        per request); ``needs_id``: wait for the id tuple too."""
        self.sources = sources
        self.first = first
        self.needs_id = needs_id
        self.tracks: dict[Any, RequestTrack] = {}

    def get(self, request_id: Any) -> RequestTrack | None:
        return self.tracks.get(request_id)

    def track(self, request_id: Any, now: float) -> RequestTrack:
        tr = self.tracks.get(request_id)
        if tr is None:
            tr = self.tracks[request_id] = RequestTrack(request_id, now, expected=1 if self.first else 0)
        return tr

    def forget(self, tr: RequestTrack) -> None:
        if self.tracks.get(tr.id) is tr:
            del self.tracks[tr.id]

    def count(self, tr: RequestTrack, n: int, tup: Any, now: float) -> Step:
        tr.touched = now
        tr.reports += 1
        tr.expected += n
        if self.needs_id:
            return self._step(tr, tup, release=[tup])
        tr.held.append(tup)
        return self._step(tr, tup)

    def got_id(self, tr: RequestTrack, tup: Any, now: float) -> Step:
        tr.touched = now
        tr.got_id = True
        tr.held.append(tup)
        return self._step(tr, tup)

    def acked(self, tr: RequestTrack, tup: Any) -> Step:
        tr.received += 1
        return self._step(tr, tup)

    def fail(self, tr: RequestTrack) -> Step:
        tr.failed = True
        return self._step(tr, None)

    def undo_finish(self, tr: RequestTrack) -> None:
        """finished_id raised: the request failed after all."""
        tr.finished, tr.failed = False, True

    def _step(self, tr: RequestTrack, anchor: Any, release: list[Any] | None = None) -> Step:
        release = release or []
        if tr.finished:
            return Step(release) if release else NOTHING
        if tr.failed:
            done, tr.held = tr.held, []
            return Step(release, fail=True, done=done) if done or release else NOTHING
        if ((self.needs_id and not tr.got_id) or tr.reports != self.sources
                or tr.received != tr.expected):
            return Step(release) if release else NOTHING
        tr.finished = True
        done, tr.held = tr.held, []
        return Step(release, finish=True, anchor=anchor, done=done)

    def expire(self, before: float) -> list[RequestTrack]:
        """Tracks that heard nothing since ``before`` (a message timeout ago: their tree has
        failed at the spout by now, or they are a last bolt's tasks that never got the
        id): removed, for the shell to fail what they held."""
        old = [tr for tr in self.tracks.values() if tr.touched < before]
        for tr in old:
            self.forget(tr)
        return old
