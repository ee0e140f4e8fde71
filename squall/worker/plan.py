"""A topology made concrete: task ids, executors, ackers -- what every worker builds
from the definition it runs.

Task ids follow Storm: components sorted by id, tasks numbered from 1, the
``__acker`` system component included.  Executors own contiguous task ranges;
where they run is placement's (squall.nimbus.placement, for nimbus's scheduler and
local mode alike), which the worker never needs.
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
