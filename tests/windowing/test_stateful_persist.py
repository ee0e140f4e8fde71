"""The pure save/restore of a window's buffer (squall.windowing.persist): a core
restored from its JSON snapshot goes on exactly as the original does."""

from __future__ import annotations

import json

import pytest

from squall.clock import FakeClock
from squall.topology.tuple import Tuple, record_type
from squall.windowing import Count, Duration, WindowCore
from squall.windowing.persist import restore, snapshot
from squall.windowing.policy import make_policy

pytestmark = pytest.mark.timeout(30)

N = record_type(("n",))
SRC = ("numbers", "default")


def tup(n: int) -> Tuple:
    return Tuple(n, "numbers", "default", 2, N(n))


def ns(window) -> list[int]:
    return [t.values.n for t in window.tuples]


def through_json(core: WindowCore, policy) -> WindowCore:
    again = WindowCore(policy, [SRC])
    restore(again, json.loads(json.dumps(snapshot(core))))
    return again


def test_a_count_window_restored_mid_window_completes_it():
    policy = make_policy("test", tumbling=Count(10))
    core = WindowCore(policy, [SRC])
    for n in range(15):
        core.add(tup(n), n)
    again = through_json(core, policy)
    outs = [again.add(tup(n), n) for n in range(15, 20)]
    [act] = outs[-1]
    assert ns(act.window) == list(range(10, 20))
    assert [t.values.n for t in act.window.new] == list(range(10, 20))
    assert [t.values.n for t in act.evicted] == list(range(10))


def test_a_duration_window_restored_keeps_its_slide_and_new_tuples():
    clock = FakeClock(start=0.0)
    policy = make_policy("test", window=Duration.seconds(3), slide=Duration.seconds(1))
    core = WindowCore(policy, [SRC])
    core.add(tup(0), 0)
    core.tick(1000)
    core.add(tup(1), 1500)
    again = through_json(core, policy)
    clock.advance(2.0)
    [act] = again.tick(round(clock.now() * 1000))
    assert ns(act.window) == [0, 1]
    assert [t.values.n for t in act.window.new] == [1]


def test_event_time_watermarks_survive_a_restore():
    policy = make_policy("test", tumbling=Duration.seconds(1), timestamp_field="ts", lag=Duration.seconds(0),
                         watermark_interval=Duration.seconds(1))
    core = WindowCore(policy, [SRC])
    core.add(tup(0), 100, SRC)
    core.add(tup(1), 1200, SRC)
    core.tick(0)
    again = through_json(core, policy)
    assert again.watermarks.watermark == core.watermarks.watermark == 1200
    assert again.add(tup(2), 50, SRC) is None  # late, as it would be in the original


def test_restoring_nothing_empties_the_core():
    policy = make_policy("test", tumbling=Count(3))
    core = WindowCore(policy, [SRC])
    core.add(tup(0), 0)
    restore(core, None)
    assert len(core) == 0 and core.since_trigger == 0
