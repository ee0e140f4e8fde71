"""A spout's trees are tracked by an acker in its own worker when it has one."""

from __future__ import annotations

import random

from squall.worker.executors.emit import new_roots


def test_roots_pick_a_local_acker_and_stay_random_64_bit_ids() -> None:
    rng = random.Random(7)
    # Ackers at indices 1 and 3 of 4 live in this worker.
    new_root = new_roots(lambda: rng.getrandbits(64), 4, [1, 3])
    roots = [new_root() for _ in range(10_000)]
    assert {r % 4 for r in roots} == {1, 3}
    assert all(0 <= r < 1 << 64 for r in roots)
    assert len(set(roots)) == len(roots)
    assert max(roots).bit_length() == 64  # the high bits are untouched


def test_roots_near_the_top_of_the_range_stay_in_range() -> None:
    top = (1 << 64) - 1
    new_root = new_roots(lambda: top, 5, [4])
    root = new_root()
    assert root % 5 == 4 and root < 1 << 64


def test_without_a_local_acker_or_with_all_of_them_the_draw_is_untouched() -> None:
    def draw() -> int:
        return 12345

    assert new_roots(draw, 3, []) is draw
    assert new_roots(draw, 2, [0, 1]) is draw
