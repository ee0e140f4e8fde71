"""Storm's UI REST API (Storm's docs/STORM-UI-REST-API.md), shaped by pure functions.

Nimbus gathers plain data (a :class:`TopologyView` per topology: its record,
plan, assignment, errors and windows of statistics) and the functions here
turn it into what Storm's UI daemon answers, with Storm's camelCase field
names, so that a script written against Storm's API for these reads and
actions works unchanged.  Time is passed in (``now``), never read.

Approximations, where Squall keeps less than Storm:

* ``processLatency`` is the execute latency: a Squall bolt acks a tuple as
  its ``process`` returns (basic bolts), so the two coincide.
* Per input stream (``inputStats``, the ``/metrics`` endpoint's ``acked``
  and ``failed``) only ``executed`` is counted per stream; a bolt's acked and
  failed are shared among its inputs in proportion to what each executed, and
  its latencies are the component's.
* A spout's acks are not kept per stream: its acked, failed and complete
  latency are given on its stream when it has one, as 0 when it has several.
* Uptimes: a worker's and an executor's count from when nimbus assigned the
  worker's slot; a supervisor's from when it registered in ZooKeeper.
* ``replicationCount`` is the number of nimbuses: the code lives in ZooKeeper,
  where every nimbus reads it.

Squall's additions: every entry of the topology page's ``workers`` carries what
the worker's heartbeats report of it (``null`` while it has not reported, or
for a rate before two reports): ``rssBytes``, ``threads``, ``cpuPercent`` and
``gcPercent`` (CPU and garbage-collector seconds over wall seconds between its
last two reports, x 100; above 100 with several busy threads), ``gcCollections``
(collections so far per generation, [g0, g1, g2]), ``framesSent``,
``framesReceived``, ``framesDropped``, ``bytesSent``, ``bytesReceived`` (its
transfer's, cumulative),
``queueDepth`` (tuples waiting in its executors' queues) and ``backpressure``
(whether it has signalled backpressure).

Log links, as Storm's: ``workerLogLink`` of each worker and executor, ``errorWorkerLogLink``
of each error, to the node's logviewer (squall.supervisor.logviewer; empty where the node
runs none); ``workerDumpLink`` of each worker (Squall's): its stack dumps and profiles there
(squall.supervisor.dumps), Storm's profiling answers' ``dumplink``.

Storm's resource-aware figures (docs/scheduling.md): each supervisor's ``totalMem``,
``totalCpu``, ``usedMem``, ``usedCpu``, ``availMem``, ``availCpu``; each topology's
``schedulerInfo`` (why it is not scheduled, for one that does not fit), ``requestedTotalMem``,
``requestedCpu``, ``assignedTotalMem`` and ``assignedCpu``, and each worker's ``assignedMemOnHeap``
(its memory limit) and ``assignedCpu``.

Left out, having no Squall counterpart: the on/off-heap split of the memory figures,
``logviewerPort`` (the links carry it),
profiling and event-log debugging, owners and users, JSONP callbacks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from squall.metrics.windows import ALL_TIME, WINDOW_IDS
from squall.runtime.debug_options import Debug, DebugOptions, conf_debug

Executor = tuple[int, int]

# Squall's topology statuses -> Storm's (a killed topology shows KILLED during its wait).
STATUSES = {"active": "ACTIVE", "inactive": "INACTIVE", "killing": "KILLED", "rebalancing": "REBALANCING"}
MAX_ERROR_CHARS = 200  # Storm truncates lastError to this


@dataclass
class TopologyView:
    """What nimbus knows of one topology, as plain data."""

    id: str
    name: str
    status: str  # Squall's: active, inactive, killing
    submitted: float
    conf: dict[str, Any]  # the topology's whole conf, defaults merged
    # name -> {"kind": spout|bolt|acker, "tasks": [task...], "executors": [(first, last)...],
    #          "inputs": [(component, stream)...], "streams": [stream...]}
    components: dict[str, dict[str, Any]]
    workers: list[dict[str, Any]]  # the assignment's: node, port, executors, since; plus host
    errors: list[dict[str, Any]] = field(default_factory=list)
    replication: int = 1
    # window -> StatsBook.components(...) / StatsBook.executors(...); empty when not asked for
    stats: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    executor_stats: dict[str, dict[tuple[str, Executor], dict[str, Any]]] = field(default_factory=dict)
    # (node, port) -> the worker's last two samples {"time", "system", "transfer", "queue_depth"}:
    # [previous or None, latest] (see worker_system)
    samples: dict[tuple[str, int], list[dict[str, Any] | None]] = field(default_factory=dict)
    logviewers: dict[str, str] = field(default_factory=dict)  # node -> its logviewer's base URL
    # Scheduled by resources: (MB, CPU %) its executors declare; None: the even scheduler's
    requested: tuple[float, float] | None = None
    scheduler_info: str | None = None  # why it is not scheduled (squall.nimbus.packing.Unfit)
    debug: dict[str, Any] = field(default_factory=dict)  # its debug sampling (squall.runtime.debug_options)

    @property
    def hosts(self) -> dict[str, str]:
        return {w["node"]: w.get("host", w["node"]) for w in self.workers}

    def placement(self) -> dict[Executor, dict[str, Any]]:
        """executor -> the worker running it."""
        return {(int(e[0]), int(e[1])): w for w in self.workers for e in w["executors"]}


# -- formatting ------------------------------------------------------------------


def pretty_secs(secs: float) -> str:
    """Storm's prettyUptimeSec: 1759 -> "29m 19s", 86400 -> "1d 0h 0m 0s"."""
    left = max(int(secs), 0)
    if not left:
        return "0s"
    parts = []
    for unit, div in (("s", 60), ("m", 60), ("h", 24)):
        if left > 0:
            parts.append(f"{left % div}{unit}")
            left //= div
    if left > 0:
        parts.append(f"{left}d")
    return " ".join(reversed(parts))


