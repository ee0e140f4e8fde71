"""The XOR ledger and the RotatingMap as pure cores: events in, outcomes out.

The ledger is one source (squall/acker/ledger.py, typed by ledger.pxd where it is
compiled): these tests run on what this process loaded, the build or, under
SQUALL_PURE_PYTHON=1, the Python it is built from."""

from __future__ import annotations

import random
import tracemalloc
from typing import Any

import pytest

from squall.acker import RotatingMap
from squall.acker.ledger import AckLedger, pack_acks


def test_tree_completes_only_when_every_edge_is_acked() -> None:
    # The worked example of the FsShelter message-flow document, scenario B.
    ledger = AckLedger()
    root, t1, t2 = 11, 0x1234, 0x9876
    assert ledger.init(root, t1, spout_task=5) is None
    assert ledger.ack(root, t1 ^ t2) is None  # bolt 1 acks t1, anchors t2
    assert ledger.ack(root, t2) == (5, root, True)
    assert len(ledger) == 0


def test_acks_may_overtake_the_init() -> None:
    ledger = AckLedger()
    e = random.getrandbits(64)
    assert ledger.ack(7, e) is None  # bolt was faster than the spout's init
    assert ledger.init(7, e, spout_task=2) == (2, 7, True)


def test_fail_is_immediate_and_forgets_the_tree() -> None:
    ledger = AckLedger()
    ledger.init(3, 99, spout_task=1)
    assert ledger.fail(3) == (1, 3, False)
    assert len(ledger) == 0
    # a late ack of a failed tree starts an orphan entry that never completes
    assert ledger.ack(3, 99) is None


def test_fail_before_init_fails_on_init() -> None:
    ledger = AckLedger()
    assert ledger.fail(4) is None
    assert ledger.init(4, 1, spout_task=9) == (9, 4, False)


def test_rotation_expires_pending_trees_to_their_spout() -> None:
    ledger = AckLedger(buckets=3)
    ledger.init(1, 5, spout_task=3)
    assert ledger.rotate() == []
    assert ledger.rotate() == []
    assert ledger.rotate() == [(3, 1, False)]


def test_an_update_resets_the_timeout() -> None:
    ledger = AckLedger(buckets=2)
    ledger.init(1, 5 ^ 6, spout_task=3)
    ledger.rotate()
    ledger.ack(1, 6)  # still pending, moved back to the newest bucket
    assert ledger.rotate() == []
    assert ledger.rotate() == [(3, 1, False)]


def test_orphan_acks_expire_silently() -> None:
    ledger = AckLedger(buckets=2)
    ledger.ack(1, 5)  # no init ever arrives: no spout to tell
    ledger.rotate()
    assert ledger.rotate() == []


def test_random_dags_complete_exactly_when_all_acked() -> None:
    """Many random trees, edges acked in random order: completion comes with the last ack."""
    rng = random.Random(42)
    for _ in range(200):
        ledger = AckLedger()
        root = rng.getrandbits(64)
        edges = [rng.getrandbits(64) for _ in range(rng.randint(1, 12))]
        # spout sends the first edges, each later edge is anchored to a random earlier one
        n_roots = rng.randint(1, len(edges))
        children: dict[int, list[int]] = {i: [] for i in range(len(edges))}
        for i in range(n_roots, len(edges)):
            children[rng.randrange(i)].append(i)
        init_val = 0
        for i in range(n_roots):
            init_val ^= edges[i]
        assert ledger.init(root, init_val, 0) is None
        order = list(range(len(edges)))
        rng.shuffle(order)
        for k, i in enumerate(order):
            val = edges[i]
            for c in children[i]:
                val ^= edges[c]
            outcome = ledger.ack(root, val)
            if k < len(order) - 1:
                assert outcome is None
            else:
                assert outcome == (0, root, True)


def test_rotating_map_put_moves_to_newest_bucket() -> None:
    m = RotatingMap(3)
    m.put("a", 1)
    m.rotate()
    m.put("b", 2)
    assert m.get("a") == 1 and "a" in m and len(m) == 2
    m.rotate()
    assert m.rotate() == {"a": 1}
    assert m.rotate() == {"b": 2}
    assert len(m) == 0


