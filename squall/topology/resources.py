"""What a component says it needs: memory and CPU per executor, as Storm's
resource-aware scheduler reads them (docs/scheduling.md).

A component declares on its spec (``Split.spec(par=2).set_memory_load(256).set_cpu_load(50)``),
through Storm's keys in its config, or Flux's ``onHeapMemoryLoad``/``offHeapMemoryLoad``/
``cpuLoad``; the topology's conf gives the value of every component that does not say.
Declaring anything -- or ``topology.scheduler.strategy: resource-aware`` -- makes nimbus
schedule the topology by resources (squall.nimbus.packing) and gives its workers memory
limits; a topology that declares nothing keeps the even scheduler.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from squall.errors import TopologyValidationError

ON_HEAP = "topology.component.resources.onheap.memory.mb"
OFF_HEAP = "topology.component.resources.offheap.memory.mb"
CPU = "topology.component.cpu.pcore.percent"
WORKER_MAX_HEAP = "topology.worker.max.heap.size.mb"
STRATEGY = "topology.scheduler.strategy"
COMPONENT_KEYS = (ON_HEAP, OFF_HEAP, CPU)
KEYS = (*COMPONENT_KEYS, WORKER_MAX_HEAP)

RESOURCE_AWARE = "resource-aware"
EVEN = "even"
# Storm's strategy class names, accepted so Storm configs load (each means resource-aware).
STORM_STRATEGIES = frozenset({
    "org.apache.storm.scheduler.resource.strategies.scheduling.DefaultResourceAwareStrategy",
    "org.apache.storm.scheduler.resource.strategies.scheduling.GenericResourceAwareStrategy",
    "org.apache.storm.scheduler.resource.strategies.scheduling.RoundRobinResourceAwareStrategy",
    "org.apache.storm.scheduler.resource.strategies.scheduling.ConstraintSolverStrategy",
})

# Beyond these a value is a slip (MB for GB, a percent of the whole machine), refused at submit:
# 1 TiB of memory for one executor or one worker, a thousand cores for one executor.
MAX_MEMORY_MB = 1024 * 1024
MAX_CPU_PERCENT = 100_000
_LIMITS = {ON_HEAP: MAX_MEMORY_MB, OFF_HEAP: MAX_MEMORY_MB, WORKER_MAX_HEAP: MAX_MEMORY_MB,
           CPU: MAX_CPU_PERCENT}
_DEFAULTS = {ON_HEAP: 128.0, OFF_HEAP: 0.0, CPU: 10.0, WORKER_MAX_HEAP: 768.0}


@dataclass(frozen=True)
class Need:
    """One executor's declared need: memory (MB, on and off heap) and CPU (% of a core)."""

    on_heap: float
    off_heap: float
    cpu: float

    @property
    def memory(self) -> float:
        return self.on_heap + self.off_heap


def check(key: str, value: Any, where: str) -> float:
    """``value`` of a resource ``key`` as a float, or TopologyValidationError naming ``where``:
    a number (not a bool, not NaN or infinite), >= 0 (> 0 for the worker's maximum), and not
    absurd (MAX_MEMORY_MB, MAX_CPU_PERCENT)."""
    unit = "percent of a core" if key == CPU else "MB"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        msg = f"{where}: {key} must be a number ({unit}), got {value!r}"
        raise TopologyValidationError(msg)
    least = 1 if key == WORKER_MAX_HEAP else 0
    if value < least:
        msg = f"{where}: {key} must be >= {least} ({unit}), got {value!r}"
        raise TopologyValidationError(msg)
    if value > _LIMITS[key]:
        msg = f"{where}: {key} of {value!r} {unit} is over the most Squall accepts ({_LIMITS[key]})"
        raise TopologyValidationError(msg)
    return float(value)


def need_of(component_conf: Mapping[str, Any], topology_conf: Mapping[str, Any], where: str = "") -> Need:
    """An executor's need: the component's own keys, else the topology's, else Storm's defaults."""
    def value(key: str) -> float:
        raw = component_conf.get(key, topology_conf.get(key, _DEFAULTS[key]))
        return check(key, raw, where or "component")
    return Need(value(ON_HEAP), value(OFF_HEAP), value(CPU))


def worker_max(topology_conf: Mapping[str, Any]) -> float:
    return check(WORKER_MAX_HEAP, topology_conf.get(WORKER_MAX_HEAP, _DEFAULTS[WORKER_MAX_HEAP]), "topology")


def resource_aware(raw_topology_conf: Mapping[str, Any],
                   component_confs: Iterable[Mapping[str, Any]]) -> bool:
    """Is the topology scheduled by resources?  ``raw_topology_conf``: its own settings (the
    definition's and the submit's), not merged with the defaults, which name every key."""
    strategy = raw_topology_conf.get(STRATEGY)
    if strategy == EVEN:
        return False
    if strategy == RESOURCE_AWARE or strategy in STORM_STRATEGIES:
        return True
    return any(k in raw_topology_conf for k in KEYS) or any(
        k in conf for conf in component_confs for k in COMPONENT_KEYS)


def check_strategy(raw_topology_conf: Mapping[str, Any]) -> None:
    strategy = raw_topology_conf.get(STRATEGY)
    if strategy is not None and strategy not in (EVEN, RESOURCE_AWARE) and strategy not in STORM_STRATEGIES:
        msg = (f"{STRATEGY} must be {RESOURCE_AWARE!r}, {EVEN!r} or one of Storm's resource-aware strategy "
               f"class names, got {strategy!r}")
        raise TopologyValidationError(msg)