def window_hint(window: str) -> str:
    return "All time" if window == ALL_TIME else pretty_secs(int(window))


def storm_status(status: str) -> str:
    return STATUSES.get(status, status.upper())


def encode(text: str) -> str:
    """Storm's encoded ids: a component id with '/' stays one path segment."""
    return quote(text, safe="")


def executor_id(executor: Executor) -> str:
    return f"[{executor[0]}-{executor[1]}]"


def _ms(value: float) -> str:
    return f"{value:.3f}"


def _uptime(since: float | None, now: float) -> dict[str, Any]:
    secs = int(now - since) if since is not None else 0
    return {"uptime": pretty_secs(secs), "uptimeSeconds": secs}


def is_system(name: str, kind: str) -> bool:
    return kind not in ("spout", "bolt") or name.startswith("__")


def op_response(topology_id: str, op: str) -> dict[str, Any]:
    return {"topologyOperation": op, "topologyId": topology_id, "status": "success"}


# -- cluster ---------------------------------------------------------------------


def cluster_summary(views: Iterable[TopologyView], supervisors: Mapping[str, Mapping[str, Any]],
                    used: set[tuple[str, int]], version: str) -> dict[str, Any]:
    views = list(views)
    total = sum(len(s["ports"]) for s in supervisors.values())
    used_here = sum(1 for node, s in supervisors.items() for p in s["ports"] if (node, p) in used)
    return {"stormVersion": version, "supervisors": len(supervisors), "topologies": len(views),
            "slotsTotal": total, "slotsUsed": used_here, "slotsFree": total - used_here,
            "executorsTotal": sum(_executors_total(v) for v in views),
            "tasksTotal": sum(_tasks_total(v) for v in views), "schedulerDisplayResource": False}


def supervisor_summary(supervisors: Mapping[str, Mapping[str, Any]], started: Mapping[str, float],
                       used: set[tuple[str, int]], version: str, now: float,
                       held: Mapping[str, tuple[float, float]] | None = None) -> dict[str, Any]:
    """``held``: node -> (MB, CPU %) its workers hold (squall.nimbus.packing.usage)."""
    out = []
    for node, s in sorted(supervisors.items()):
        busy = sum(1 for p in s["ports"] if (node, p) in used)
        memory, cpu = (held or {}).get(node, (0.0, 0.0))
        total_memory, total_cpu = s.get("memory_mb"), s.get("cpu")
        out.append({"id": node, "host": s["host"], **_uptime(started.get(node), now),
                    "slotsTotal": len(s["ports"]), "slotsUsed": busy, "slotsFree": len(s["ports"]) - busy,
                    "version": version,
                    # Storm's resource-aware figures: what the node offers, and what its workers hold
                    "totalMem": total_memory, "totalCpu": total_cpu, "usedMem": round(memory, 1),
                    "usedCpu": round(cpu, 1),
                    "availMem": None if total_memory is None else round(total_memory - memory, 1),
                    "availCpu": None if total_cpu is None else round(total_cpu - cpu, 1),
                    # Squall's own: its health check (storm.health.check.dir) failing, no new workers
                    "healthy": s.get("healthy", True), "health": s.get("health")})
    resources = any("memory_mb" in s for s in supervisors.values())
    return {"supervisors": out, "schedulerDisplayResource": resources}


