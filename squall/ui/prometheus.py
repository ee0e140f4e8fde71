"""Nimbus's ``GET /metrics``: the cluster's statistics for Prometheus.

A custom collector (prometheus_client's ``Collector``) reads nimbus's snapshot
(:meth:`squall.nimbus.views.TopologyViews.prometheus_snapshot`) at every scrape and
yields metric families; ``prometheus_client.generate_latest`` writes the
text exposition format.  Building the families is a pure function of the
snapshot, tested without a cluster.

Series (all labelled ``topology`` with the topology's name, which outlives a
resubmission; ``squall_topology_info`` maps it to the id):

* counters, cumulative over the topology's life (Storm's ":all-time" window),
  per ``component`` and ``executor`` ("[first-last]", Storm's id):
  ``squall_emitted_total`` and ``squall_transferred_total`` per output
  ``stream``, ``squall_executed_total`` per ``source_component`` and
  ``stream``, ``squall_acked_total``, ``squall_failed_total``.  They carry no
  worker label: an executor keeps counting where it moves, so its series stays
  one series;
* gauges over the last 10 minutes: ``squall_complete_latency_ms`` (spouts),
  ``squall_execute_latency_ms``, ``squall_process_latency_ms`` and
  ``squall_capacity`` (bolts, the acker included);
* gauges as last reported, with the ``node`` and ``worker`` (host:port)
  running the executor: ``squall_queue_depth``, ``squall_pending`` (spouts);
* the components' own metrics per ``task`` (with ``node`` and ``worker``):
  counters as ``squall_user_<name>_total``, gauges as ``squall_user_<name>``,
  histograms as summaries ``squall_user_<name>`` with quantiles 0 (min), 0.5,
  0.99 and 1 (max).  A name is made a valid Prometheus name ('.', ':' and
  '-' become '_'); a name used as two kinds gets the kind in the second:
  ``squall_user_gauge_<name>``;
* per worker (``topology``, ``node``, ``port``), as its latest heartbeat reports:
  gauges ``squall_worker_rss_bytes``, ``squall_worker_threads``,
  ``squall_worker_queue_depth`` (its executors' queues together); counters
  ``squall_worker_cpu_seconds_total``, ``squall_worker_gc_seconds_total``,
  ``squall_worker_frames_sent_total``, ``squall_worker_frames_dropped_total``
  (since the worker process started: a restart starts them again);
* the cluster: ``squall_cluster_supervisors``, ``squall_cluster_slots`` by
  ``state`` (used, free), and per topology ``squall_topology_workers``,
  ``_executors``, ``_tasks``, ``_uptime_seconds``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.registry import Collector, CollectorRegistry

EXECUTOR = ["topology", "component", "executor"]
PLACED = [*EXECUTOR, "node", "worker"]
TASK = ["topology", "component", "task", "node", "worker"]
WORKER = ["topology", "node", "port"]
# family -> (counter?, the sample's section, its key, help)
WORKER_SERIES = {
    "squall_worker_rss_bytes": (False, "system", "rss_bytes", "Resident memory of the worker process."),
    "squall_worker_threads": (False, "system", "threads", "Threads of the worker process."),
    "squall_worker_queue_depth": (False, None, "queue_depth", "Tuples in its executors' queues."),
    "squall_worker_cpu_seconds": (True, "system", "cpu_secs", "CPU seconds of the worker process."),
    "squall_worker_gc_seconds": (True, "system", "gc_secs", "Seconds the worker spent in GC."),
    "squall_worker_frames_sent": (True, "transfer", "frames_sent", "Frames sent to other workers."),
    "squall_worker_frames_dropped": (True, "transfer", "frames_dropped", "Frames the worker dropped."),
    "squall_worker_bytes_sent": (True, "transfer", "bytes_sent", "Bytes sent to other workers."),
    "squall_worker_bytes_received": (True, "transfer", "bytes_received", "Bytes from other workers."),
}
_INVALID = re.compile(r"[^a-zA-Z0-9_]")
# The sample names a family of each type writes besides its own name.
_SUFFIXES = {"counter": ("_total", "_created"), "gauge": (), "summary": ("_count", "_sum", "_created")}


class SquallCollector(Collector):
    def __init__(self, snapshot: Callable[[], Mapping[str, Any]]) -> None:
        self.snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        yield from families(self.snapshot())


def topology_entry(view: Any, now: float, all_time: Any, recent: Any, latest: Mapping[Any, Any],
                   user_metrics: list[dict[str, Any]]) -> dict[str, Any]:
    """One topology of a snapshot, from its view (squall.ui.storm_api.TopologyView) and its
    statistics: what nimbus and local mode each give their ``/metrics``."""
    placement = {e: {"node": w["node"], "worker": f"{w['host']}:{w['port']}"}
                 for e, w in view.placement().items()}
    return {"id": view.id, "name": view.name, "status": view.status, "uptime": now - view.submitted,
            "workers": len(view.workers), "executors": sum(len(w["executors"]) for w in view.workers),
            "tasks": sum(len(c["tasks"]) for c in view.components.values()),
            "kinds": {name: c["kind"] for name, c in view.components.items()},
            "placement": placement, "all_time": all_time, "recent": recent, "latest": latest,
            "user_metrics": user_metrics,
            "worker_system": [{"node": node, "port": port, "sample": pair[1]}
                              for (node, port), pair in sorted(view.samples.items())]}


def registry(snapshot: Callable[[], Mapping[str, Any]]) -> CollectorRegistry:
    """A registry of its own (not the process-wide default) holding only nimbus's collector."""
    out = CollectorRegistry(auto_describe=False)
    out.register(SquallCollector(snapshot))
    return out


