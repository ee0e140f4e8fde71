"""The pure window core, row by row of Storm's window table (docs/Windowing.md),
with time from a FakeClock, and the event-time example e1..e10 of that page."""

from __future__ import annotations

import pytest

from squall.clock import FakeClock
from squall.windowing import Count, Duration, WindowCore
from squall.windowing.policy import make_policy

pytestmark = pytest.mark.timeout(30)


def core_for(**kw):
    return WindowCore(make_policy("test", **kw))


class Driver:
    """Feeds a core tuples named by integers, stamped with a FakeClock's ms."""

    def __init__(self, core: WindowCore) -> None:
        self.core = core
        self.clock = FakeClock(start=0.0)
        self.windows = []
        self.acked = []

    def now(self) -> int:
        return round(self.clock.now() * 1000)

    def _take(self, acts):
        for act in acts:
            if act.window is not None:
                self.windows.append(act.window)
            self.acked.extend(act.evicted)

    def add(self, *names):
        for n in names:
            self._take(self.core.add(n, self.now()))

    def tick(self):
        self._take(self.core.tick(self.now()))

    def every(self, secs: float, names, per_tick: float | None = None):
        """One tuple every ``secs``; a tick every ``per_tick`` seconds of that."""
        elapsed = 0.0
        for n in names:
            self.clock.advance(secs)
            elapsed += secs
            self.add(n)
            if per_tick and abs(elapsed / per_tick - round(elapsed / per_tick)) < 1e-9:
                self.tick()

    def contents(self):
        return [list(w.tuples) for w in self.windows]


def test_count_window_count_slide():
    d = Driver(core_for(window=Count(3), slide=Count(2)))
    d.add(*range(1, 8))
    assert d.contents() == [[1, 2], [2, 3, 4], [4, 5, 6]]
    assert [w.new for w in d.windows] == [[1, 2], [3, 4], [5, 6]]
    assert [w.expired for w in d.windows] == [[], [1], [2, 3]]
    assert all(w.start is None and w.end is None for w in d.windows)
    assert d.acked == [1, 2, 3]
    assert list(d.core.tuples) == [4, 5, 6, 7]  # 7 waits for the next slide


def test_count_window_slides_with_every_tuple():
    d = Driver(core_for(window=Count(3)))
    d.add(*range(1, 6))
    assert d.contents() == [[1], [1, 2], [1, 2, 3], [2, 3, 4], [3, 4, 5]]
    assert [w.new for w in d.windows] == [[1], [2], [3], [4], [5]]
    assert d.acked == [1, 2]


def test_count_window_duration_slide():
    d = Driver(core_for(window=Count(3), slide=Duration.seconds(1)))
    for n in range(1, 9):  # 4 tuples a second, a tick (the slide) every second
        d.clock.advance(0.25)
        d.add(n)
        if n % 4 == 0:
            d.tick()
    assert d.contents() == [[2, 3, 4], [6, 7, 8]]
    assert [w.expired for w in d.windows] == [[1], [2, 3, 4, 5]]
    assert d.acked == [1, 2, 3, 4, 5]


def test_duration_window_duration_slide():
    # Storm's first figure: a 10 s window sliding every 5 s.
    d = Driver(core_for(window=Duration.seconds(10), slide=Duration.seconds(5)))
    d.every(1.0, range(1, 16), per_tick=5.0)   # tuple n at n seconds, ticks at 5, 10, 15
    assert d.contents() == [[1, 2, 3, 4, 5], list(range(1, 11)), list(range(6, 16))]
    assert [(w.start, w.end) for w in d.windows] == [(-5000, 5000), (0, 10000), (5000, 15000)]
    assert d.windows[2].new == list(range(11, 16))
    assert d.windows[2].expired == [1, 2, 3, 4, 5]
    d.clock.advance(5)
    d.tick()   # 20 s: the window (10, 20] keeps 11..15
    assert d.contents()[-1] == [11, 12, 13, 14, 15]
    d.clock.advance(5)
    d.tick()   # 25 s: nothing left: no window, but 11..15 are acked
    assert len(d.windows) == 4
    assert d.acked == list(range(1, 16))
    assert len(d.core) == 0


def test_duration_window_slides_with_every_tuple():
    d = Driver(core_for(window=Duration.seconds(3)))
    d.every(1.0, range(1, 7))
    assert d.contents() == [[1], [1, 2], [1, 2, 3], [2, 3, 4], [3, 4, 5], [4, 5, 6]]
    assert d.windows[-1].end - d.windows[-1].start == 3000
    assert d.acked == [1, 2, 3]


def test_duration_window_count_slide():
    d = Driver(core_for(window=Duration.seconds(3), slide=Count(2)))
    d.every(1.0, range(1, 9))
    assert d.contents() == [[1, 2], [2, 3, 4], [4, 5, 6], [6, 7, 8]]
    assert [w.end for w in d.windows] == [2000, 4000, 6000, 8000]
    assert d.acked == [1, 2, 3, 4, 5]