def nimbus_summary(nimbuses: Iterable[Mapping[str, Any]], leader: str | None, version: str,
                   now: float) -> dict[str, Any]:
    out = []
    for n in sorted(nimbuses, key=lambda n: n["url"]):
        host, _, port = n["url"].split("://", 1)[-1].rpartition(":")
        up = int(now - n.get("started", now))
        out.append({"host": host, "port": int(port) if port.isdigit() else port,
                    "status": "Leader" if n["url"] == leader else "Not a Leader", "version": version,
                    "nimbusUpTime": pretty_secs(up), "nimbusUpTimeSeconds": up})
    return {"nimbuses": out}


# -- topologies ------------------------------------------------------------------


def _tasks_total(view: TopologyView) -> int:
    return sum(len(c["tasks"]) for c in view.components.values())


def _executors_total(view: TopologyView) -> int:
    return sum(len(w["executors"]) for w in view.workers)


def topology_entry(view: TopologyView, now: float) -> dict[str, Any]:
    """One topology of /api/v1/topology/summary (and the head of its page)."""
    entry = {"id": view.id, "encodedId": encode(view.id), "name": view.name,
             "status": storm_status(view.status), **_uptime(view.submitted, now),
             "tasksTotal": _tasks_total(view), "workersTotal": len(view.workers),
             "executorsTotal": _executors_total(view), "replicationCount": view.replication}
    if view.requested is not None:  # scheduled by resources
        entry.update({
            "schedulerInfo": view.scheduler_info or ("Fully Scheduled" if view.workers else "Not Scheduled"),
            "requestedTotalMem": view.requested[0], "requestedCpu": view.requested[1],
            "assignedTotalMem": round(sum(w.get("memory_mb", 0.0) for w in view.workers), 1),
            "assignedCpu": round(sum(w.get("cpu", 0.0) for w in view.workers), 1)})
    return entry


def topology_summary(views: Iterable[TopologyView], now: float) -> dict[str, Any]:
    return {"topologies": [topology_entry(v, now) for v in views], "schedulerDisplayResource": False}


def topology_workers(view: TopologyView) -> dict[str, Any]:
    return {"hostPortList": [{"host": w.get("host", w["node"]), "port": w["port"]} for w in view.workers]}


