"""A spout's pending trees in C (squall/worker/executors/typed_pending.pyx) against the pure
twin (collector.pure_pending_trees, a RotatingMap of two buckets, and
collector.pure_settle): the same histories of emits, acks, fails and timeouts
give the same outcomes, and a tree costs less memory.  CI runs these against
the build (ops/bootstrap.sh makes it)."""

from __future__ import annotations

import random
import tracemalloc
from collections import deque
from typing import Any

import pytest

from squall import compiled
from squall.worker.executors import emit as collector

needs_build = pytest.mark.skipif(not compiled.accelerated(), reason="SQUALL_PURE_PYTHON=1: nothing is built")


def typed() -> Any:
    from squall.worker.executors import typed_pending

    return typed_pending


class Spout:
    """What settle calls: the user's ack and fail, recorded."""

    def __init__(self, task: int, calls: list[tuple[str, int, Any]]) -> None:
        self.spout = self
        self.task = task
        self.calls = calls

    def ack(self, msg_id: Any) -> None:
        self.calls.append(("ack", self.task, msg_id))

    def fail(self, msg_id: Any) -> None:
        self.calls.append(("fail", self.task, msg_id))


class Twin:
    def __init__(self, kind: str) -> None:
        self.pending = collector.pure_pending_trees() if kind == "pure" else typed().PendingTrees()
        self.settle = collector.pure_settle if kind == "pure" else typed().settle
        self.calls: list[tuple[str, int, Any]] = []
        self.by_task = {t: Spout(t, self.calls) for t in (3, 4)}
        self.latencies: deque[float] = deque()


@needs_build
def test_a_random_history_gives_the_same_acks_fails_timeouts_and_latencies() -> None:
    rng = random.Random(11)
    twins = (Twin("pure"), Twin("typed"))
    live: list[int] = []
    seen: set[int] = set()
    clock = 0.0
    for _ in range(4_000):
        clock += rng.uniform(0.0, 0.01)
        step = rng.random()
        if step < 0.5:  # an emit: a fresh random root (a few at the top of the range)
            root = rng.getrandbits(64) if rng.random() < 0.9 else (1 << 64) - rng.randrange(1, 10**6)
            if root in seen:
                continue  # a root is fresh: the spout draws 64 random bits for it
            seen.add(root)
            task, msg_id = rng.choice((3, 4)), rng.choice([rng.randrange(10**6), f"m{root}", None, (1, 2)])
            for t in twins:
                t.pending.put_new(root, (task, msg_id, clock))
            live.append(root)
        elif step < 0.9:  # an acker's message: some pending roots, and some that are not
            roots = [rng.choice(live) if live and rng.random() < 0.8 else rng.getrandbits(64)
                     for _ in range(rng.randrange(1, 20))]
            ok = rng.random() < 0.8
            outs = [t.settle(t.pending, roots, ok, clock, t.latencies, t.by_task) for t in twins]
            assert outs[0] == outs[1]
        elif step < 0.93:  # the tick: trees put before the last one time out
            expired = [t.pending.rotate() for t in twins]
            assert expired[0] == expired[1]
            assert list(expired[1].values()) == sorted(expired[1].values(), key=lambda v: v[2])
        else:  # a lookup by the pure API
            root = rng.choice(live) if live else 0
            assert (root in twins[0].pending) == (root in twins[1].pending)
        assert len(twins[0].pending) == len(twins[1].pending)
    pure_items = [(k, v) for bucket in twins[0].pending.buckets for k, v in bucket.items()]
    assert sorted(twins[1].pending.items()) == sorted(pure_items)
    assert twins[0].calls == twins[1].calls and len(twins[1].calls) > 300
    assert list(twins[0].latencies) == list(twins[1].latencies)


@needs_build
def test_a_tree_pops_once_and_a_replaced_root_keeps_the_last_value() -> None:
    table = typed().PendingTrees()
    table.put_new(7, (3, "a", 1.0))
    table.put_new(7, (4, "b", 2.0))
    assert len(table) == 1 and 7 in table
    assert table.pop(7) == (4, "b", 2.0)
    assert table.pop(7, "gone") == "gone" and len(table) == 0
    # growing past its first table keeps every tree
    for root in range(1, 5_000):
        table.put_new(root * 0x9E3779B97F4A7C15 % (1 << 64), (3, root, float(root)))
    assert len(table) == 4_999
    assert table.pop(1234 * 0x9E3779B97F4A7C15 % (1 << 64)) == (3, 1234, 1234.0)
    assert table.rotate() == {}  # put since the last rotation: not expired yet
    assert len(table.rotate()) == 4_998 and len(table) == 0


@needs_build
def test_a_pending_tree_costs_less_than_in_the_pure_table() -> None:
    def bytes_per_tree(make: Any) -> float:
        rng = random.Random(1)
        ids = list(range(20_000))  # the user's message ids exist either way
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        table = make()
        for msg_id in ids:  # as a spout's emit: a new root int and emit time each
            table.put_new(rng.getrandbits(64), (3, msg_id, 1.5 + msg_id))
        used = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        assert len(table) == 20_000
        return used / 20_000

    pure, fast = bytes_per_tree(collector.pure_pending_trees), bytes_per_tree(typed().PendingTrees)
    assert fast < 0.6 * pure, (fast, pure)
