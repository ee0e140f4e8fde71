"""What nimbus decides in a reconciliation round, apart from ZooKeeper.

A pure core, as dask-distributed's worker state machine is: the shell
(:mod:`squall.nimbus.control`) reads a topology's record and what the cluster
looks like, passes them in with the time, and carries out the actions that
come back.  Nothing here reads a clock or touches the network.

Per topology, one of:

* a topology being killed whose wait is over is removed (:class:`RemoveTopology`);
* otherwise its executors are placed: live workers keep theirs, and the
  executors of dead workers (a heartbeat unchanged for ``nimbus.task.timeout.secs``
  after their launch grace, or on a supervisor gone for that long) move, by
  :func:`squall.nimbus.scheduler.schedule`; an assignment that differs from
  the current one is written (:class:`WriteAssignment`).

And across topologies, the assignments whose topology no longer exists are
removed (:class:`RemoveOrphanAssignment`).

Liveness is judged on this nimbus's own monotonic clock (``local``), never by
comparing a heartbeat's time, written by the worker's machine, with this one's:
a heartbeat is fresh while it has *changed* within the timeout, as Storm's
nimbus keeps its heartbeat cache.  Comparing the two clocks made every worker
look dead the moment the leader's clock jumped ahead (docs/partitions.md,
"Heartbeats judged by a skewed clock"), and a worker whose machine ran ahead
look alive after it died.  A heartbeat first seen counts as changed then, so a
new leader gives each worker the timeout from its first look, as Storm does.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from squall.clock import LastChange
from squall.errors import TopologyValidationError
from squall.nimbus import packing
from squall.nimbus.placement import colocations
from squall.nimbus.scheduler import ExecutorId, Slot, schedule
from squall.topology import resources
from squall.topology.topology import definition_from_dict
from squall.worker.plan import TopologyPlan, plan_topology


@dataclass(frozen=True)
class RemoveTopology:
    """The topology's kill wait is over: remove it and everything of it."""

    topology_id: str
    name: str


@dataclass(frozen=True)
class WriteAssignment:
    topology_id: str
    name: str
    assignment: dict[str, Any]


@dataclass(frozen=True)
class RemoveOrphanAssignment:
    """Remove the assignment, if its topology is still missing when the shell looks again
    (one written since the shell read the topologies is not an orphan)."""

    topology_id: str


@dataclass(frozen=True)
class SetSchedulerStatus:
    """What the scheduler says of the topology changed: ``message`` is why it is not (fully)
    scheduled (resources short), None once it is; kept on the topology's record."""

    topology_id: str
    name: str
    message: str | None


Action = RemoveTopology | WriteAssignment | RemoveOrphanAssignment | SetSchedulerStatus


@dataclass(frozen=True)
class Observed:
    """What nimbus read of the cluster for a topology's round."""

    supervisors: Mapping[str, Mapping[str, Any]]  # node -> {"host", "ports", ...} of live supervisors
    beats: Mapping[str, Mapping[str, Mapping[str, Any]]]  # node -> str(port) -> the worker's heartbeat
    assignments: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # every topology's


