"""A spout's pending trees (squall/worker/executors/pending.py, one source: typed by pending.pxd
where it is compiled) against a model (a RotatingMap of two buckets, the dict of tuples
it replaced): the same histories of emits, acks, fails and timeouts give the same
outcomes, and a tree costs less memory.  These run on what this process loaded: the
build, or under SQUALL_PURE_PYTHON=1 the Python it is built from."""

from __future__ import annotations

import random
import tracemalloc
from collections import deque
from typing import Any

from squall.acker.rotating_map import RotatingMap
from squall.worker.executors.pending import PendingTrees, settle


def model_settle(pending: RotatingMap, roots: list[int], ok: bool, now: float, latencies: Any,
                 by_task: dict[int, Any]) -> tuple[int, float]:
    """What settle must do, over the model's RotatingMap."""
    settled, waited = 0, 0.0
    for root in roots:
        entry = pending.pop(root)
        if entry is None:
            continue
        settled += 1
        task, msg_id, t0 = entry
        if ok:
            latencies.append(now - t0)
            waited += now - t0
            by_task[task].spout.ack(msg_id)
        else:
            by_task[task].spout.fail(msg_id)
    return settled, waited


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
        self.pending: Any = RotatingMap(2) if kind == "model" else PendingTrees()
        self.settle = model_settle if kind == "model" else settle
        self.calls: list[tuple[str, int, Any]] = []
        self.by_task = {t: Spout(t, self.calls) for t in (3, 4)}
        self.latencies: deque[float] = deque()


def test_a_random_history_gives_the_model_s_acks_fails_timeouts_and_latencies() -> None:
    rng = random.Random(11)
    twins = (Twin("model"), Twin("table"))
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
        else:  # a lookup
            root = rng.choice(live) if live else 0
            assert (root in twins[0].pending) == (root in twins[1].pending)
        assert len(twins[0].pending) == len(twins[1].pending)
    model_items = [(k, v) for bucket in twins[0].pending.buckets for k, v in bucket.items()]
    assert sorted(twins[1].pending.items()) == sorted(model_items)
    assert twins[0].calls == twins[1].calls and len(twins[1].calls) > 300
    assert list(twins[0].latencies) == list(twins[1].latencies)


def test_a_tree_pops_once_and_a_replaced_root_keeps_the_last_value() -> None:
    table = PendingTrees()
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


def test_a_pending_tree_costs_less_than_in_a_dict_of_tuples() -> None:
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

    model, table = bytes_per_tree(lambda: RotatingMap(2)), bytes_per_tree(PendingTrees)
    assert table < 0.6 * model, (table, model)
