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


def spread(executors: list[ExecutorDef], slots: int) -> list[list[ExecutorDef]]:
    """Local mode's placement: :func:`spread_ids` over the plan's executors."""
    by_id = {e.id: e for e in executors}
    return [[by_id[i] for i in ids] for ids in spread_ids([(e.component, e.id) for e in executors], slots)]


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
