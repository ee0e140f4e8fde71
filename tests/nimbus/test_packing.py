"""The resource-aware scheduler's pure core: executors packed into workers by declared
memory, workers onto nodes by what they have left, and why a topology does not fit."""

from __future__ import annotations

import math

import pytest

from squall.nimbus import packing
from squall.nimbus.packing import (
    WORKER_BASE_MB,
    Packed,
    Room,
    Unfit,
    pack,
    place,
    schedule,
    usage,
    worker_limit,
)
from squall.topology.resources import Need

ExecutorId = tuple[int, int]


Needs = tuple[list[ExecutorId], dict[ExecutorId, Need], dict[ExecutorId, str]]


def executors(**counts: tuple[int, float]) -> Needs:
    """component=(executors, MB each) -> ids, needs, components (task ids from 1, in order)."""
    ids, need, component_of = [], {}, {}
    task = 1
    for name, (n, mb) in counts.items():
        for _ in range(n):
            e = (task, task)
            ids.append(e)
            need[e] = Need(mb, 0.0, 10.0)
            component_of[e] = name
            task += 1
    return ids, need, component_of


def memory_of(bins: list[list[ExecutorId]], need: dict[ExecutorId, Need]) -> list[float]:
    return [sum(need[e].memory for e in b) for b in bins]


def rooms(**nodes: tuple[int, float, float]) -> dict[str, Room]:
    """node=(free slots, MB, CPU %)."""
    return {node: Room(list(range(6700, 6700 + slots)), mb, cpu) for node, (slots, mb, cpu) in nodes.items()}


def test_a_worker_limit_is_the_executors_memory_and_the_interpreters_allowance_capped() -> None:
    assert worker_limit(200, 768) == 200 + WORKER_BASE_MB
    assert worker_limit(760, 768) == 768
    assert worker_limit(0, 768) == WORKER_BASE_MB


def test_executors_that_fit_one_worker_share_one() -> None:
    ids, need, comp = executors(spout=(1, 100), split=(1, 100), count=(1, 100))
    bins = pack(ids, need, comp, 1, 768)
    assert bins == [ids]


def test_memory_over_the_worker_maximum_takes_more_workers_than_asked() -> None:
    ids, need, comp = executors(spout=(2, 300), count=(2, 300))
    bins = pack(ids, need, comp, 1, 768)
    assert not isinstance(bins, Unfit)
    assert len(bins) == 2 and all(m <= 768 for m in memory_of(bins, need))


def test_slices_of_components_joined_by_an_edge_stay_in_one_worker() -> None:
    ids, need, comp = executors(spout=(2, 200), split=(2, 200))
    bins = pack(ids, need, comp, 1, 500)
    assert not isinstance(bins, Unfit)
    # executor j of the spout with executor j of the split, as the even scheduler deals them
    assert sorted(sorted(comp[e] for e in b) for b in bins) == [["split", "spout"], ["split", "spout"]]


def test_at_least_the_workers_asked_for_are_used() -> None:
    ids, need, comp = executors(spout=(4, 10))
    bins = pack(ids, need, comp, 3, 768)
    assert not isinstance(bins, Unfit) and len(bins) == 3


def test_never_more_workers_than_executors() -> None:
    ids, need, comp = executors(spout=(2, 10))
    bins = pack(ids, need, comp, 8, 768)
    assert not isinstance(bins, Unfit) and len(bins) == 2


def test_an_executor_over_the_worker_maximum_does_not_fit_and_says_which() -> None:
    ids, need, comp = executors(spout=(1, 10), big=(1, 900))
    bins = pack(ids, need, comp, 1, 768)
    assert isinstance(bins, Unfit)
    assert "'big'" in bins.reason and "900 MB" in bins.reason
    assert "topology.worker.max.heap.size.mb" in bins.reason