def test_tumbling_count():
    d = Driver(core_for(tumbling=Count(3)))
    d.add(*range(1, 11))
    assert d.contents() == [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
    assert [w.new for w in d.windows] == d.contents()
    assert d.windows[1].expired == [1, 2, 3]
    assert d.acked == list(range(1, 7))


def test_tumbling_duration():
    d = Driver(core_for(tumbling=Duration.seconds(5)))
    d.every(1.0, range(1, 13), per_tick=5.0)
    assert d.contents() == [[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]]
    assert [(w.start, w.end) for w in d.windows] == [(0, 5000), (5000, 10000)]
    assert d.windows[1].expired == [1, 2, 3, 4, 5]
    assert d.acked == list(range(1, 6))


def test_time_windows_skip_empty_activations_but_still_evict():
    d = Driver(core_for(window=Duration.seconds(2), slide=Duration.seconds(2)))
    d.clock.advance(0.5)
    d.add("a")
    d.clock.advance(1.5)
    d.tick()
    d.clock.advance(2)
    d.tick()   # empty: no process_window, "a" acked
    assert d.contents() == [["a"]]
    assert d.acked == ["a"]


# -- event time ------------------------------------------------------------------

BASE = 1_700_000_000_000 - 1_700_000_000_000 % 3_600_000  # an hour boundary, epoch ms


def hms(h: int, m: int, s: int) -> int:
    return BASE + ((h * 60 + m) * 60 + s) * 1000


def test_storm_event_time_example():
    """Windowing.md: length 20 s, slide 10 s, lag 5 s, e1..e10, window by window."""
    core = core_for(window=Duration.seconds(20), slide=Duration.seconds(10), timestamp_field="ts",
                    lag=Duration.seconds(5), watermark_interval=Duration.seconds(1))
    first = {"e1": hms(6, 0, 3), "e2": hms(6, 0, 5), "e3": hms(6, 0, 7), "e4": hms(6, 0, 18),
             "e5": hms(6, 0, 26), "e6": hms(6, 0, 36)}
    for name, ts in first.items():
        assert core.add(name, ts) == []
    acts = core.tick(0)  # the watermark tick: w1 = 6:00:31
    assert core.watermarks.watermark == hms(6, 0, 31)
    got = [(a.window.start, a.window.end, a.window.tuples) for a in acts]
    assert got == [
        (hms(5, 59, 50), hms(6, 0, 10), ["e1", "e2", "e3"]),
        (hms(6, 0, 0), hms(6, 0, 20), ["e1", "e2", "e3", "e4"]),
        (hms(6, 0, 10), hms(6, 0, 30), ["e4", "e5"]),
    ]
    assert [a.evicted for a in acts] == [[], [], ["e1", "e2", "e3"]]
    assert acts[2].window.expired == ["e1", "e2", "e3"]
    assert acts[1].window.new == ["e4"]
    second = {"e7": hms(8, 0, 25), "e8": hms(8, 0, 26), "e9": hms(8, 0, 27), "e10": hms(8, 0, 39)}
    for name, ts in second.items():
        assert core.add(name, ts) == []
    acts = core.tick(0)  # w2 = 8:00:34
    assert core.watermarks.watermark == hms(8, 0, 34)
    got = [(a.window.start, a.window.end, a.window.tuples) for a in acts if a.window is not None]
    assert got == [
        (hms(6, 0, 20), hms(6, 0, 40), ["e5", "e6"]),
        (hms(6, 0, 30), hms(6, 0, 50), ["e6"]),
        (hms(8, 0, 10), hms(8, 0, 30), ["e7", "e8", "e9"]),
    ]
    assert list(core.tuples) == ["e7", "e8", "e9", "e10"]  # e10 is beyond the watermark
    assert core.tick(0) == []  # no new tuple: the watermark does not move


def test_event_time_orders_out_of_order_tuples_and_counts_late_ones():
    core = core_for(tumbling=Duration.seconds(10), timestamp_field="ts", lag=Duration.seconds(5))
    for name, ts in (("b", 4000), ("a", 2000), ("c", 16000)):
        assert core.add(name, ts) == []
    [act] = core.tick(0)  # watermark 11 s: window (0, 10]
    assert act.window.tuples == ["a", "b"]
    assert core.add("late", 9000) is None   # below the watermark: late
    assert core.add("in-time", 12000) == []
    assert core.late == 1
    core.add("d", 30000)
    [act] = core.tick(0)  # watermark 25 s: window (10, 20]
    assert act.window.tuples == ["in-time", "c"]


def test_event_time_watermark_waits_for_every_input_stream():
    core = WindowCore(make_policy("t", tumbling=Duration.seconds(10), timestamp_field="ts"), ["s1", "s2"])
    core.add("a", 1000, "s1")
    core.add("b", 25000, "s1")
    assert core.tick(0) == []   # s2 has said nothing: no watermark
    core.add("c", 12000, "s2")
    [act] = core.tick(0)        # min(25, 12) - 0 = 12 s
    assert act.window.tuples == ["a"]
    assert core.watermarks.watermark == 12000


def test_event_time_count_windows():
    core = core_for(window=Count(2), slide=Count(2), timestamp_field="ts")
    for name, ts in (("c", 3000), ("a", 1000), ("b", 2000), ("d", 4000), ("e", 5000)):
        core.add(name, ts)
    acts = core.tick(0)  # watermark 5 s: every tuple is released, in timestamp order
    assert [a.window.tuples for a in acts] == [["a", "b"], ["c", "d"]]
    assert all(a.window.start is None for a in acts)
    assert list(core.tuples) == ["c", "d", "e"]


def test_event_time_count_slides_count_tuples_that_share_a_millisecond():
    core = core_for(window=Count(4), slide=Count(2), timestamp_field="ts")
    for name in "abcde":
        core.add(name, 1000)
    core.add("f", 2000)
    acts = core.tick(0)  # watermark 2 s
    assert [a.window.tuples for a in acts] == [["a", "b"], ["a", "b", "c", "d"], ["c", "d", "e", "f"]]
    assert acts[2].evicted == ["a", "b"]
