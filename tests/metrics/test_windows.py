"""Storm's statistics windows as a pure core: sums over 10 min, 3 h, 1 day and all time."""

from __future__ import annotations

import json

import pytest

from squall.metrics.windows import ALL_TIME, WINDOW_IDS, Deltas, RollingMean, RollingSum


def test_a_sum_is_seen_in_every_window_then_leaves_them_in_order() -> None:
    s = RollingSum()
    s.add(1000.0, 5)
    assert s.totals(1000.0) == {"600": 5, "10800": 5, "86400": 5, ALL_TIME: 5}
    # 11 minutes later it has left the 10-minute window only
    assert s.totals(1000.0 + 660) == {"600": 0, "10800": 5, "86400": 5, ALL_TIME: 5}
    # a little over 3 hours later, the 3-hour window too
    assert s.totals(1000.0 + 3 * 3600 + 600)["10800"] == 0
    assert s.totals(1000.0 + 3 * 3600 + 600)["86400"] == 5
    # and after a day, only all-time remembers it
    assert s.totals(1000.0 + 86400 + 3600) == {"600": 0, "10800": 0, "86400": 0, ALL_TIME: 5}


def test_sums_add_up_within_a_window_and_memory_stays_bounded() -> None:
    s = RollingSum()
    for second in range(0, 2 * 86400, 10):  # one add every 10 s for two days
        s.add(float(second), 1)
    now = float(2 * 86400 - 10)
    totals = s.totals(now)
    assert totals[ALL_TIME] == 2 * 86400 / 10
    assert 57 <= totals["600"] <= 60  # exact to one 30 s bucket
    assert abs(totals["10800"] - 1080) <= 30
    assert abs(totals["86400"] - 8640) <= 180
    assert len(s.buckets[600]) <= 21 and len(s.buckets[10800]) <= 37 and len(s.buckets[86400]) <= 49


def test_a_mean_per_window() -> None:
    m = RollingMean()
    m.add(0.0, total=10.0, count=2)  # 5 ms each
    m.add(700.0, total=3.0, count=3)  # 1 ms each, 11+ minutes later
    means = m.means(700.0)
    assert means["600"] == 1.0
    assert means[ALL_TIME] == pytest.approx(13 / 5)
    assert RollingMean().means(0.0) == dict.fromkeys(WINDOW_IDS)


def test_windows_survive_a_round_trip_through_json() -> None:
    s = RollingSum()
    s.add(100.0, 3)
    s.add(5000.0, 4)
    again = RollingSum.from_dict(json.loads(json.dumps(s.to_dict())))
    assert again.totals(5000.0) == s.totals(5000.0)


def test_cumulative_counters_become_increments_across_worker_restarts() -> None:
    d = Deltas()
    assert d.delta(("wc", 3, "emitted"), "inc-1", 100) == 100
    assert d.delta(("wc", 3, "emitted"), "inc-1", 150) == 50
    # the worker restarted: a new incarnation counts from zero again
    assert d.delta(("wc", 3, "emitted"), "inc-2", 20) == 20
    assert d.delta(("wc", 3, "emitted"), "inc-2", 20) == 0
    # a counter that went backwards without a new incarnation is a restart too
    assert d.delta(("wc", 3, "emitted"), "inc-2", 5) == 5
    d.forget(set())
    assert d.last == {}
