"""A persisted window's tuples in partitions (squall.windowing.paged): at most
max_events_in_memory of them in memory however long the window, the same
windows as the unbounded buffer, and checkpoints writing only what changed."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from squall.state.store import MemoryStore
from squall.topology.tuple import Tuple, record_type
from squall.windowing import Count, Duration, WindowCore
from squall.windowing.paged import PagedTuples
from squall.windowing.persist import CODEC, restore, snapshot
from squall.windowing.policy import make_policy

pytestmark = pytest.mark.timeout(60)

N = record_type(("n",))
SRC = ("numbers", "default")
BOUND = 50


def tup(n: int) -> Tuple:
    return Tuple(None, "numbers", "default", 2, N(n))


class CountingStore(MemoryStore):
    """A MemoryStore counting the keys written (a pure test's store)."""

    def __init__(self) -> None:
        super().__init__()
        self.written: list[str] = []

    def update(self, keys: list[str], fn: Any) -> dict[str, Any]:
        out = super().update(keys, fn)
        self.written.extend(k for k, v in out.items() if v is not None)
        return out


def paged_core(policy: Any, store: Any = None) -> WindowCore:
    core = WindowCore(policy, [SRC])
    core.tuples = PagedTuples(store or CountingStore(), "t/1/window/part", BOUND, CODEC)  # type: ignore[assignment]
    return core


def outline(acts: list[Any]) -> list[Any]:
    """What process_window sees, as plain lists."""
    out = []
    for act in acts:
        w = act.window
        if w is not None:
            out.append(([t.values.n for t in w.tuples], [t.values.n for t in w.new],
                        [t.values.n for t in w.expired], w.start, w.end, len(w.tuples)))
        out.append(len(act.evicted))
    return out


def drive(core: WindowCore, feed: list[tuple[int, int]], tick_every: int = 0) -> tuple[list[Any], int]:
    """Feed (n, ts) pairs; the windows seen and the most tuples ever held in memory."""
    seen: list[Any] = []
    most = 0
    for i, (n, ts) in enumerate(feed):
        acts = core.add(tup(n), ts, SRC) or []
        if tick_every and i % tick_every == tick_every - 1:
            acts += core.tick(ts)
        seen += outline(acts)
        if isinstance(core.tuples, PagedTuples):
            most = max(most, core.tuples.held())
    return seen, most


@pytest.mark.parametrize("window", [
    {"tumbling": Count(2000)},
    {"window": Count(1000), "slide": Count(300)},
])
def test_a_count_window_far_bigger_than_the_bound_gives_the_same_windows(window: dict[str, Any]) -> None:
    policy = make_policy("test", **window)
    feed = [(n, n) for n in range(7000)]
    want, _ = drive(WindowCore(policy, [SRC]), feed)
    got, most = drive(paged_core(policy), feed)
    assert got == want and len(want) > 5
    assert most <= BOUND


def test_sums_over_window_tuples_work_and_paging_stays_bounded() -> None:
    policy = make_policy("test", tumbling=Count(3000))
    core = paged_core(policy)
    paged = core.tuples
    assert isinstance(paged, PagedTuples)
    sums, most = [], 0
    for n in range(9000):
        for act in core.add(tup(n), n) or []:
            w = act.window
            sums.append(sum(t.values.n for t in w.tuples))
            most = max(most, paged.held())
            assert w.tuples[0].values.n == n - 2999 and w.tuples[-1].values.n == n and len(w) == 3000
    assert sums == [sum(range(k, k + 3000)) for k in (0, 3000, 6000)]
    assert most <= BOUND and paged.loads > 100  # it paged, it did not hold


def test_event_time_out_of_order_tuples_give_the_same_windows() -> None:
    policy = make_policy("test", window=Duration.seconds(2), slide=Duration.seconds(1), timestamp_field="ts",
                         lag=Duration.seconds(1), watermark_interval=Duration.seconds(1))
    rng = random.Random(7)
    feed = [(n, n * 2 + rng.randrange(-500, 0) + 1000) for n in range(3000)]  # ~500 a second, jittered
    want, _ = drive(WindowCore(policy, [SRC]), feed, tick_every=100)
    got, most = drive(paged_core(policy), feed, tick_every=100)
    assert got == want and len(want) > 5
    assert most <= BOUND


def test_a_checkpoint_writes_only_the_partitions_that_changed() -> None:
    policy = make_policy("test", tumbling=Count(5000))
    store = CountingStore()
    core = paged_core(policy, store)
    for n in range(4000):
        core.add(tup(n), n)
    snapshot(core)
    core.tuples.committed()  # type: ignore[attr-defined]
    store.written.clear()
    for n in range(4000, 4010):  # ten more tuples: one or two partitions touched
        core.add(tup(n), n)
    snapshot(core)
    assert 1 <= len(store.written) <= 2


def test_a_paged_window_restored_from_its_snapshot_goes_on_the_same() -> None:
    policy = make_policy("test", window=Count(1000), slide=Count(300))
    store = CountingStore()
    core = paged_core(policy, store)
    for n in range(1500):
        core.add(tup(n), n)
    snap = json.loads(json.dumps(snapshot(core)))
    core.tuples.committed()  # type: ignore[attr-defined]
    for n in range(1500, 1700):  # lost: the worker died before the next checkpoint
        core.add(tup(n), n)
    again = paged_core(policy, store)
    restore(again, snap)
    unbounded = WindowCore(policy, [SRC])
    for n in range(1500):
        unbounded.add(tup(n), n)
    feed = [(n, n) for n in range(1500, 4000)]
    assert drive(again, feed)[0] == drive(unbounded, feed)[0]


def test_a_spill_between_prepare_and_commit_keeps_what_the_checkpoint_names() -> None:
    policy = make_policy("test", tumbling=Count(5000))
    store = CountingStore()
    core = paged_core(policy, store)
    for n in range(1000):
        core.add(tup(n), n)
    snap = json.loads(json.dumps(snapshot(core)))  # prepared
    for n in range(1000, 3000):  # tuples between prepare and commit: partitions spill
        core.add(tup(n), n)
    core.tuples.committed()  # type: ignore[attr-defined]
    again = paged_core(policy, store)
    restore(again, snap)
    assert [t.values.n for t in again.tuples] == list(range(1000))
    assert not store.get_many(["t/1/window/part/0.0"])[0]  # (version 0 is never written)