def _executor(executor: tuple[int, int]) -> str:
    return f"[{executor[0]}-{executor[1]}]"


def families(snapshot: Mapping[str, Any]) -> list[Metric]:
    def gauge(name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
        return GaugeMetricFamily(name, doc, labels=labels)

    cluster_supervisors = gauge("squall_cluster_supervisors", "Supervisors registered.", [])
    cluster_supervisors.add_metric([], snapshot.get("supervisors", 0))
    slots = gauge("squall_cluster_slots", "Worker slots of the supervisors, by state.", ["state"])
    total, used = snapshot.get("slots_total", 0), snapshot.get("slots_used", 0)
    slots.add_metric(["used"], used)
    slots.add_metric(["free"], total - used)
    info = gauge("squall_topology_info", "1 per running topology: its id and status.",
                 ["topology", "topology_id", "status"])
    shape = {key: gauge(f"squall_topology_{key}", doc, ["topology"]) for key, doc in (
        ("workers", "Workers assigned."), ("executors", "Executors assigned."),
        ("tasks", "Tasks, system ones included."),
        ("uptime_seconds", "Seconds since the topology was submitted."))}
    counters = {stat: CounterMetricFamily(f"squall_{stat}", doc, labels=labels) for stat, doc, labels in (
        ("emitted", "Tuples emitted, per output stream.", [*EXECUTOR, "stream"]),
        ("transferred", "Tuples sent to tasks (a copy per target task), per output stream.",
         [*EXECUTOR, "stream"]),
        ("executed", "Tuples executed, per input stream.", [*EXECUTOR, "source_component", "stream"]),
        ("acked", "Tuples acked (spouts: whole tuple trees).", EXECUTOR),
        ("failed", "Tuples failed (spouts: whole tuple trees).", EXECUTOR))}
    latencies = {key: gauge(f"squall_{name}", doc, EXECUTOR) for key, name, doc in (
        ("completeLatency", "complete_latency_ms", "Mean ms from a spout's emit to its ack, last 10 min."),
        ("executeLatency", "execute_latency_ms", "Mean ms a bolt spends executing a tuple, last 10 min."),
        ("processLatency", "process_latency_ms", "Mean ms from a tuple's arrival to its ack, last 10 min."),
        ("capacity", "capacity", "Share of the last 10 min a bolt executor spent executing (1: saturated)."))}
    queue = gauge("squall_queue_depth", "Tuples waiting in the executor's queue.", PLACED)
    pending = gauge("squall_pending", "Spout tuple trees emitted and not yet acked or failed.", PLACED)
    user = _UserMetrics()
    workers = {name: (CounterMetricFamily if counter else GaugeMetricFamily)(name, doc, labels=WORKER)
               for name, (counter, _, _, doc) in WORKER_SERIES.items()}

    for t in snapshot.get("topologies", []):
        name, kinds = t["name"], t.get("kinds", {})
        info.add_metric([name, t["id"], t["status"]], 1)
        for key in ("workers", "executors", "tasks"):
            shape[key].add_metric([name], t[key])
        shape["uptime_seconds"].add_metric([name], t["uptime"])
        for (component, executor), e in sorted(t.get("all_time", {}).items()):
            labels = [name, component, _executor(executor)]
            streams = e.get("streams", {})
            for stat in ("emitted", "transferred"):
                for stream, n in sorted((streams.get(stat) or {}).items()):
                    counters[stat].add_metric([*labels, stream], n)
            for key, n in sorted((streams.get("executed_by") or {}).items()):
                source, _, stream = key.partition(":")
                counters["executed"].add_metric([*labels, source, stream], n)
            for stat in ("acked", "failed"):
                counters[stat].add_metric(labels, e.get(stat, 0))
        for (component, executor), e in sorted(t.get("recent", {}).items()):
            labels = [name, component, _executor(executor)]
            wanted = ("completeLatency",) if kinds.get(component) == "spout" else (
                "executeLatency", "processLatency", "capacity")
            for key in wanted:
                source = "executeLatency" if key == "processLatency" else key  # the same in Squall
                latencies[key].add_metric(labels, float(e.get(source, 0)))
        placement = t.get("placement", {})
        for executor, g in sorted(t.get("latest", {}).items()):
            where = placement.get(executor)
            if where is None:
                continue  # an executor of an earlier assignment (rebalanced away)
            labels = [name, g["component"], _executor(executor), where["node"], where["worker"]]
            if isinstance(g.get("queue_depth"), (int, float)):
                queue.add_metric(labels, g["queue_depth"])
            if isinstance(g.get("pending"), (int, float)):
                pending.add_metric(labels, g["pending"])
        for beat in t.get("user_metrics", []):
            for component, tasks in sorted(beat["metrics"].items()):
                for task, snap in sorted(tasks.items()):
                    user.add([name, component, str(task), beat["node"], beat["worker"]], snap)
        for w in t.get("worker_system", []):
            sample = w.get("sample") or {}
            for family, (_, section, key, _) in WORKER_SERIES.items():
                value = (sample.get(section) or {} if section else sample).get(key)
                if _number(value):
                    workers[family].add_metric([name, w["node"], str(w["port"])], value)
    return [cluster_supervisors, slots, info, *shape.values(), *counters.values(), *latencies.values(),
            queue, pending, *workers.values(), *user.families.values()]


class _UserMetrics:
    """The components' own metrics, one family per (valid) name and kind."""

    def __init__(self) -> None:
        self.families: dict[str, Metric] = {}
        self.taken: set[str] = set()  # sample names of the families so far
        self.seen: set[tuple[str, tuple[str, ...]]] = set()

    def _family(self, kind: str, metric: str) -> Metric | None:
        base = _INVALID.sub("_", metric)
        if kind == "counter":
            base = base.removesuffix("_total")
        ptype = "summary" if kind == "histogram" else kind
        for name in (f"squall_user_{base}", f"squall_user_{kind}_{base}"):
            family = self.families.get(name)
            if family is not None and family.type == ptype:
                return family
            samples = {name, *(name + suffix for suffix in _SUFFIXES[ptype])}
            if family is None and not samples & self.taken:
                doc = f"The components' own {kind} {metric!r}."
                make = {"counter": CounterMetricFamily, "gauge": GaugeMetricFamily,
                        "summary": SummaryMetricFamily}[ptype]
                self.taken |= samples
                family = self.families[name] = make(name, doc, labels=TASK)
                return family
        return None  # the name is taken by other kinds both ways: left out rather than break the scrape

    def _once(self, family: Metric, labels: list[str]) -> bool:
        # Two names that become one ("a.b", "a_b") in one task: the first one counts.
        key = (family.name, tuple(labels))
        if key in self.seen:
            return False
        self.seen.add(key)
        return True

    def add(self, labels: list[str], snap: Mapping[str, Any]) -> None:
        for metric, value in (snap.get("counters") or {}).items():
            family = self._family("counter", metric)
            if family is not None and _number(value) and self._once(family, labels):
                family.add_metric(labels, value)
        for metric, value in (snap.get("gauges") or {}).items():
            family = self._family("gauge", metric)
            if family is not None and _number(value) and self._once(family, labels):
                family.add_metric(labels, value)
        for metric, h in (snap.get("histograms") or {}).items():
            family = self._family("histogram", metric)
            if family is None or not isinstance(h, Mapping) or not self._once(family, labels):
                continue
            family.add_metric(labels, h.get("count") or 0, h.get("sum") or 0.0)
            named = dict(zip(TASK, labels, strict=True))
            for quantile, key in (("0", "min"), ("0.5", "p50"), ("0.99", "p99"), ("1", "max")):
                if _number(h.get(key)):
                    family.add_sample(family.name, {**named, "quantile": quantile}, h[key])


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
