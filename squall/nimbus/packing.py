"""The resource-aware scheduler, as pure functions: executors packed into workers by
their declared memory, workers placed on nodes by what each node has left
(docs/scheduling.md).

Storm's resource-aware scheduler does the same with its own search; here:

* **into workers** (:func:`pack`): the executors are dealt as the even scheduler deals
  them (placement.spread_ids: slice j of every component in worker j, so a hot edge stays
  inside a worker) over the fewest workers -- at least the topology's ``topology.workers``
  -- in which no worker's declared memory passes ``topology.worker.max.heap.size.mb``;
  when no such deal exists within a few tries, largest executor first into the worker
  with the most room (worst fit), opening a worker when none has room;
* **onto nodes** (:func:`place`): largest worker first onto the node with the most free
  memory that has a free slot, the memory and the CPU, counting what every other
  topology's workers hold there (:func:`usage`);
* a topology that does not fit gets an :class:`Unfit` naming what is short, and is not
  scheduled (nothing half-placed).

A worker's memory limit (:func:`worker_limit`) is its executors' declared memory plus
:data:`WORKER_BASE_MB` for the interpreter, capped by the topology's worker maximum; it
is what the node is charged and what the supervisor holds the worker to
(squall.supervisor.memory).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from squall.nimbus.placement import colocate, spread_ids
from squall.topology.resources import Need
from squall.worker.plan import ExecutorId

Slot = tuple[str, int]
Pairs = list[tuple[list[ExecutorId], list[ExecutorId]]]

# What a worker's Python interpreter holds before any component's data: the
# interpreter, Squall's modules, ZeroMQ, msgpack and the queues (about 45 MB of RSS on
# an idle worker of tests/cluster/topologies/sized.py), with room for a busy one's
# queues and garbage not yet collected.
WORKER_BASE_MB = 96.0
# How a worker of a topology that declares nothing (the even scheduler's) is charged
# on its node: Storm's default per executor.
DEFAULT_NEED = Need(128.0, 0.0, 10.0)
DEFAULT_MAX_HEAP = 768.0
# Deals tried before falling back to worst fit: each is a pass over the executors.
_DEAL_TRIES = 32


@dataclass(frozen=True)
class Unfit:
    """Why the topology cannot be scheduled: one sentence for its status and nimbus's log."""

    reason: str


@dataclass
class Room:
    """What a node has left for new workers."""

    ports: list[int]
    memory: float
    cpu: float


@dataclass
class Packed:
    """A topology's workers: slot -> executors, and each worker's memory limit and CPU."""

    placement: dict[Slot, list[ExecutorId]]
    memory: dict[Slot, float] = field(default_factory=dict)
    cpu: dict[Slot, float] = field(default_factory=dict)


def worker_limit(executor_memory: float, max_heap: float) -> float:
    """A worker's memory limit (MB): its executors' memory and the interpreter's allowance,
    at most the topology's worker maximum."""
    return round(min(executor_memory + WORKER_BASE_MB, max_heap), 1)


def load(executors: list[ExecutorId], need: Mapping[ExecutorId, Need],
         max_heap: float) -> tuple[float, float]:
    """(memory limit, CPU) of a worker running ``executors``."""
    return (worker_limit(sum(need[e].memory for e in executors), max_heap),
            round(sum(need[e].cpu for e in executors), 1))


def usage(worker: Mapping[str, Any]) -> tuple[float, float]:
    """(memory, CPU) an assigned worker holds on its node: what the resource-aware scheduler
    gave it, or Storm's defaults per executor for a worker of the even scheduler."""
    if "memory_mb" in worker:
        return float(worker["memory_mb"]), float(worker.get("cpu", 0.0))
    n = len(worker.get("executors", []))
    return worker_limit(n * DEFAULT_NEED.memory, DEFAULT_MAX_HEAP), n * DEFAULT_NEED.cpu


