"""What nimbus shows: topologies listed and described, the workers' statistics
kept in windows, Storm's UI views, and the snapshot Prometheus scrapes.

Read-only: nothing here writes to ZooKeeper.  Every nimbus, leader or not,
keeps the statistics (see :meth:`TopologyViews.ingest_stats`), so that a
standby that takes over has the windows already.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from squall.cluster.state import ClusterState
from squall.errors import NotFound, TopologyValidationError
from squall.metrics.book import StatsBook
from squall.metrics.windows import ALL_TIME, WINDOW_IDS
from squall.nimbus import packing
from squall.runtime.debug_options import conf_debug
from squall.topology import resources
from squall.topology.component import OPERATIONS_OPTION
from squall.topology.topology import definition_from_dict
from squall.ui import prometheus, storm_api
from squall.ui.storm_api import TopologyView
from squall.version import VERSION
from squall.worker.plan import TopologyPlan, plan_topology


def record_named(state: ClusterState, name: str) -> dict[str, Any]:
    """The topology named ``name``, or a 404."""
    records = state.topologies()
    for record in records:
        if record["name"] == name:
            return record
    raise NotFound(f"no topology named {name!r} is running{_did_you_mean(name, records)}")


def resolve(state: ClusterState, ident: str) -> dict[str, Any]:
    """A topology by Storm's ``:id`` (Squall's topology id) or by its name."""
    records = state.topologies()
    for record in records:
        if record["id"] == ident:
            return record
    named = [r for r in records if r["name"] == ident]
    if not named:
        msg = f"no topology with id or name {ident!r} is running{_did_you_mean(ident, records)}"
        raise NotFound(msg)
    # A name killed and submitted again while the old one waits out its kill: the new one.
    return min(named, key=lambda r: r["status"] == "killing")


def _did_you_mean(name: str, records: list[dict[str, Any]]) -> str:
    """A running topology whose name differs only in case (the list is anyone's to read)."""
    close = sorted({r["name"] for r in records if r["name"].lower() == name.lower()})
    return f" (did you mean {', '.join(map(repr, close))}? names are case-sensitive)" if close else ""


def requested(plan: TopologyPlan, record: dict[str, Any]) -> tuple[float, float] | None:
    """(MB, CPU %) a topology scheduled by resources declares for all its executors; None for
    one the even scheduler places."""
    raw = {**record["definition"].get("config", {}), **record["conf"]}
    if not resources.resource_aware(raw, (c.config for c in plan.components.values())):
        return None
    try:
        needs = [resources.need_of(plan.components[e.component].config, plan.conf) for e in plan.executors]
    except TopologyValidationError:
        return None
    return round(sum(n.memory for n in needs), 1), round(sum(n.cpu for n in needs), 1)


def worker_sample(beat: dict[str, Any]) -> dict[str, Any]:
    """What nimbus keeps of a worker's heartbeat for the worker view (storm_api.worker_system)."""
    depths = [e.get("queue_depth") for e in beat.get("executor_stats") or [] if isinstance(e, dict)]
    numbers = [d for d in depths if isinstance(d, (int, float)) and not isinstance(d, bool)]
    return {"time": beat["time"], "pid": beat.get("pid"), "topology_id": beat.get("topology_id"),
            "system": dict(beat.get("system") or {}), "transfer": dict(beat.get("transfer") or {}),
            "queue_depth": sum(numbers) if numbers else None}


class TopologyViews:
    """Nimbus's read side: every method reads ZooKeeper or the statistics windows, none writes."""

    def __init__(self, state: ClusterState, now: Callable[[], float] = time.time,
                 stats: StatsBook | None = None, leader_url: Callable[[], str | None] = lambda: None) -> None:
        self.state = state
        self.now = now
        self.leader_url = leader_url  # the election's (squall.nimbus.daemon): what nimbus/summary names
        # Windows of the workers' statistics (every nimbus keeps them: see ingest_stats).
        self.stats = stats if stats is not None else StatsBook()
        self._stats_lock = threading.Lock()
        # (node, port) -> its worker's last two system samples [previous or None, latest] (see
        # worker_sample), read with the statistics: CPU and GC % are rates between the two.
        self.worker_samples: dict[tuple[str, int], list[dict[str, Any] | None]] = {}

    # -- lookups -------------------------------------------------------------

    def record(self, name: str) -> dict[str, Any]:
        return record_named(self.state, name)

    def resolve(self, ident: str) -> dict[str, Any]:
        """A topology by Storm's ``:id`` (Squall's topology id) or by its name."""
        return resolve(self.state, ident)

    def list(self) -> list[dict[str, Any]]:
        out = []
        for record in self.state.topologies():
            assignment = self.state.assignment(record["id"]) or {}
            workers = assignment.get("workers", [])
            out.append({
                "name": record["name"], "id": record["id"], "status": record["status"],
                "workers": len(workers), "executors": sum(len(w["executors"]) for w in workers),
                "uptime_secs": round(self.now() - record["submitted"], 1),
            })
        return out

    def logviewers(self) -> dict[str, str]:
        """node -> its supervisor's logviewer (squall.supervisor.logviewer), where it runs one."""
        return {node: info["logviewer"] for node, info in self.state.supervisors().items()
                if isinstance(info.get("logviewer"), str)}

    def info(self, name: str) -> dict[str, Any]:
        record = self.record(name)
        assignment = self.state.assignment(record["id"]) or {}
        beats = self.state.worker_beats()
        logviewers = self.logviewers()
        stats: dict[str, dict[str, Any]] = {}
        metrics: dict[str, dict[str, Any]] = {}  # component -> task -> the task's own metrics
        workers = []
        for w in assignment.get("workers", []):
            beat = beats.get(w["node"], {}).get(str(w["port"]))
            alive = bool(beat and beat.get("topology_id") == record["id"])
            workers.append({**w, "alive": alive, "beat_age_secs":
                            round(self.now() - beat["time"], 1) if alive else None,
                            "logviewer": logviewers.get(w["node"])})
            if alive:
                for component, tasks in (beat.get("metrics") or {}).items():
                    metrics.setdefault(component, {}).update(tasks)
                for component, s in (beat.get("stats") or {}).items():
                    total = stats.setdefault(component, {})
                    for key, value in s.items():
                        if isinstance(value, (int, float)):
                            total[key] = total.get(key, 0) + value
        return {"name": record["name"], "id": record["id"], "status": record["status"],
                "conf": record["conf"], "definition": record["definition"], "workers": workers,
                "stats": stats, "metrics": metrics, "errors": self.state.errors(record["id"]),
                # Storm's numbers over the last 10 minutes (the windows nimbus keeps).
                "components": self.component_stats(name, "600")}

    # -- statistics ----------------------------------------------------------

    def ingest_stats(self) -> None:
        """Read every worker's cumulative statistics from ZooKeeper into the windows.
        A worker's incarnation is (node, port, pid): a restarted one counts from zero."""
        live = {r["id"] for r in self.state.topologies()}
        now = self.now()
        samples: dict[tuple[str, int], list[dict[str, Any] | None]] = {}
        with self._stats_lock:
            for node, ports in self.state.worker_beats().items():
                for port, beat in ports.items():
                    tid = beat.get("topology_id")
                    if tid in live and beat.get("executor_stats"):
                        self.stats.ingest(tid, (node, port, beat.get("pid")), beat["executor_stats"], now)
                    if tid in live and isinstance(beat.get("time"), (int, float)):
                        self._keep_sample((node, int(port)), worker_sample(beat), samples)
            self.worker_samples = samples
            for tid in set(self.stats.first_seen) - live:
                self.stats.forget(tid)

    def _keep_sample(self, slot: tuple[str, int], sample: dict[str, Any],
                     into: dict[tuple[str, int], list[dict[str, Any] | None]]) -> None:
        """The slot's latest sample, after the one before when it is the same worker (same
        topology and pid) and a newer beat; the same beat read again changes nothing."""
        previous, latest = self.worker_samples.get(slot, [None, None])
        if latest is not None and latest["time"] == sample["time"]:
            into[slot] = [previous, latest]
        elif latest is not None and (latest["topology_id"], latest["pid"]) == (sample["topology_id"],
                                                                             sample["pid"]):
            into[slot] = [latest, sample]
        else:
            into[slot] = [None, sample]

    def samples(self, topology_id: str) -> dict[tuple[str, int], list[dict[str, Any] | None]]:
        """(node, port) -> the last two samples of the topology's workers."""
        with self._stats_lock:
            return {slot: list(pair) for slot, pair in self.worker_samples.items()
                    if pair[1] is not None and pair[1]["topology_id"] == topology_id}

    def component_stats(self, name: str, window: str) -> dict[str, dict[str, Any]]:
        """component -> Storm's statistics over ``window`` ("600", "10800", "86400", ":all-time")."""
        record = self.record(name)
        with self._stats_lock:
            return self.stats.components(record["id"], window, self.now())

    # -- Storm's UI API (storm_api shapes the answers) -------------------------

    def view(self, record: dict[str, Any], details: bool = False) -> TopologyView:
        """What nimbus knows of a topology; with ``details`` its errors and every window."""
        plan = plan_topology(definition_from_dict(record["definition"]), overrides=record["conf"])
        assignment = self.state.assignment(record["id"]) or {}
        hosts = assignment.get("hosts") or {}
        components = {name: {"kind": c.kind, "tasks": plan.component_tasks.get(name, []),
                             "executors": [e.id for e in plan.executors if e.component == name],
                             "inputs": [(i.component, i.stream) for i in c.inputs],
                             "streams": list(c.streams), "trident": c.options.get("trident"),
                             "operations": c.options.get(OPERATIONS_OPTION),
                             "conf_debug": conf_debug(plan.component_conf(name))}
                      for name, c in plan.components.items()}
        view = TopologyView(
            id=record["id"], name=record["name"], status=record["status"], submitted=record["submitted"],
            conf=plan.conf, components=components,
            workers=[{**w, "host": hosts.get(w["node"], w["node"])} for w in assignment.get("workers", [])],
            # The code lives in ZooKeeper: every nimbus has it.
            replication=max(len(self.state.nimbuses()), 1), samples=self.samples(record["id"]),
            logviewers=self.logviewers(), requested=requested(plan, record),
            scheduler_info=record.get("scheduler"), debug=self.state.debug_options(record["id"]))
        if details:
            view.errors = self.state.errors(record["id"])
            now = self.now()
            with self._stats_lock:
                running = [e for c in components.values() for e in c["executors"]]
                for window in WINDOW_IDS:
                    view.stats[window] = self.stats.components(record["id"], window, now, running)
                    view.executor_stats[window] = self.stats.executors(record["id"], window, now)
        return view

    def visualization(self, ident: str, window: str, sys: bool = False) -> dict[str, Any]:
        """The topology as a graph for the UI: nodes (spouts and bolts, with the numbers of the
        topology page over ``window``) and edges (the declared inputs, with their grouping and
        the tuples per second the consumer executed from them over the window).  The acker and
        system streams ("__...") only with ``sys``."""
        record = self.resolve(ident)
        view = self.view(record, details=True)
        now = self.now()
        with self._stats_lock:
            span = self.stats.span(record["id"], window, now)
        groupings = {(c["name"], i["component"], i["stream"]): i["grouping"]
                     for c in record["definition"]["components"] for i in c.get("inputs", [])}
        return storm_api.visualization(view, window, now, sys, span, groupings)

    def summary(self, head: str) -> Any:
        """Storm's ``/api/v1/<head>/summary`` for head in cluster, supervisor, nimbus, topology."""
        now = self.now()
        supervisors = self.state.supervisors()
        used = {(w["node"], w["port"]) for a in self.state.assignments().values() for w in a["workers"]}
        if head == "supervisor":
            # When each supervisor registered: the creation of its ephemeral node.
            started = self.state.supervisors_started()
            held: dict[str, tuple[float, float]] = {}
            for a in self.state.assignments().values():
                for w in a["workers"]:
                    memory, cpu = packing.usage(w)
                    before = held.get(w["node"], (0.0, 0.0))
                    held[w["node"]] = (before[0] + memory, before[1] + cpu)
            return storm_api.supervisor_summary(supervisors, started, used, VERSION, now, held)
        if head == "nimbus":
            return storm_api.nimbus_summary(self.state.nimbuses().values(), self.leader_url(), VERSION, now)
        views = [self.view(record) for record in self.state.topologies()]
        if head == "cluster":
            return storm_api.cluster_summary(views, supervisors, used, VERSION)
        return storm_api.topology_summary(views, now)

    def prometheus_snapshot(self) -> dict[str, Any]:
        """Plain data for squall.ui.prometheus: the cluster's slots, and per topology
        its executors' counters (all time), latencies and capacity (10 minutes), gauges and
        the components' own metrics, with where each executor runs, and its workers' latest
        system samples."""
        supervisors = self.state.supervisors()
        assignments = self.state.assignments()
        beats = self.state.worker_beats()
        used = {(w["node"], w["port"]) for a in assignments.values() for w in a["workers"]}
        now = self.now()
        topologies = []
        for record in self.state.topologies():
            view = self.view(record)
            user = [{"node": node, "worker": f"{view.hosts.get(node, node)}:{port}",
                     "metrics": beat["metrics"]}
                    for node, ports in beats.items() for port, beat in ports.items()
                    if beat.get("topology_id") == record["id"] and beat.get("metrics")]
            with self._stats_lock:
                all_time = self.stats.executors(record["id"], ALL_TIME, now)
                recent = self.stats.executors(record["id"], "600", now)
                latest = {e: dict(v) for (tid, e), v in self.stats.latest.items() if tid == record["id"]}
            topologies.append(prometheus.topology_entry(view, now, all_time, recent, latest, user))
        return {"supervisors": len(supervisors),
                "slots_total": sum(len(s["ports"]) for s in supervisors.values()),
                "slots_used": sum(1 for n, s in supervisors.items() for p in s["ports"] if (n, p) in used),
                "topologies": topologies}
