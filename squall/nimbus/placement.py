"""Where a topology's executors run: dealt over its workers by component
(:func:`spread_ids`), with the pairs ``topology.colocate.with`` asks for kept in
one worker (:func:`colocations`, :func:`colocate`).  Nimbus's scheduler places
with these, and local mode (squall.local.runner) with :func:`spread`; the plan
they place is the worker's own (squall.worker.plan), which every worker builds.
"""

from __future__ import annotations

from typing import Any

from squall.worker.plan import COLOCATE_WITH, ExecutorDef, ExecutorId, TopologyPlan


def spread(executors: list[ExecutorDef], slots: int,
           pairs: list[tuple[list[ExecutorId], list[ExecutorId]]] | None = None) -> list[list[ExecutorDef]]:
    """Local mode's placement: :func:`spread_ids` over the plan's executors, then
    :func:`colocate` (``pairs``: :func:`colocations`)."""
    by_id = {e.id: e for e in executors}
    placed = dict(enumerate(spread_ids([(e.component, e.id) for e in executors], slots)))
    colocate(placed, pairs or [])
    return [[by_id[i] for i in placed[slot]] for slot in range(slots)]


def colocations(plan: TopologyPlan) -> tuple[list[tuple[list[ExecutorId], list[ExecutorId]]], list[str]]:
    """What ``topology.colocate.with`` asks: for each component naming another, the executors
    of the one it ends at (following a chain of them) and its own, in order, so that executor
    j of both run in one worker -- and what is wrong with the others (admission refuses
    those; the scheduler leaves them where they fall).  Trident sets the key on a
    state_query's bolt: its task j reads partition j of a state that lives in a worker's
    memory or on its node (squall.trident.planner)."""
    ids: dict[str, list[ExecutorId]] = {}
    for e in plan.executors:
        ids.setdefault(e.component, []).append(e.id)
    pairs, problems = [], []
    for name in sorted(plan.components):
        anchor = plan.components[name].config.get(COLOCATE_WITH)
        if anchor is None:
            continue
        chain = [name]
        while anchor in plan.components and anchor not in chain:
            further = plan.components[anchor].config.get(COLOCATE_WITH)
            if further is None:
                break
            chain.append(anchor)
            anchor = further
        if anchor in chain:
            circle = " -> ".join([*chain, anchor])
            problems.append(f"{COLOCATE_WITH} of {name!r} goes round in a circle: {circle}")
        elif anchor not in plan.components:
            problems.append(f"{COLOCATE_WITH} of {name!r} names {anchor!r}, not a component of this "
                            f"topology (it has {sorted(c for c in plan.components if c[0] not in '_$')})")
        elif len(ids[anchor]) != len(ids[name]):
            problems.append(f"{COLOCATE_WITH} of {name!r} names {anchor!r}: executor j of each runs in one "
                            f"worker, so both need as many executors ({name!r} has {len(ids[name])}, "
                            f"{anchor!r} {len(ids[anchor])})")
        else:
            pairs.append((sorted(ids[anchor]), sorted(ids[name])))
    return pairs, problems


def colocate(placement: dict[Any, list[ExecutorId]],
             pairs: list[tuple[list[ExecutorId], list[ExecutorId]]]) -> dict[Any, list[ExecutorId]]:
    """``placement`` (slot -> executors) with executor j of each pair's second list moved to
    the slot of executor j of its first, in place.  Executors not in ``placement`` stay out."""
    where = {e: slot for slot, execs in placement.items() for e in execs}
    for anchors, followers in pairs:
        for anchor, follower in zip(anchors, followers, strict=True):
            to, at = where.get(anchor), where.get(follower)
            if to is None or at is None or to == at:
                continue
            placement[at].remove(follower)
            placement[to].append(follower)
            where[follower] = to
    return placement


def spread_ids(executors: list[tuple[str, tuple[int, int]]], slots: int) -> list[list[tuple[int, int]]]:
    """(component, executor id) pairs over ``slots`` workers, hot edges kept inside a worker.

    Executor j of a component with p executors goes to worker j when p <= slots,
    else to worker floor(j * slots / p), so components of equal parallelism line
    up (and the first slots, which take the busiest slices, are the ones
    scheduler.choose_slots spread over distinct nodes): the spout, splitter and counter
    tasks of index j share a worker, and a shuffle that prefers local tasks
    (routing.load_aware_shuffle) keeps that whole slice of the stream in-process.
    Storm's even scheduler deals executors round-robin in task order instead,
    which puts a spout's shuffle edge across workers half of the time.
    Single-executor components take the workers in turn, so that several of
    them do not all land on the first.
    """
    by_component: dict[str, list[tuple[int, int]]] = {}
    for component, executor in executors:
        by_component.setdefault(component, []).append(executor)
    placed: list[list[tuple[int, int]]] = [[] for _ in range(slots)]
    singles = 0
    for component in sorted(by_component):
        group = sorted(by_component[component])
        p = len(group)
        for j, executor in enumerate(group):
            if p == 1:
                slot = singles % slots
                singles += 1
            else:
                slot = j if p <= slots else j * slots // p
            placed[slot].append(executor)
    return placed
