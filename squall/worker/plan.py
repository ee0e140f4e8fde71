"""A topology made concrete: task ids, executors, ackers, placement.

Task ids follow Storm: components sorted by id, tasks numbered from 1, the
``__acker`` system component included.  Executors own contiguous task ranges
are spread over workers by :func:`spread`, in local mode and by nimbus's
scheduler alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from squall import config as config_mod
from squall.acker import ACKER_COMPONENT
from squall.topology.topology import ComponentDef, TopologyDef

ExecutorId = tuple[int, int]
# A component's config key: run executor j of this component beside executor j of the named one.
COLOCATE_WITH = "topology.colocate.with"


@dataclass(frozen=True)
class ExecutorDef:
    component: str
    tasks: tuple[int, ...]

    @property
    def id(self) -> tuple[int, int]:
        """Storm's executor id: [first task, last task]."""
        return (self.tasks[0], self.tasks[-1])


@dataclass
class TopologyPlan:
    name: str
    conf: dict[str, Any]
    components: dict[str, ComponentDef]
    component_tasks: dict[str, list[int]]
    task_component: dict[int, str]
    executors: list[ExecutorDef]
    acker_tasks: list[int]
    # component -> stream -> list of (subscriber component, grouping InputDef)
    subscribers: dict[str, dict[str, list[Any]]] = field(default_factory=dict)
    # The definition's own name (a Topology class's name, a Flux file's `name:`).  ``name``
    # is the submitted one in local mode; checkpointed state is keyed by this one in both
    # modes, so a resubmission under another name finds its state (docs/state.md).
    definition_name: str = ""

    @property
    def tracking(self) -> bool:
        return bool(self.acker_tasks)

    def component_conf(self, component: str) -> dict[str, Any]:
        cdef = self.components.get(component)
        return {**self.conf, **(cdef.config if cdef else {})}


def plan_topology(topology: TopologyDef, base: dict[str, Any] | None = None,
                  overrides: dict[str, Any] | None = None) -> TopologyPlan:
    """Config precedence: defaults < ``base`` (cluster) < topology's own < ``overrides`` (submit)."""
    merged = config_mod.merge(base, topology.config, overrides)
    workers = merged["topology.workers"]
    ackers = merged["topology.acker.executors"]
    if ackers is None:
        ackers = workers
    components = dict(topology.components)
    if ackers:
        components[ACKER_COMPONENT] = ComponentDef(
            name=ACKER_COMPONENT, kind="acker", cls=None, par=ackers, tasks=ackers,
            config={}, streams={},
        )
    component_tasks: dict[str, list[int]] = {}
    task_component: dict[int, str] = {}
    executors: list[ExecutorDef] = []
    next_task = 1
    for name in sorted(components):
        cdef = components[name]
        tasks = list(range(next_task, next_task + cdef.tasks))
        next_task += cdef.tasks
        component_tasks[name] = tasks
        for t in tasks:
            task_component[t] = name
        executors.extend(ExecutorDef(name, chunk) for chunk in _split(tasks, cdef.par))
    subscribers: dict[str, dict[str, list[Any]]] = {name: {} for name in components}
    for name, cdef in components.items():
        for inp in cdef.inputs:
            subscribers[inp.component].setdefault(inp.stream, []).append((name, inp))
    return TopologyPlan(
        name=topology.name,
        conf=merged,
        components=components,
        component_tasks=component_tasks,
        task_component=task_component,
        executors=executors,
        acker_tasks=component_tasks.get(ACKER_COMPONENT, []),
        subscribers=subscribers,
        definition_name=topology.name,
    )


def _split(tasks: list[int], parts: int) -> list[tuple[int, ...]]:
    """Storm's partitioning of a component's tasks over its executors."""
    n = len(tasks)
    out = []
    start = 0
    for i in range(parts):
        size = n // parts + (1 if i < n % parts else 0)
        out.append(tuple(tasks[start:start + size]))
        start += size
    return out


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