def pack(executors: list[ExecutorId], need: Mapping[ExecutorId, Need], component_of: Mapping[ExecutorId, str],
         workers: int, max_heap: float, pairs: Pairs | None = None) -> list[list[ExecutorId]] | Unfit:
    """The executors in as few workers as fit ``max_heap`` (at least ``workers``, at most one
    per executor), each worker a list of executors."""
    ids = sorted(executors)
    if not ids:
        return []
    for e in ids:
        if need[e].memory > max_heap:
            return Unfit(f"an executor of {component_of[e]!r} needs {need[e].memory:g} MB, over "
                         f"topology.worker.max.heap.size.mb ({max_heap:g} MB): no worker can hold it")
    total = sum(need[e].memory for e in ids)
    least = min(max(workers, math.ceil(total / max_heap), 1), len(ids))
    named = [(component_of[e], e) for e in ids]
    for k in range(least, min(len(ids), least + _DEAL_TRIES) + 1):
        bins = _colocated([b for b in spread_ids(named, k) if b], pairs)
        if _fits(bins, need, max_heap):
            return bins
    bins = _colocated(_worst_fit(ids, need, least, max_heap), pairs)
    if not _fits(bins, need, max_heap):
        heaviest = max(sum(need[e].memory for e in b) for b in bins)
        return Unfit(f"topology.colocate.with puts {heaviest:g} MB in one worker, over "
                     f"topology.worker.max.heap.size.mb ({max_heap:g} MB)")
    return bins


def _colocated(bins: list[list[ExecutorId]], pairs: Pairs | None) -> list[list[ExecutorId]]:
    if pairs:
        placed = colocate(dict(enumerate(bins)), pairs)
        bins = [execs for _, execs in sorted(placed.items()) if execs]
    return [sorted(b) for b in bins]


def _fits(bins: list[list[ExecutorId]], need: Mapping[ExecutorId, Need], max_heap: float) -> bool:
    return all(sum(need[e].memory for e in b) <= max_heap for b in bins)


def _worst_fit(ids: list[ExecutorId], need: Mapping[ExecutorId, Need], least: int,
               max_heap: float) -> list[list[ExecutorId]]:
    bins: list[list[ExecutorId]] = [[] for _ in range(least)]
    used = [0.0] * least
    for e in sorted(ids, key=lambda e: (-need[e].memory, e)):
        roomiest = min(range(len(bins)), key=lambda i: (used[i], i))
        if used[roomiest] + need[e].memory > max_heap:
            bins.append([])
            used.append(0.0)
            roomiest = len(bins) - 1
        bins[roomiest].append(e)
        used[roomiest] += need[e].memory
    return [sorted(b) for b in bins if b]


def place(loads: list[tuple[float, float]], rooms: Mapping[str, Room]) -> list[Slot] | Unfit:
    """A slot for each worker of ``loads`` ((memory, CPU) each, in order), on the node with the
    most free memory that holds it; ``rooms`` is taken from as workers are placed."""
    slots: list[Slot | None] = [None] * len(loads)
    order = sorted(range(len(loads)), key=lambda i: (-loads[i][0], -loads[i][1], i))
    for n, i in enumerate(order):
        memory, cpu = loads[i]
        fitting = [node for node, r in rooms.items() if r.ports and r.memory >= memory and r.cpu >= cpu]
        if not fitting:
            return Unfit(_short(loads, n, memory, cpu, rooms))
        node = min(fitting, key=lambda nd: (-rooms[nd].memory, -rooms[nd].cpu, nd))
        room = rooms[node]
        slots[i] = (node, room.ports.pop(0))
        room.memory -= memory
        room.cpu -= cpu
    return [s for s in slots if s is not None]


def _short(loads: list[tuple[float, float]], placed: int, memory: float, cpu: float,
           rooms: Mapping[str, Room]) -> str:
    sizes = sorted({round(m) for m, _ in loads}, reverse=True)
    head = (f"needs {len(loads)} worker{'s' if len(loads) != 1 else ''} of "
            f"{'/'.join(str(s) for s in sizes)} MB ({sum(c for _, c in loads):g}% CPU in all)")
    if placed:
        head += f"; {placed} placed"
    open_nodes = {node: r for node, r in rooms.items() if r.ports}
    if not open_nodes:
        return f"{head}; no node has a free slot"
    node = min(open_nodes, key=lambda nd: (-open_nodes[nd].memory, nd))
    r = open_nodes[node]
    what = []
    if r.memory < memory:
        what.append(f"{r.memory:g} MB free for a worker of {memory:g} MB")
    if max(x.cpu for x in open_nodes.values()) < cpu:
        what.append(f"at most {max(x.cpu for x in open_nodes.values()):g}% CPU free for one needing {cpu:g}%")
    if not what:
        what.append("not both the memory and the CPU free")
    return f"{head}; largest free node {node} has {', '.join(what)}"