def worker_summaries(view: TopologyView, now: float) -> list[dict[str, Any]]:
    task_component = {t: name for name, c in view.components.items() for t in c["tasks"]}
    out = []
    for w in view.workers:
        counts: dict[str, int] = {}
        for first, last in w["executors"]:
            for task in range(int(first), int(last) + 1):
                component = task_component.get(task, "?")
                counts[component] = counts.get(component, 0) + 1
        out.append({"supervisorId": w["node"], "host": w.get("host", w["node"]), "port": w["port"],
                    "topologyId": view.id, "topologyName": view.name, "executorsTotal": len(w["executors"]),
                    "componentNumTasks": counts, "workerLogLink": log_link(view, w["node"], w["port"]),
                    "workerDumpLink": dump_link(view, w["node"], w.get("host", w["node"]), w["port"]),
                    **_uptime(w.get("since"), now),
                    **({"assignedMemOnHeap": w["memory_mb"], "assignedCpu": w.get("cpu")}
                       if "memory_mb" in w else {}),
                    **worker_system(*view.samples.get((w["node"], int(w["port"])), [None, None]))})
    return out


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def worker_system(previous: Mapping[str, Any] | None, latest: Mapping[str, Any] | None) -> dict[str, Any]:
    """Squall's fields of a worker (see the module's docstring) from its last two samples, each
    ``{"time": wall secs, "system": the beat's system, "transfer": its transfer, "queue_depth": n}``."""
    system = (latest or {}).get("system") or {}
    transfer = (latest or {}).get("transfer") or {}
    before = (previous or {}).get("system") or {}

    def percent(key: str) -> float | None:
        if latest is None or previous is None:
            return None
        elapsed, now, then = latest.get("time", 0) - previous.get("time", 0), system.get(key), before.get(key)
        if not (_number(now) and _number(then)) or elapsed <= 0:
            return None
        return round(max(0.0, (now - then) / elapsed * 100), 1)

    def number(mapping: Mapping[str, Any], key: str) -> Any:
        return mapping.get(key) if _number(mapping.get(key)) else None

    collections = system.get("gc_collections")
    backpressure = system.get("backpressure")
    return {"rssBytes": number(system, "rss_bytes"), "cpuPercent": percent("cpu_secs"),
            "gcPercent": percent("gc_secs"), "threads": number(system, "threads"),
            "gcCollections": list(collections) if isinstance(collections, list) else None,
            "framesSent": number(transfer, "frames_sent"),
            "framesReceived": number(transfer, "frames_received"),
            "framesDropped": number(transfer, "frames_dropped"),
            "bytesSent": number(transfer, "bytes_sent"),
            "bytesReceived": number(transfer, "bytes_received"),
            "queueDepth": number(latest or {}, "queue_depth"),
            "backpressure": backpressure if isinstance(backpressure, bool) else None}


def _component_stats(view: TopologyView, window: str, name: str) -> dict[str, Any]:
    zero = {"emitted": 0, "transferred": 0, "acked": 0, "failed": 0, "executed": 0, "capacity": 0.0,
            "completeLatency": "0.000", "executeLatency": "0.000", "processLatency": "0.000"}
    return {**zero, **view.stats.get(window, {}).get(name, {})}


def _last_error(view: TopologyView, name: str, now: float) -> dict[str, Any]:
    errors = [e for e in view.errors if e.get("component") == name]
    if not errors:
        return {"lastError": "", "errorHost": "", "errorPort": None, "errorWorkerLogLink": "",
                "errorTime": None, "errorLapsedSecs": None}
    last = max(errors, key=lambda e: e.get("time", 0))
    return {**_error_fields(view, last, now), "lastError": str(last.get("error", ""))[:MAX_ERROR_CHARS]}


def log_link(view: TopologyView, node: str, port: Any, name: str = "worker.log") -> str:
    """The worker's log (or its ``events.log``) on its node's logviewer ("" where there is
    none): Storm's workerLogLink (and eventLogLink)."""
    base = view.logviewers.get(node)
    if not base or port is None:
        return ""
    return f"{base}/api/v1/log?file={quote(f'{view.id}/{port}/{name}', safe='')}"


def _debug_fields(setting: Debug) -> dict[str, Any]:
    return {"debug": setting.enable, "samplingPct": setting.pct}


def event_log_link(view: TopologyView, name: str) -> str:
    """The events.log of the worker running the component's first executor: each worker
    writes its own tasks' sampled tuples (squall.worker.event_log); "" while none runs."""
    placement = view.placement()
    for executor in view.components[name]["executors"]:
        worker = placement.get((int(executor[0]), int(executor[1])))
        if worker is not None:
            return log_link(view, worker["node"], worker["port"], "events.log")
    return ""


def dump_link(view: TopologyView, node: str, host: str, port: Any) -> str:
    """Where the worker's stack dumps and profiles are listed on its node's logviewer ("" where
    there is none): Storm's profiling answers' ``dumplink`` (squall.supervisor.dumps)."""
    base = view.logviewers.get(node)
    if not base or port is None:
        return ""
    return f"{base}/api/v1/dumps/{quote(view.id, safe='')}/{quote(f'{host}:{port}', safe='')}"


def _error_fields(view: TopologyView, error: Mapping[str, Any], now: float) -> dict[str, Any]:
    when = error.get("time")
    node = error.get("node", "")
    return {"errorHost": view.hosts.get(node, node), "errorPort": error.get("port"),
            "errorWorkerLogLink": log_link(view, node, error.get("port")),
            "errorTime": int(when) if when is not None else None,
            "errorLapsedSecs": int(now - when) if when is not None else None}