def test_uneven_sizes_fall_back_to_worst_fit_within_the_maximum() -> None:
    # One component of mixed needs cannot be expressed, but two lopsided ones can: slices
    # of 700 + 10 MB fit, a deal that lined a 700 with another 700 would not.
    ids, need, comp = executors(a=(3, 700), b=(3, 10), c=(1, 60))
    bins = pack(ids, need, comp, 1, 768)
    assert not isinstance(bins, Unfit)
    assert all(m <= 768 for m in memory_of(bins, need))
    assert sorted(e for b in bins for e in b) == sorted(ids)
    assert len(bins) == 3


def test_worst_fit_packs_every_executor_once_and_within_the_maximum() -> None:
    sizes = [500, 400, 300, 200, 100, 90, 80, 70]
    need = {(i, i): Need(float(mb), 0.0, 1.0) for i, mb in enumerate(sizes, 1)}
    comp = {e: f"c{e[0]}" for e in need}
    bins = packing._worst_fit(sorted(need), need, 1, 600)
    assert sorted(e for b in bins for e in b) == sorted(need)
    assert all(m <= 600 for m in memory_of(bins, need))
    assert len(bins) == math.ceil(sum(n.memory for n in need.values()) / 600)
    assert not isinstance(pack(sorted(need), need, comp, 1, 600), Unfit)


def test_off_heap_memory_counts_with_on_heap() -> None:
    need = {(1, 1): Need(300.0, 300.0, 0.0), (2, 2): Need(300.0, 0.0, 0.0)}
    bins = pack(sorted(need), need, {(1, 1): "a", (2, 2): "b"}, 1, 768)
    assert not isinstance(bins, Unfit) and len(bins) == 2


def test_colocated_pairs_stay_together_and_a_pair_over_the_maximum_does_not_fit() -> None:
    ids, need, comp = executors(a=(2, 100), b=(2, 100))
    pairs = [([(1, 1), (2, 2)], [(4, 4), (3, 3)])]
    bins = pack(ids, need, comp, 2, 768, pairs)
    assert not isinstance(bins, Unfit)
    where = {e: i for i, b in enumerate(bins) for e in b}
    assert where[(1, 1)] == where[(4, 4)] and where[(2, 2)] == where[(3, 3)]
    ids, need, comp = executors(a=(1, 500), b=(1, 500))
    assert isinstance(pack(ids, need, comp, 1, 768, [([(1, 1)], [(2, 2)])]), Unfit)


def test_workers_go_to_the_node_with_the_most_free_memory_and_are_charged_there() -> None:
    free = rooms(n1=(2, 1000, 400), n2=(2, 2000, 400))
    slots = place([(600, 50), (600, 50)], free)
    assert slots == [("n2", 6700), ("n2", 6701)]
    assert free["n2"].memory == 800 and free["n2"].cpu == 300 and free["n2"].ports == []


def test_workers_spread_over_nodes_of_equal_room() -> None:
    free = rooms(n1=(2, 1000, 400), n2=(2, 1000, 400))
    slots = place([(300, 10), (300, 10)], free)
    assert not isinstance(slots, Unfit) and {s[0] for s in slots} == {"n1", "n2"}


def test_a_worker_larger_than_every_node_does_not_fit_and_the_reason_names_the_largest() -> None:
    free = rooms(n1=(2, 512, 400), n2=(2, 300, 400))
    slots = place([(900, 10), (900, 10)], free)
    assert isinstance(slots, Unfit)
    assert "needs 2 workers of 900 MB" in slots.reason
    assert "largest free node n1 has 512 MB free for a worker of 900 MB" in slots.reason


def test_cpu_short_is_named() -> None:
    slots = place([(100, 250)], rooms(n1=(1, 1000, 200)))
    assert isinstance(slots, Unfit) and "200% CPU free for one needing 250%" in slots.reason


def test_no_free_slot_is_named() -> None:
    slots = place([(100, 10)], rooms(n1=(0, 1000, 200)))
    assert isinstance(slots, Unfit) and "no node has a free slot" in slots.reason