def schedule(executors: list[ExecutorId], need: Mapping[ExecutorId, Need],
             component_of: Mapping[ExecutorId, str], workers: int, max_heap: float, rooms: Mapping[str, Room],
             alive: Mapping[Slot, list[ExecutorId]] | None = None,
             pairs: Pairs | None = None) -> Packed | Unfit:
    """A topology's workers by resources.  ``rooms``: what each usable node has left, with
    this topology's ``alive`` workers (slot -> executors, which keep theirs) not yet charged;
    the executors of none of them (a dead worker's, all of them at first) are packed into
    new workers, or, where no node has room for a new one, into the live workers that
    have the memory and whose node has it too."""
    rooms = {node: Room(list(r.ports), r.memory, r.cpu) for node, r in rooms.items()}
    wanted = set(executors)
    kept = {slot: sorted(e for e in execs if e in wanted) for slot, execs in (alive or {}).items()}
    kept = {slot: execs for slot, execs in kept.items() if execs}
    packed = Packed({})
    for slot, execs in sorted(kept.items()):
        _charge(packed, slot, execs, need, max_heap, rooms)
    placed = {e for execs in kept.values() for e in execs}
    orphans = [e for e in sorted(executors) if e not in placed]
    if not orphans:
        return packed
    bins = pack(orphans, need, component_of, max(workers - len(kept), 1), max_heap, pairs)
    if isinstance(bins, Unfit):
        return bins
    loads = [load(b, need, max_heap) for b in bins]
    slots = place(loads, rooms)
    if isinstance(slots, Unfit):
        if kept and _into_live(packed, orphans, need, max_heap, rooms):
            return packed
        return slots
    for slot, execs in zip(slots, bins, strict=True):
        _charge(packed, slot, execs, need, max_heap, rooms, charge=False)
    return packed


def _charge(packed: Packed, slot: Slot, execs: list[ExecutorId], need: Mapping[ExecutorId, Need],
            max_heap: float, rooms: dict[str, Room], charge: bool = True) -> None:
    packed.placement[slot] = list(execs)
    packed.memory[slot], packed.cpu[slot] = load(execs, need, max_heap)
    if charge and slot[0] in rooms:
        rooms[slot[0]].memory -= packed.memory[slot]
        rooms[slot[0]].cpu -= packed.cpu[slot]


def _into_live(packed: Packed, orphans: list[ExecutorId], need: Mapping[ExecutorId, Need], max_heap: float,
               rooms: dict[str, Room]) -> bool:
    """The orphans added to the live workers (the roomiest first), each worker within
    ``max_heap`` and each node within what it has; ``packed`` is changed only if all fit."""
    trial = {slot: list(execs) for slot, execs in packed.placement.items()}
    left = {node: Room([], r.memory, r.cpu) for node, r in rooms.items()}
    for e in sorted(orphans, key=lambda e: (-need[e].memory, e)):
        def grown(slot: Slot, e: ExecutorId = e) -> tuple[float, float] | None:
            before = load(trial[slot], need, max_heap)
            memory = sum(need[x].memory for x in trial[slot]) + need[e].memory
            after = load([*trial[slot], e], need, max_heap)
            room = left.get(slot[0])
            if memory > max_heap or room is None or room.memory < after[0] - before[0] or \
                    room.cpu < after[1] - before[1]:
                return None
            return after[0] - before[0], after[1] - before[1]
        fitting = [(slot, g) for slot in sorted(trial) if (g := grown(slot)) is not None]
        if not fitting:
            return False
        slot, (memory, cpu) = min(fitting, key=lambda sg: (
            sum(need[x].memory for x in trial[sg[0]]), sg[0]))
        trial[slot].append(e)
        left[slot[0]].memory -= memory
        left[slot[0]].cpu -= cpu
    for slot, execs in trial.items():
        _charge(packed, slot, sorted(execs), need, max_heap, rooms, charge=False)
    return True