def _visible(view: TopologyView, kind: str, sys: bool) -> list[str]:
    return [name for name, c in sorted(view.components.items())
            if (c["kind"] == kind or (kind == "bolt" and sys and c["kind"] == "acker"))
            and (sys or not is_system(name, c["kind"]))]


def _spout_entry(view: TopologyView, name: str, window: str, now: float) -> dict[str, Any]:
    c, s = view.components[name], _component_stats(view, window, name)
    return {"spoutId": name, "encodedSpoutId": encode(name), "executors": len(c["executors"]),
            "tasks": len(c["tasks"]), "emitted": s["emitted"], "transferred": s["transferred"],
            "acked": s["acked"], "failed": s["failed"], "completeLatency": s["completeLatency"],
            "timedOut": s.get("timedOut", 0),  # Squall's own: of failed, not acked in time
            **_trident_fields(c), **_last_error(view, name, now)}


def _bolt_entry(view: TopologyView, name: str, window: str, now: float) -> dict[str, Any]:
    c, s = view.components[name], _component_stats(view, window, name)
    return {"boltId": name, "encodedBoltId": encode(name), "executors": len(c["executors"]),
            "tasks": len(c["tasks"]), "emitted": s["emitted"], "transferred": s["transferred"],
            "acked": s["acked"], "failed": s["failed"], "executed": s["executed"],
            "executeLatency": s["executeLatency"], "processLatency": s["processLatency"],
            "capacity": _ms(s["capacity"]), **_trident_fields(c), **_last_error(view, name, now)}


def _trident_fields(component: Mapping[str, Any]) -> dict[str, Any]:
    """A Trident topology's component (Squall's own fields): its batch group (the spout's
    transactional id) and the Trident operations it runs; a Streams API bolt's operations."""
    trident = component.get("trident")
    if not trident:
        operations = component.get("operations")
        return {"operations": list(operations)} if operations else {}
    return {"batchGroup": trident.get("batchGroup"),
            "tridentOperations": list(trident.get("operations") or []),
            "tridentRole": trident.get("role") or ("committer" if trident.get("committer") else "operations")}


def batch_groups(view: TopologyView) -> dict[str, list[str]]:
    """A Trident topology's batch groups: transactional id -> its components, in order."""
    out: dict[str, list[str]] = {}
    for name, c in sorted(view.components.items()):
        group = (c.get("trident") or {}).get("batchGroup")
        if group:
            out.setdefault(group, []).append(name)
    return out


def topology_stats(view: TopologyView, sys: bool = False) -> list[dict[str, Any]]:
    """Storm's topologyStats: one entry per window; acked, failed and the complete
    latency are the spouts' (whole tuple trees), emitted and transferred everyone's."""
    out = []
    for window in WINDOW_IDS:
        stats = view.stats.get(window, {})
        shown = [n for n in stats
                 if n in view.components and (sys or not is_system(n, view.components[n]["kind"]))]
        spouts = [stats[n] for n in shown if view.components[n]["kind"] == "spout"]
        acked = sum(s["acked"] for s in spouts)
        latency = sum(float(s["completeLatency"]) * s["acked"] for s in spouts)
        out.append({"windowPretty": window_hint(window), "window": window,
                    "emitted": sum(stats[n]["emitted"] for n in shown),
                    "transferred": sum(stats[n]["transferred"] for n in shown),
                    "completeLatency": _ms(latency / acked if acked else 0.0), "acked": acked,
                    "failed": sum(s["failed"] for s in spouts)})
    return out


def topology_page(view: TopologyView, window: str, now: float, sys: bool = False) -> dict[str, Any]:
    """/api/v1/topology/:id"""
    return {**topology_entry(view, now), "window": window, "windowHint": window_hint(window),
            "msgTimeout": view.conf.get("topology.message.timeout.secs"),
            "topologyStats": topology_stats(view, sys), "workers": worker_summaries(view, now),
            "spouts": [_spout_entry(view, n, window, now) for n in _visible(view, "spout", sys)],
            "bolts": [_bolt_entry(view, n, window, now) for n in _visible(view, "bolt", sys)],
            "configuration": view.conf, "schedulerDisplayResource": False,
            **_debug_fields(DebugOptions.from_wire(view.debug).topology_setting(conf_debug(view.conf))),
            **({"batchGroups": groups} if (groups := batch_groups(view)) else {})}


