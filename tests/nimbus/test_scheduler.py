"""The even scheduler as a pure core."""

from __future__ import annotations

from squall.nimbus.scheduler import choose_slots, schedule

EXECS = [(1, 1), (2, 2), (3, 3), (4, 4), (5, 5), (6, 6)]


def test_workers_spread_over_distinct_nodes_first() -> None:
    free = {"a": [6700, 6701], "b": [6700, 6701]}
    assert choose_slots(free, 2) == [("a", 6700), ("b", 6700)]
    assert sorted(choose_slots(free, 4)) == [("a", 6700), ("a", 6701), ("b", 6700), ("b", 6701)]


def test_fresh_topology_deals_executors_round_robin() -> None:
    placement = schedule(EXECS, 2, {"a": [6700], "b": [6700]})
    assert placement == {("a", 6700): [(1, 1), (3, 3), (5, 5)], ("b", 6700): [(2, 2), (4, 4), (6, 6)]}


def test_only_orphans_move_when_a_worker_died() -> None:
    alive = {("a", 6700): [(1, 1), (3, 3), (5, 5)]}
    placement = schedule(EXECS, 2, {"c": [6700]}, alive)
    assert placement[("a", 6700)] == [(1, 1), (3, 3), (5, 5)]
    assert placement[("c", 6700)] == [(2, 2), (4, 4), (6, 6)]


def test_orphans_fall_back_onto_live_workers_without_free_slots() -> None:
    alive = {("a", 6700): [(1, 1), (3, 3)], ("a", 6701): [(5, 5)]}
    placement = schedule(EXECS, 3, {}, alive)
    assert sorted(e for execs in placement.values() for e in execs) == EXECS
    assert set(placement) == {("a", 6700), ("a", 6701)}


def test_nowhere_to_run_is_an_empty_placement() -> None:
    assert schedule(EXECS, 2, {}) == {}


def test_fewer_slots_than_workers_still_places_everything() -> None:
    placement = schedule(EXECS, 4, {"a": [6700]})
    assert placement == {("a", 6700): EXECS}
