"""Sums over Storm's statistics windows, kept in time buckets: a pure core.

Storm shows every statistic for the last 10 minutes, 3 hours, 1 day and all
time (its window ids "600", "10800", "86400", ":all-time").  Each window
here is a ring of buckets (30 s, 5 min and 30 min wide: 20, 36 and 48 of
them), so adding is one dict update per window and memory stays fixed
whatever the rate; a window's sum covers its buckets, so its far edge is
exact to one bucket, as Storm's own rolling windows are.

Time is passed in (``now``, in seconds), never read: the owner's clock
drives it, and tests move it by hand.
"""

from __future__ import annotations

from typing import Any

ALL_TIME = ":all-time"
# window length (s) -> bucket width (s)
WINDOWS: dict[int, int] = {600: 30, 10800: 300, 86400: 1800}
WINDOW_IDS = (*(str(w) for w in WINDOWS), ALL_TIME)


class RollingSum:
    """One value summed over every window."""

    __slots__ = ("all_time", "buckets")

    def __init__(self) -> None:
        self.buckets: dict[int, dict[int, float]] = {w: {} for w in WINDOWS}
        self.all_time = 0.0

    def add(self, now: float, value: float) -> None:
        if not value:
            return
        self.all_time += value
        for window, width in WINDOWS.items():
            ring = self.buckets[window]
            slot = int(now // width)
            ring[slot] = ring.get(slot, 0.0) + value
            if len(ring) > window // width + 1:
                oldest = slot - window // width
                for old in [s for s in ring if s <= oldest]:
                    del ring[old]

    def totals(self, now: float) -> dict[str, float]:
        """Window id -> the sum over that window ending at ``now``."""
        out: dict[str, float] = {}
        for window, width in WINDOWS.items():
            first = int(now // width) - window // width + 1
            out[str(window)] = sum(v for s, v in self.buckets[window].items() if s >= first)
        out[ALL_TIME] = self.all_time
        return out

    def to_dict(self) -> dict[str, Any]:
        """Plain data, so that a new leader can resume the windows (JSON keys are strings)."""
        return {"all": self.all_time,
                "buckets": {str(w): {str(s): v for s, v in ring.items()} for w, ring in self.buckets.items()}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RollingSum:
        out = cls()
        out.all_time = float(data.get("all", 0.0))
        for w, ring in (data.get("buckets") or {}).items():
            if int(w) in out.buckets:
                out.buckets[int(w)] = {int(s): float(v) for s, v in ring.items()}
        return out


class RollingMean:
    """A mean (a latency) over every window: a sum and a count, each rolling."""

    __slots__ = ("count", "total")

    def __init__(self) -> None:
        self.total = RollingSum()
        self.count = RollingSum()

    def add(self, now: float, total: float, count: float) -> None:
        self.total.add(now, total)
        self.count.add(now, count)

    def means(self, now: float) -> dict[str, float | None]:
        totals, counts = self.total.totals(now), self.count.totals(now)
        return {w: (totals[w] / counts[w] if counts[w] else None) for w in WINDOW_IDS}


class Deltas:
    """Turns cumulative counters into increments: workers report counters that
    only grow, restarting from zero when the worker restarts (a new incarnation)."""

    __slots__ = ("last",)

    def __init__(self) -> None:
        self.last: dict[Any, tuple[Any, float]] = {}  # key -> (incarnation, last value)

    def delta(self, key: Any, incarnation: Any, value: float) -> float:
        seen = self.last.get(key)
        self.last[key] = (incarnation, value)
        if seen is None or seen[0] != incarnation or value < seen[1]:
            return value  # first report of this counter, or counting again from zero
        return value - seen[1]

    def forget(self, keep: set[Any]) -> None:
        """Drop counters whose key is not in ``keep`` (tasks that moved away or ended)."""
        for key in [k for k in self.last if k not in keep]:
            del self.last[key]
