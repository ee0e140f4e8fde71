"""The windowing state of one bolt task: a pure core, no clock, no I/O.

The shell feeds it tuples with their timestamps (arrival time or event
time, in milliseconds), ticks with the current time, and gets back
:class:`Window` activations to hand to ``process_window`` plus the tuples to
ack because they left every window.

One buffer serves every window kind of Storm.  Tuples are kept in timestamp
order (arrival order in processing time; sorted on insert in event time,
where the lag bounds how far back an insert goes) as two parallel arrays:
timestamps and references to the tuples themselves, never copies.  A
trigger at reference time ``R`` (now, a window end, or the timestamp of the
slide's last tuple) makes a window of the buffered tuples up to ``R``:

- a duration length ``L`` keeps those with ``R - L < ts <= R``;
- a count length ``N`` keeps the last ``N`` of them;

and everything before the window is evicted: no later window can hold it,
since reference times only grow.  Tuples after ``R`` (event time: above the
watermark) wait for a later trigger.  So a tuple is buffered for at most the
window length plus one slide, which is also how long it stays unacked.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from itertools import compress
from typing import Any

from squall.windowing.policy import WindowPolicy


@dataclass
class Window:
    """What ``process_window`` gets.

    ``tuples``: the window's tuples, oldest first; ``new``: those not in the
    previous window; ``expired``: those evicted since the previous window.
    ``start``/``end``: the window covers timestamps ``start < ts <= end``,
    in epoch milliseconds (None for count windows).
    """

    tuples: list[Any]
    new: list[Any]
    expired: list[Any]
    start: int | None
    end: int | None

    def __len__(self) -> int:
        return len(self.tuples)

    def __iter__(self) -> Any:
        return iter(self.tuples)


@dataclass
class Activation:
    """One trigger's outcome: the window to process (None when it was empty,
    which Storm skips too) and the tuples evicted, which the shell acks."""

    window: Window | None
    evicted: list[Any] = field(default_factory=list)


class WatermarkTracker:
    """Event time's clock: the minimum over input streams of the latest
    timestamp seen, minus the lag; no watermark until every stream spoke."""

    def __init__(self, streams: Iterable[Hashable], lag_ms: int) -> None:
        self.streams = frozenset(streams)
        self.lag_ms = lag_ms
        self.latest: dict[Hashable, int] = {}
        self.watermark: int | None = None

    def track(self, stream: Hashable, ts: int) -> bool:
        """Record a tuple's timestamp; False when it is late (below the watermark)."""
        latest = self.latest.get(stream)
        if latest is None or ts > latest:
            self.latest[stream] = ts
        return self.watermark is None or ts >= self.watermark

    def advance(self) -> int | None:
        """The new watermark, or None when it has not moved (Storm emits one
        only when it grows)."""
        if not self.latest or any(s not in self.latest for s in self.streams):
            return None
        mark = min(self.latest.values()) - self.lag_ms
        if self.watermark is not None and mark <= self.watermark:
            return None
        self.watermark = mark
        return mark