# -- one component ---------------------------------------------------------------


def _executors_of(view: TopologyView, name: str, window: str) -> dict[Executor, dict[str, Any]]:
    stats = view.executor_stats.get(window, {})
    return {tuple(e): stats.get((name, tuple(e)), {}) for e in view.components[name]["executors"]}


def _streams(view: TopologyView, name: str, window: str, stat: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for e in _executors_of(view, name, window).values():
        for stream, n in (e.get("streams", {}).get(stat) or {}).items():
            out[stream] = out.get(stream, 0) + n
    return out


def _output_streams(view: TopologyView, name: str, window: str) -> list[tuple[str, int, int]]:
    emitted = _streams(view, name, window, "emitted")
    transferred = _streams(view, name, window, "transferred")
    names = sorted({*view.components[name].get("streams", []), *emitted, *transferred})
    return [(s, emitted.get(s, 0), transferred.get(s, 0)) for s in names]


def _input_streams(view: TopologyView, name: str, window: str, sys: bool) -> list[tuple[str, str, int]]:
    """(source component, stream, executed), the declared inputs listed even before any tuple."""
    declared = {f"{src}:{stream}": (src, stream) for src, stream in view.components[name].get("inputs", [])}
    executed: dict[tuple[str, str], int] = {key: 0 for key in declared.values()}
    for key, n in _streams(view, name, window, "executed_by").items():
        # "source:stream": a declared input tells where to cut when a name holds a ':'
        source, _, stream = key.partition(":")
        pair = declared.get(key, (source, stream))
        executed[pair] = executed.get(pair, 0) + n
    return [(src, stream, n) for (src, stream), n in sorted(executed.items())
            if sys or not src.startswith("__")]


def _share(total: int, part: int, whole: int) -> int:
    return round(total * part / whole) if whole else 0


def component_page(view: TopologyView, name: str, window: str, now: float,
                   sys: bool = False) -> dict[str, Any]:
    """/api/v1/topology/:id/component/:component"""
    c = view.components[name]
    kind = "spout" if c["kind"] == "spout" else "bolt"
    debug = DebugOptions.from_wire(view.debug).component_setting(name, bool(c.get("conf_debug")))
    errors = sorted((e for e in view.errors if e.get("component") == name), key=lambda e: e.get("time", 0))
    out: dict[str, Any] = {
        "id": name, "encodedId": encode(name), "name": view.name, "executors": len(c["executors"]),
        "tasks": len(c["tasks"]), "topologyId": view.id, "encodedTopologyId": encode(view.id),
        "topologyStatus": storm_status(view.status), "window": window, "windowHint": window_hint(window),
        "componentType": kind, "schedulerDisplayResource": False, **_trident_fields(c),
        **_debug_fields(debug),
        "eventLogLink": event_log_link(view, name),
        # Storm's "error" is the whole stack trace (lastError elsewhere stays the one line).
        "componentErrors": [{**_error_fields(view, e, now), "error": e.get("trace") or e.get("error", "")}
                            for e in errors],
        "executorStats": _executor_stats(view, name, window, kind, now),
    }
    outputs = _output_streams(view, name, window)
    s = _component_stats(view, window, name)
    if kind == "spout":
        out["spoutSummary"] = [_spout_window(view, name, w) for w in WINDOW_IDS]
        single = len(outputs) == 1  # acks are not kept per stream: only a lone stream owns them
        out["outputStats"] = [{"stream": st, "emitted": em, "transferred": tr,
                               "completeLatency": s["completeLatency"] if single else "0.000",
                               "acked": s["acked"] if single else 0, "failed": s["failed"] if single else 0}
                              for st, em, tr in outputs]
    else:
        out["boltStats"] = [_bolt_window(view, name, w) for w in WINDOW_IDS]
        inputs = _input_streams(view, name, window, sys)
        whole = sum(n for _, _, n in inputs)
        out["inputStats"] = [{"component": src, "encodedComponentId": encode(src), "stream": stream,
                              "executeLatency": s["executeLatency"], "processLatency": s["processLatency"],
                              "executed": n, "acked": _share(s["acked"], n, whole),
                              "failed": _share(s["failed"], n, whole)} for src, stream, n in inputs]
        out["outputStats"] = [{"stream": st, "emitted": em, "transferred": tr} for st, em, tr in outputs]
    return out


def _spout_window(view: TopologyView, name: str, window: str) -> dict[str, Any]:
    s = _component_stats(view, window, name)
    return {"window": window, "windowPretty": window_hint(window), "emitted": s["emitted"],
            "transferred": s["transferred"], "acked": s["acked"], "failed": s["failed"],
            "completeLatency": s["completeLatency"]}


def _bolt_window(view: TopologyView, name: str, window: str) -> dict[str, Any]:
    s = _component_stats(view, window, name)
    return {"window": window, "windowPretty": window_hint(window), "emitted": s["emitted"],
            "transferred": s["transferred"], "acked": s["acked"], "failed": s["failed"],
            "executed": s["executed"], "executeLatency": s["executeLatency"],
            "processLatency": s["processLatency"], "capacity": _ms(s["capacity"])}


def _executor_stats(view: TopologyView, name: str, window: str, kind: str,
                    now: float) -> list[dict[str, Any]]:
    placement = view.placement()
    out = []
    for executor, e in sorted(_executors_of(view, name, window).items()):
        worker = placement.get(executor, {})
        entry = {"id": executor_id(executor), "encodedId": encode(executor_id(executor)),
                 **_uptime(worker.get("since"), now), "host": worker.get("host", worker.get("node")),
                 "port": worker.get("port"), "workerLogLink": log_link(view, worker.get("node", ""),
                                                                       worker.get("port")),
                 "emitted": e.get("emitted", 0),
                 "transferred": e.get("transferred", 0), "acked": e.get("acked", 0),
                 "failed": e.get("failed", 0)}
        if kind == "spout":
            entry.update(completeLatency=e.get("completeLatency", "0.000"), pending=e.get("pending"),
                         maxSpoutPending=e.get("maxSpoutPending"))
        else:
            latency = e.get("executeLatency", "0.000")
            entry.update(executed=e.get("executed", 0), executeLatency=latency, processLatency=latency,
                         capacity=_ms(e.get("capacity", 0.0)))
        out.append(entry)
    return out


# -- per stream, every component -------------------------------------------------


def topology_metrics(view: TopologyView, window: str, sys: bool = False) -> dict[str, Any]:
    """/api/v1/topology/:id/metrics: per component, its numbers by stream."""
    spouts, bolts = [], []
    for name in _visible(view, "spout", sys):
        s, outputs = _component_stats(view, window, name), _output_streams(view, name, window)
        owners = [outputs[0][0]] if len(outputs) == 1 else []  # the stream the acks are given on
        spouts.append({
            "id": name,
            "emitted": [{"stream_id": st, "value": em} for st, em, _ in outputs],
            "transferred": [{"stream_id": st, "value": tr} for st, _, tr in outputs],
            "acked": [{"stream_id": st, "value": s["acked"]} for st in owners],
            "failed": [{"stream_id": st, "value": s["failed"]} for st in owners if s["failed"]],
            "complete_ms_avg": [{"stream_id": st, "value": s["completeLatency"]} for st in owners],
        })
    for name in _visible(view, "bolt", sys):
        s, inputs = _component_stats(view, window, name), _input_streams(view, name, window, sys)
        outputs, whole = _output_streams(view, name, window), sum(n for _, _, n in inputs)
        bolts.append({
            "id": name,
            "emitted": [{"stream_id": st, "value": em} for st, em, _ in outputs],
            "transferred": [{"stream_id": st, "value": tr} for st, _, tr in outputs],
            "acked": [_row(src, st, _share(s["acked"], n, whole)) for src, st, n in inputs],
            "failed": [_row(src, st, f) for src, st, n in inputs if (f := _share(s["failed"], n, whole))],
            "process_ms_avg": [_row(src, st, s["processLatency"]) for src, st, _ in inputs],
            "executed": [_row(src, st, n) for src, st, n in inputs],
            "executed_ms_avg": [_row(src, st, s["executeLatency"]) for src, st, _ in inputs],
        })
    hint = window_hint(window)
    return {"window": window, "windowHint": hint, "window-hint": hint, "spouts": spouts, "bolts": bolts}


def _row(source: str, stream: str, value: Any) -> dict[str, Any]:
    return {"component_id": source, "stream_id": stream, "value": value}


# -- actions ---------------------------------------------------------------------


def _count(value: Any, what: str) -> int:
    # Storm's own example sends executor counts as strings ("5"): take both.
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    msg = f"{what} must be a whole number, got {value!r}"
    raise ValueError(msg)


def rebalance_request(body: Any) -> dict[str, Any]:
    """Storm's body ``{"rebalanceOptions": {"numWorkers": N, "executors": {component: n}}}``
    -> Squall's ``{"workers": N, "executors": {component: n}}`` (ValueError when malformed)."""
    if body in (None, ""):
        body = {}
    if not isinstance(body, dict):
        msg = "the request body must be a JSON object"
        raise ValueError(msg)
    options = body.get("rebalanceOptions") or {}
    if not isinstance(options, dict):
        msg = "'rebalanceOptions' must be a JSON object"
        raise ValueError(msg)
    out: dict[str, Any] = {}
    if options.get("numWorkers") is not None:
        out["workers"] = _count(options["numWorkers"], "rebalanceOptions.numWorkers")
    executors = options.get("executors") or {}
    if not isinstance(executors, dict):
        msg = "'rebalanceOptions.executors' must map component ids to executor counts"
        raise ValueError(msg)
    if executors:
        out["executors"] = {k: _count(v, f"rebalanceOptions.executors[{k!r}]") for k, v in executors.items()}
    return out


def wait_secs(text: str) -> int:
    """Storm's ``:wait-time`` path segment: whole seconds >= 0."""
    if not text.isdigit():
        msg = f"the wait time must be whole seconds >= 0, got {text!r}"
        raise ValueError(msg)
    return int(text)


def visualization(view: TopologyView, window: str, now: float, sys: bool, span: float,
                  groupings: Mapping[tuple[str, str, str], Mapping[str, Any]]) -> dict[str, Any]:
    """The topology as a graph for the UI: nodes (spouts and bolts, with the numbers of the
    topology page over ``window``) and edges (the declared inputs, with their grouping from
    ``groupings`` -- (consumer, source, stream) -> {"type", "fields"} -- and the tuples per
    second the consumer executed from them over the ``span`` seconds the window covers).
    The acker and system streams ("__...") only with ``sys``."""
    page = topology_page(view, window, now, sys)
    metrics = topology_metrics(view, window, sys)
    nodes = [{"id": s["spoutId"], "type": "spout", "capacity": 0.0, "emitted": s["emitted"],
              "executed": 0, "acked": s["acked"], "failed": s["failed"], "executors": s["executors"],
              "latency": s["completeLatency"], "lastError": s["lastError"]} for s in page["spouts"]]
    nodes += [{"id": b["boltId"], "type": "bolt", "capacity": float(b["capacity"]),
               "emitted": b["emitted"], "executed": b["executed"], "acked": b["acked"],
               "failed": b["failed"], "executors": b["executors"], "latency": b["executeLatency"],
               "lastError": b["lastError"]} for b in page["bolts"]]
    shown = {n["id"] for n in nodes}
    executed = {(b["id"], row["component_id"], row["stream_id"]): row["value"]
                for b in metrics["bolts"] for row in b["executed"]}
    edges = []
    for name, c in sorted(view.components.items()):
        for source, stream in c.get("inputs", []):
            if name not in shown or source not in shown or (stream.startswith("__") and not sys):
                continue
            grouping = groupings.get((name, source, stream)) or {}
            count = executed.get((name, source, stream), 0)
            edges.append({"from": source, "to": name, "stream": stream,
                          "grouping": grouping.get("type", ""), "fields": list(grouping.get("fields", [])),
                          "executed": count, "rate": round(count / span, 3) if span >= 1 else 0.0})
    return {"id": view.id, "name": view.name, "status": storm_status(view.status),
            "window": window, "windowHint": window_hint(window),
            "spanSecs": round(span, 1), "nodes": nodes, "edges": edges}
