"""Storm's even scheduler, as a pure function over slots and executors.

A slot is (node, port).  New workers take free slots round-robin over the
nodes with the most free slots, so a topology's workers land on distinct
nodes; executors are dealt over its workers by component (placement.spread_ids),
so that tasks joined by a hot edge share a worker.  When some workers
of a running topology are dead, the live ones keep their executors and only
the orphans move — to fresh slots if there are any, else onto the live ones.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from squall.nimbus.placement import colocate, spread_ids
from squall.worker.plan import ExecutorId

Slot = tuple[str, int]
Pairs = list[tuple[list[ExecutorId], list[ExecutorId]]]


def choose_slots(free: dict[str, list[int]], count: int) -> list[Slot]:
    """Up to ``count`` free slots, one node after another."""
    queues = {node: sorted(ports) for node, ports in free.items() if ports}
    chosen: list[Slot] = []
    while len(chosen) < count and queues:
        for node in sorted(queues, key=lambda n: (-len(queues[n]), n)):
            if len(chosen) == count:
                break
            chosen.append((node, queues[node].pop(0)))
            if not queues[node]:
                del queues[node]
    return chosen


def deal(executors: Iterable[ExecutorId], slots: list[Slot],
         component_of: Mapping[ExecutorId, str] | None = None) -> dict[Slot, list[ExecutorId]]:
    """Executors over slots; without ``component_of`` every executor is its own group."""
    ids = sorted(executors)
    named = [(component_of[e] if component_of else f"#{e}", e) for e in ids]
    return dict(zip(slots, spread_ids(named, len(slots)), strict=True))


def schedule(
    executors: list[ExecutorId],
    num_workers: int,
    free: dict[str, list[int]],
    alive: dict[Slot, list[ExecutorId]] | None = None,
    component_of: Mapping[ExecutorId, str] | None = None,
    pairs: Pairs | None = None,
) -> dict[Slot, list[ExecutorId]]:
    """The new placement of a topology's executors.

    ``free`` are the slots no other topology uses (and not in ``alive``);
    ``alive`` are this topology's live workers and what they run now;
    ``component_of`` names each executor's component; ``pairs`` are the executors that
    must share a worker (squall.nimbus.placement.colocations), wherever the rest puts them --
    also when orphans are dealt over fewer slots than the topology's workers.  The result
    is empty when there is nowhere to run.
    """
    placement = _place(executors, num_workers, free, alive, component_of)
    colocate(placement, pairs or [])
    return {slot: execs for slot, execs in placement.items() if execs}


def _place(executors: list[ExecutorId], num_workers: int, free: dict[str, list[int]],
           alive: dict[Slot, list[ExecutorId]] | None,
           component_of: Mapping[ExecutorId, str] | None) -> dict[Slot, list[ExecutorId]]:
    wanted = set(executors)
    kept = {slot: [e for e in execs if e in wanted] for slot, execs in (alive or {}).items()}
    kept = {slot: execs for slot, execs in kept.items() if execs}
    placed_already = {e for execs in kept.values() for e in execs}
    orphans = [e for e in executors if e not in placed_already]
    if not orphans:
        return kept
    new_slots = choose_slots(free, max(num_workers - len(kept), 0))
    if not new_slots and not kept:
        new_slots = choose_slots(free, 1)
    if new_slots:
        placement = dict(kept)
        placement.update(deal(orphans, new_slots, component_of))
        return placement
    if not kept:
        return {}
    placement = {slot: list(execs) for slot, execs in kept.items()}
    for slot, extra in deal(orphans, sorted(kept), component_of).items():
        placement[slot].extend(extra)
    return placement