def test_a_pending_tree_costs_at_most_64_bytes() -> None:
    """Storm keeps ~20 bytes per pending tree; ours is three 64-bit words of one table,
    grown at three quarters full (in the build and in the interpreter alike)."""
    rng = random.Random(1)
    tracemalloc.start()
    ledger = AckLedger()
    for i in range(50_000):
        ledger.init(rng.getrandbits(64), rng.getrandbits(64), spout_task=i % 7)
    per_tree = tracemalloc.get_traced_memory()[0] / 50_000
    tracemalloc.stop()
    assert len(ledger) == 50_000 and per_tree <= 64


class ModelLedger:
    """What the ledger must do, as plainly as it can be said: a tree is one int (ack val,
    failed bit, spout task + 1 above) in a RotatingMap, an event one XOR (OR to fail)."""

    def __init__(self, buckets: int) -> None:
        self.pending = RotatingMap(buckets)

    def __len__(self) -> int:
        return len(self.pending)

    def apply(self, pairs: list[tuple[int, int]], failing: bool = False) -> list[tuple[int, int, bool]]:
        out = []
        for root, term in pairs:
            entry = self.pending.get(root) or 0
            entry = entry | term if failing else entry ^ term
            task, failed = (entry >> 65) - 1, bool((entry >> 64) & 1)
            if task >= 0 and (failed or not entry & ((1 << 64) - 1)):
                self.pending.pop(root)
                out.append((task, root, not failed))
            else:
                self.pending.put(root, entry)
        return out

    def init_many(self, items: list[tuple[int, int, int]]) -> list[tuple[int, int, bool]]:
        return self.apply([(root, val | ((task + 1) << 65)) for root, val, task in items])

    def ack_many(self, items: list[tuple[int, int]] | bytes) -> list[tuple[int, int, bool]]:
        if type(items) is bytes:
            items = [(int.from_bytes(items[k:k + 8], "little"), int.from_bytes(items[k + 8:k + 16], "little"))
                     for k in range(0, len(items), 16)]
        return self.apply(list(items))

    def fail_many(self, roots: list[int]) -> list[tuple[int, int, bool]]:
        return self.apply([(root, 1 << 64) for root in roots], failing=True)

    def rotate(self) -> list[tuple[int, int, bool]]:
        return [((e >> 65) - 1, root, False) for root, e in self.pending.rotate().items() if e >> 65]


def test_the_ledger_gives_the_model_s_outcomes_for_random_histories() -> None:
    rng = random.Random(11)
    # Few roots, so that events meet: inits, acks, fails in any order, rotations between,
    # in batches as the acker gets them, with a table that grows and empties again
    roots = [rng.getrandbits(64) for _ in range(3_000)] + [0, 1, (1 << 64) - 1]
    ledgers: tuple[Any, Any] = (ModelLedger(3), AckLedger(3))
    trees: list[tuple[int, int]] = []  # (root, val) of trees begun fresh, for acks that complete them
    for step in range(600):
        kind = rng.choice(["init", "ack", "fail", "tree", "tree", "complete", "complete"] if step % 50
                          else ["rotate"])
        if kind == "tree":
            fresh = [(rng.getrandbits(64), rng.getrandbits(64)) for _ in range(rng.randint(1, 400))]
            trees += fresh
            got = [ledger.init_many([(r, v, 4) for r, v in fresh]) for ledger in ledgers]
        elif kind == "complete":
            rng.shuffle(trees)
            done, trees = trees[:300], trees[300:]
            # as the bolts send them (packed), or as pairs
            got = [ledger.ack_many(pack_acks(done) if step % 2 else list(done)) for ledger in ledgers]
        elif kind == "rotate":
            got = [sorted(ledger.rotate()) for ledger in ledgers]
        else:
            picked = [rng.choice(roots) for _ in range(rng.randint(1, 60))]
            if kind == "init":
                batch: list[Any] = [(r, rng.getrandbits(64), rng.randrange(5)) for r in picked]
            elif kind == "ack":
                batch = [(r, rng.getrandbits(rng.choice([1, 8, 64]))) for r in picked]
            else:
                batch = picked
            got = [getattr(ledger, f"{kind}_many")(list(batch)) for ledger in ledgers]
        assert got[0] == got[1], (step, kind)
        assert len(ledgers[0]) == len(ledgers[1])


def test_packed_acks_that_are_not_whole_pairs_are_refused_and_change_nothing() -> None:
    ledger = AckLedger(3)
    ledger.init_many([(7, 5, 1)])
    with pytest.raises(ValueError, match="16-byte pairs, not 17 bytes"):
        ledger.ack_many(pack_acks([(7, 5)]) + b"x")
    assert len(ledger) == 1 and ledger.ack_many(pack_acks([(7, 5)])) == [(1, 7, True)]