class Reconciler:
    """Nimbus's decisions; its only memory is when it last saw each supervisor registered
    and each worker's heartbeat change, on its own clock."""

    def __init__(self, task_timeout_secs: float, launch_secs: float) -> None:
        self.task_timeout_secs = task_timeout_secs
        self.launch_secs = launch_secs
        # node -> when this nimbus last saw its supervisor registered (or first missed it).
        self.node_seen: dict[str, float] = {}
        # (topology, node, port) -> when this nimbus last saw the worker's heartbeat change
        self.beats = LastChange()

    def topology(self, record: Mapping[str, Any], current: Mapping[str, Any] | None, observed: Observed,
                 now: float, reschedule: bool = False, local: float | None = None) -> list[Action]:
        """The actions for one topology; ``current`` is its assignment (None: none yet), and
        with ``reschedule`` every executor is placed afresh (a rebalance).  ``now`` is the
        wall time (kill deadlines, the times written); ``local`` this nimbus's monotonic
        time, which liveness is judged on (``now`` when not given)."""
        local = now if local is None else local
        topology_id = record["id"]
        if record["status"] == "killing" and now >= record.get("kill_at", 0):
            self.beats.forget_where(lambda key: key[0] == topology_id)
            return [RemoveTopology(topology_id, record["name"])]
        plan = plan_topology(definition_from_dict(record["definition"]), overrides=record["conf"])
        supervisors = observed.supervisors
        used: set[Slot] = set()
        for other_id, other in observed.assignments.items():
            if other_id != topology_id:
                used.update((w["node"], w["port"]) for w in other["workers"])
        for node in supervisors:
            self.node_seen[node] = local
        alive: dict[Slot, list[ExecutorId]] = {}
        since: dict[Slot, float] = {}
        assigned = {(topology_id, w["node"], w["port"]) for w in (current or {}).get("workers", [])}
        # A slot no longer this topology's: its history goes.
        self.beats.forget_where(lambda key: key[0] == topology_id and key not in assigned)
        if current and not reschedule:
            for w in current["workers"]:
                slot = (w["node"], w["port"])
                since[slot] = w["since"]
                if self._alive(topology_id, w, observed, now, local):
                    alive[slot] = [tuple(e) for e in w["executors"]]  # type: ignore[misc]
        # A node failing its health check (squall.supervisor.health) keeps what runs there
        # and takes nothing new.
        free = {node: [p for p in info["ports"] if (node, p) not in used and (node, p) not in alive]
                for node, info in supervisors.items() if info.get("healthy", True)}
        actions: list[Action] = []
        component_of = {e.id: e.component for e in plan.executors}
        raw_conf = {**record["definition"].get("config", {}), **record["conf"]}
        if resources.resource_aware(raw_conf, (c.config for c in plan.components.values())):
            packed = self._by_resources(plan, record, supervisors, observed, free, alive, component_of)
            message = packed.reason if isinstance(packed, packing.Unfit) else None
            if message != record.get("scheduler"):
                actions.append(SetSchedulerStatus(topology_id, record["name"], message))
            if isinstance(packed, packing.Unfit):
                # Nothing half-placed: what runs now (if anything) stays as it is.
                if not current:
                    return actions
                return actions + self._activity(record, current, now)
            placement = packed.placement
            sizes = {slot: (packed.memory[slot], packed.cpu[slot]) for slot in placement}
        else:
            placement = schedule([e.id for e in plan.executors], record["num_workers"], free, alive,
                                 component_of, colocations(plan)[0])
            sizes = {}
        workers = [{"node": node, "port": port, "executors": [list(e) for e in sorted(execs)],
                    "since": since.get((node, port), now) if (node, port) in alive else now}
                   for (node, port), execs in sorted(placement.items())]
        for w in workers:
            memory, cpu = sizes.get((w["node"], w["port"]), (None, None))
            if memory is not None:
                w["memory_mb"], w["cpu"] = memory, cpu
        active = record["status"] == "active"
        known = (current or {}).get("hosts", {})
        hosts = {w["node"]: supervisors[w["node"]]["host"] if w["node"] in supervisors else known[w["node"]]
                 for w in workers}
        # What the workers apply while they run (self-regulation's max spout pending): a
        # change rewrites the assignment, never relaunches a worker.
        tuning = record.get("tuning") or {}
        if (current and current["workers"] == workers and current["active"] == active
                and (current.get("tuning") or {}) == tuning):
            return actions
        version = (current or {}).get("version", 0) + 1
        written = {"version": version, "time": now, "workers": workers, "hosts": hosts, "active": active}
        if tuning:
            written["tuning"] = tuning
        return [*actions, WriteAssignment(topology_id, record["name"], written)]

    @staticmethod
    def _activity(record: Mapping[str, Any], current: Mapping[str, Any], now: float) -> list[Action]:
        """The current assignment with its ``active`` (and tuning) brought up to the record's."""
        active = record["status"] == "active"
        tuning = record.get("tuning") or {}
        if current["active"] == active and (current.get("tuning") or {}) == tuning:
            return []
        written = {k: v for k, v in current.items() if k != "tuning"}
        written.update(version=current.get("version", 0) + 1, time=now, active=active)
        if tuning:
            written["tuning"] = tuning
        return [WriteAssignment(record["id"], record["name"], written)]

    @staticmethod
    def _by_resources(plan: TopologyPlan, record: Mapping[str, Any],
                      supervisors: Mapping[str, Mapping[str, Any]],
                      observed: Observed, free: Mapping[str, list[int]], alive: dict[Slot, list[ExecutorId]],
                      component_of: Mapping[ExecutorId, str]) -> packing.Packed | packing.Unfit:
        """The resource-aware scheduler's placement (squall.nimbus.packing)."""
        try:
            need = {e.id: resources.need_of(plan.components[e.component].config, plan.conf,
                                            f"component {e.component!r}") for e in plan.executors}
            max_heap = resources.worker_max(plan.conf)
        except TopologyValidationError as e:  # admission refuses these; a record from before it did
            return packing.Unfit(str(e))
        rooms = {}
        for node, ports in free.items():
            info = supervisors[node]
            memory = info.get("memory_mb")
            cpu = info.get("cpu")
            rooms[node] = packing.Room(list(ports), math.inf if memory is None else float(memory),
                                       math.inf if cpu is None else float(cpu))
        for other_id, other in observed.assignments.items():
            if other_id == record["id"]:
                continue
            for w in other["workers"]:
                if w["node"] in rooms:
                    memory, cpu = packing.usage(w)
                    rooms[w["node"]].memory -= memory
                    rooms[w["node"]].cpu -= cpu
        return packing.schedule([e.id for e in plan.executors], need, component_of, record["num_workers"],
                                max_heap, rooms, alive, colocations(plan)[0])

    def _alive(self, topology_id: str, worker: Mapping[str, Any], observed: Observed, now: float,
               local: float) -> bool:
        """Does the assigned ``worker`` keep its executors?"""
        node = worker["node"]
        if node not in observed.supervisors:
            # A supervisor restarting (an upgrade, a rotated keyring) leaves its workers
            # running, and its ZooKeeper node is gone for a moment: its workers keep their
            # executors for nimbus.task.timeout.secs from when it was last seen (from now
            # for a nimbus that never saw it, as Storm gives a new leader's first look).
            seen = self.node_seen.setdefault(node, local)
            return local - seen < self.task_timeout_secs
        beat = observed.beats.get(node, {}).get(str(worker["port"]))
        fresh = bool(beat and beat.get("topology_id") == topology_id and self.beats.age(
            (topology_id, node, worker["port"]), beat.get("time"), local) < self.task_timeout_secs)
        # The launch grace compares the assignment's time with the wall clock: both may
        # be a different nimbus's, and a skew only lengthens or shortens a grace that a
        # running worker's heartbeats make moot.
        return fresh or now - worker["since"] < self.launch_secs

    @staticmethod
    def orphans(topology_ids: Iterable[str], assignment_ids: Iterable[str]) -> list[RemoveOrphanAssignment]:
        """The assignments of topologies that no longer exist (Storm's nimbus cleans up the
        same way): whatever left one behind, a nimbus that died between removing a
        topology's parts, or an older nimbus's race."""
        known = set(topology_ids)
        return [RemoveOrphanAssignment(t) for t in assignment_ids if t not in known]