class WindowCore:
    """Buffer, triggers and eviction for one task.  ``streams`` are the
    input streams (any hashable ids) the watermark waits for."""

    def __init__(self, policy: WindowPolicy, streams: Iterable[Hashable] = ("default",)) -> None:
        self.policy = policy
        self.event_time = policy.event_time
        kind, n = policy.length
        self.count_length = n if kind == "count" else None
        self.time_length = n if kind == "ms" else None
        kind, n = policy.slide
        self.count_slide = n if kind == "count" else None
        self.time_slide = n if kind == "ms" else None
        self.ts = array("q")
        self.tuples: list[Any] = []
        # 1 while a buffered tuple has not yet been in a window: ``window.new``.
        self.fresh = bytearray()
        self.expired: list[Any] = []  # evicted since the last window given out
        self.since_trigger = 0  # processing time, count slide: arrivals since the last trigger
        self.watermarks = WatermarkTracker(streams, policy.lag_ms) if self.event_time else None
        self.next_end: int | None = None  # event time, time slide: the next window's end
        # Event time, count slide: buffer index just past the last trigger's tuple (by
        # position, not timestamp: several tuples may share a millisecond).  Nothing is
        # inserted before it: a tuple below the watermark is late.
        self.count_pos = 0
        self.last_tick: int | None = None  # processing time, time slide: the last trigger's time
        self.late = 0

    def __len__(self) -> int:
        return len(self.tuples)

    # -- input ---------------------------------------------------------------

    def add(self, tup: Any, ts: int, stream: Hashable = "default") -> list[Activation] | None:
        """Buffer ``tup`` stamped ``ts`` (ms).  Returns the activations it
        triggered (a count slide in processing time), or None when the tuple
        is late: its timestamp is below the watermark, so the windows it
        belongs to may have been evaluated; the caller drops or reroutes it."""
        if self.watermarks is not None:
            if not self.watermarks.track(stream, ts):
                self.late += 1
                return None
            at = len(self.ts)
            if at and ts < self.ts[-1]:
                at = bisect_right(self.ts, ts)
                self.ts.insert(at, ts)
                self.tuples.insert(at, tup)
                self.fresh.insert(at, 1)
                return []
        elif self.last_tick is not None and ts <= self.last_tick:
            # Arrived in the same millisecond as the last slide but after it:
            # it belongs to the next window, so it is stamped just after.
            ts = self.last_tick + 1
        self.ts.append(ts)
        self.tuples.append(tup)
        self.fresh.append(1)
        if self.event_time or self.count_slide is None:
            return []
        self.since_trigger += 1
        if self.since_trigger < self.count_slide:
            return []
        self.since_trigger = 0
        return [self.trigger(len(self.ts), ts)]

    def tick(self, now: int) -> list[Activation]:
        """Time passed.  Processing time with a time slide: the slide is up
        (the shell ticks once per slide).  Event time: a watermark may be due;
        every window it passes is evaluated, in order."""
        if self.watermarks is None:
            if self.time_slide is None:
                return []
            # Storm's drift correction: the window reaches back from the previous
            # slide, not from now, so a late tick neither drops nor repeats tuples
            # (tumbling windows stay a partition); the first window takes all.
            last, self.last_tick = self.last_tick, now
            cut = None if last is None else last + self.time_slide - (self.time_length or 0)
            return [self.trigger(bisect_right(self.ts, now), now, cut)]
        mark = self.watermarks.advance()
        if mark is None:
            return []
        return self.on_watermark(mark)

    def on_watermark(self, mark: int) -> list[Activation]:
        if self.count_slide is not None:
            return self._count_slides_upto(mark)
        return self._time_slides_upto(mark)

    # -- event-time triggers -------------------------------------------------

    def _time_slides_upto(self, mark: int) -> list[Activation]:
        """Windows end on multiples of the slide; the first ends at the
        earliest timestamp rounded up to one, and after an empty window the
        next end jumps to the next tuple's, as Storm's WatermarkTimeTriggerPolicy."""
        slide = self.time_slide
        assert slide is not None
        out: list[Activation] = []
        end = self.next_end
        while True:
            if end is None:
                end = self._aligned_end(-(2**63), mark)
                if end is None:
                    break
            if end > mark:
                break
            act = self.trigger(bisect_right(self.ts, end), end)
            if act.window is not None or act.evicted:
                out.append(act)
            if act.window is not None:
                end += slide
            else:
                end = self._aligned_end(end, mark)
        self.next_end = end
        return out

    def _aligned_end(self, after: int, mark: int) -> int | None:
        """The earliest timestamp in (after, mark] rounded up to a slide multiple."""
        i = bisect_right(self.ts, after)
        if i >= len(self.ts) or self.ts[i] > mark:
            return None
        slide = self.time_slide
        assert slide is not None
        return -(-self.ts[i] // slide) * slide

    def _count_slides_upto(self, mark: int) -> list[Activation]:
        """Every ``slide``-th tuple in timestamp order below the watermark
        triggers a window ending at it."""
        slide = self.count_slide
        assert slide is not None
        out: list[Activation] = []
        while True:
            k = self.count_pos + slide - 1
            if k >= len(self.ts) or self.ts[k] > mark:
                break
            act = self.trigger(k + 1, self.ts[k])
            self.count_pos = k + 1 - len(act.evicted)
            out.append(act)
        return out

    # -- the window itself ---------------------------------------------------

    def trigger(self, upto: int, ref: int, cut: int | None = -1) -> Activation:
        """The window of the buffered tuples before index ``upto`` at
        reference time ``ref``; evict what came before it.  A duration window
        starts after ``cut`` (default ``ref - length``; None: from the first)."""
        if self.time_length is not None:
            if cut == -1:
                cut = ref - self.time_length
            lo = 0 if cut is None else bisect_right(self.ts, cut, 0, upto)
        else:
            assert self.count_length is not None
            lo = max(0, upto - self.count_length)
        # A paged buffer (squall.windowing.paged, max_events_in_memory) hands out
        # views that page partitions in, never lists of the whole window.
        paged = not isinstance(self.tuples, list)
        evicted = self.tuples.evict_front(lo) if paged else self.tuples[:lo]  # type: ignore[attr-defined]
        if lo:
            del self.ts[:lo]
            del self.fresh[:lo]
            if not paged:
                del self.tuples[:lo]
                self.expired.extend(evicted)
            upto -= lo
        if upto == 0:
            return Activation(None, evicted)
        if paged:
            picks = array("q", (i for i in range(upto) if self.fresh[i]))
            tuples, new, expired = self.tuples.hand_out(upto, picks)  # type: ignore[attr-defined]
        else:
            tuples = self.tuples[:upto]
            new = list(compress(tuples, self.fresh[:upto]))
            expired, self.expired = self.expired, []
        self.fresh[:upto] = bytes(upto)
        if self.time_length is None:
            start = end = None
        else:
            start, end = ref - self.time_length, ref
        return Activation(Window(tuples, new, expired, start, end), evicted)