def test_memory_is_checked_against_what_is_left_after_earlier_workers() -> None:
    slots = place([(600, 10), (600, 10)], rooms(n1=(4, 1000, 400)))
    assert isinstance(slots, Unfit) and "1 placed" in slots.reason and "400 MB free" in slots.reason


def test_schedule_places_every_executor_with_limits_and_cpu() -> None:
    ids, need, comp = executors(spout=(2, 300), count=(2, 300))
    packed = schedule(ids, need, comp, 1, 768, rooms(n1=(2, 4096, 400)))
    assert isinstance(packed, Packed)
    assert sorted(e for execs in packed.placement.values() for e in execs) == ids
    assert sorted(packed.memory.values()) == [600 + WORKER_BASE_MB] * 2
    assert sorted(packed.cpu.values()) == [20.0, 20.0]


def test_schedule_refuses_rather_than_placing_half() -> None:
    ids, need, comp = executors(spout=(2, 300), count=(2, 300))
    packed = schedule(ids, need, comp, 1, 768, rooms(n1=(2, 800, 400)))
    assert isinstance(packed, Unfit) and "needs 2 workers of 696 MB" in packed.reason


def test_live_workers_keep_their_executors_and_only_a_dead_ones_move() -> None:
    ids, need, comp = executors(spout=(2, 300), count=(2, 300))
    first = schedule(ids, need, comp, 1, 768, rooms(n1=(2, 4096, 400), n2=(2, 4096, 400)))
    assert isinstance(first, Packed)
    (live_slot, live), _dead = sorted(first.placement.items())
    # The node of the live worker has room left for it only: the dead one's executors go elsewhere.
    free = rooms(n1=(1, 100, 400), n2=(1, 4096, 400))
    free[live_slot[0]] = Room([p for p in range(6700, 6702) if (live_slot[0], p) != live_slot], 800, 400)
    again = schedule(ids, need, comp, 2, 768, free, alive={live_slot: live})
    assert isinstance(again, Packed)
    assert again.placement[live_slot] == live
    assert sorted(e for execs in again.placement.values() for e in execs) == ids


def test_orphans_join_live_workers_with_room_when_no_node_has_room_for_a_new_one() -> None:
    ids, need, comp = executors(spout=(2, 100))
    packed = schedule(ids, need, comp, 2, 768, {"n1": Room([], 1000, 400)}, alive={("n1", 6700): [(1, 1)]})
    assert isinstance(packed, Packed)
    assert packed.placement == {("n1", 6700): [(1, 1), (2, 2)]}
    assert packed.memory[("n1", 6700)] == 200 + WORKER_BASE_MB


def test_orphans_that_fit_nowhere_leave_the_topology_unfit() -> None:
    ids, need, comp = executors(spout=(2, 500))
    packed = schedule(ids, need, comp, 2, 768, {"n1": Room([], 5000, 400)}, alive={("n1", 6700): [(1, 1)]})
    assert isinstance(packed, Unfit)


def test_a_worker_of_the_even_scheduler_is_charged_stormss_defaults_per_executor() -> None:
    assert usage({"executors": [[1, 1], [2, 2]]}) == (worker_limit(256, 768), 20.0)
    assert usage({"executors": [[1, 1]], "memory_mb": 300, "cpu": 40}) == (300.0, 40.0)


@pytest.mark.parametrize("workers", [1, 2, 5])
def test_packing_many_executors_is_within_the_maximum_and_complete(workers: int) -> None:
    ids, need, comp = executors(a=(7, 90), b=(5, 130), c=(3, 250), d=(1, 10))
    bins = pack(ids, need, comp, workers, 512)
    assert not isinstance(bins, Unfit)
    assert sorted(e for b in bins for e in b) == ids and all(m <= 512 for m in memory_of(bins, need))
    assert len(bins) >= min(workers, len(ids))
