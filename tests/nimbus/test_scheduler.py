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


# The word count of benchmarks/topologies: task ids follow sorted component names.
WORDCOUNT = {(1, 1): "__acker", (2, 2): "__acker", (3, 3): "count", (4, 4): "count",
             (5, 5): "sentences", (6, 6): "sentences", (7, 7): "split", (8, 8): "split"}


def test_components_of_equal_parallelism_line_up_in_workers() -> None:
    placement = schedule(sorted(WORDCOUNT), 2, {"a": [6700], "b": [6700]}, component_of=WORDCOUNT)
    for execs in placement.values():
        # One slice of the pipeline per worker: the shuffle from a spout task finds a
        # splitter beside it, and every tree's acker is in the worker of its spout.
        assert sorted(WORDCOUNT[e] for e in execs) == ["__acker", "count", "sentences", "split"]


def test_fewer_executors_than_workers_still_share_a_worker() -> None:
    placement = schedule(sorted(WORDCOUNT), 4, {"a": [6700, 6701], "b": [6700, 6701]},
                         component_of=WORDCOUNT)
    full = [slot for slot, execs in placement.items()
            if {"sentences", "split", "count"} <= {WORDCOUNT[e] for e in execs}]
    assert len(full) == 2
    assert full[0][0] != full[1][0]  # the two busy workers are on different nodes (cores)
    assert sorted(e for execs in placement.values() for e in execs) == sorted(WORDCOUNT)


def test_single_executor_components_take_workers_in_turn() -> None:
    singles = {(1, 1): "a", (2, 2): "b", (3, 3): "c", (4, 4): "d"}
    placement = schedule(sorted(singles), 2, {"x": [1], "y": [1]}, component_of=singles)
    assert sorted(len(execs) for execs in placement.values()) == [2, 2]


# A Trident word count's state and its query, one executor each (squall.trident.planner
# colocates them): task ids follow sorted component names.
TRIDENT = {(1, 1): "b-0", (2, 2): "b-1", (3, 3): "spout1", (4, 4): "words"}
QUERY_BESIDE_STATE = [([(1, 1)], [(2, 2)])]  # b-1 (the query) runs beside b-0 (the state)


def _worker_of(placement: dict, executor: tuple[int, int]) -> tuple[str, int]:
    (slot,) = [slot for slot, execs in placement.items() if executor in execs]
    return slot


def test_colocated_executors_share_a_worker_where_singles_would_take_turns() -> None:
    free = {"x": [1], "y": [1]}
    apart = schedule(sorted(TRIDENT), 2, free, component_of=TRIDENT)
    assert _worker_of(apart, (1, 1)) != _worker_of(apart, (2, 2))  # what colocation is for
    placement = schedule(sorted(TRIDENT), 2, free, component_of=TRIDENT, pairs=QUERY_BESIDE_STATE)
    assert _worker_of(placement, (1, 1)) == _worker_of(placement, (2, 2))
    assert sorted(e for execs in placement.values() for e in execs) == sorted(TRIDENT)


def test_colocated_orphans_dealt_over_live_workers_stay_together() -> None:
    # The worker holding the state and its query died and no slot is free: its executors are
    # dealt over the live workers, which would put them apart.
    alive = {("x", 1): [(3, 3)], ("y", 1): [(4, 4)]}
    placement = schedule(sorted(TRIDENT), 3, {}, alive, TRIDENT, QUERY_BESIDE_STATE)
    assert _worker_of(placement, (1, 1)) == _worker_of(placement, (2, 2))
    assert placement[("x", 1)][0] == (3, 3) and placement[("y", 1)][0] == (4, 4)  # live ones kept


def test_a_follower_orphan_joins_its_anchor_on_a_live_worker() -> None:
    alive = {("x", 1): [(1, 1), (3, 3)], ("y", 1): [(4, 4)]}
    placement = schedule(sorted(TRIDENT), 2, {"z": [1]}, alive, TRIDENT, QUERY_BESIDE_STATE)
    assert _worker_of(placement, (2, 2)) == ("x", 1)
    assert ("z", 1) not in placement  # a new slot left empty is not a worker
