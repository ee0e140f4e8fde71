"""What self-regulation reads: a topology's executors' cumulative counters, turned into
per-component signals over one round (a pure core: no clock, no I/O).

Workers report cumulative counters per executor with every heartbeat (busy seconds,
seconds their queue spent congested, tuples executed, trees acked and their summed
complete latency) and, per worker, its CPU seconds and each spout's latest p99.  Two
readings a round apart give the rates a policy judges by.  A worker that restarted (a
new incarnation: node, port, pid) has no delta this round: its executors count as not
reporting, and the round is judged incomplete rather than guessed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

Executor = tuple[int, int]
_COUNTED = ("busy_secs", "backpressure_secs", "executed", "acked", "failed", "complete_secs")


@dataclass(frozen=True)
class ExecutorReading:
    """One executor's cumulative counters, as its worker last reported them."""

    component: str
    incarnation: tuple[Any, ...]  # (node, port, pid): a restarted worker counts from zero
    time: float  # its worker's beat: rates are over the time between two beats, not two reads
    busy_secs: float = 0.0
    backpressure_secs: float = 0.0
    executed: float = 0.0
    acked: float = 0.0
    failed: float = 0.0
    complete_secs: float = 0.0
    queue_depth: int = 0
    pending: int | None = None
    max_pending: int | None = None
    recent_p99_ms: float | None = None  # spouts: the p99 of the trees acked since its last beat
    cpu_secs: float | None = None  # its thread's CPU time (None: not reported)


@dataclass(frozen=True)
class WorkerReading:
    incarnation: tuple[Any, ...]
    time: float
    cpu_secs: float
    executors: tuple[Executor, ...]
    p99_ms: Mapping[str, float] = field(default_factory=dict)  # spout component -> latest p99


@dataclass
class Reading:
    """Everything one round read: ``time`` is the reader's clock."""

    time: float
    executors: dict[Executor, ExecutorReading]
    workers: dict[tuple[str, int], WorkerReading]


@dataclass
class ComponentSignals:
    name: str
    executors: int
    capacity: float  # the busiest executor's share of the round spent executing (Storm's)
    capacity_mean: float
    congested: float  # the most congested executor's share of the round its queue was over its high mark
    executed_rate: float  # tuples a second, all executors
    acked_rate: float  # spouts: trees acked a second
    failed_rate: float
    complete_ms: float | None  # spouts: mean complete latency over the round
    p99_ms: float | None  # spouts: the highest of its workers' latest p99
    pending: int | None  # spouts: trees in flight now, all executors
    max_pending: int | None  # spouts: the max spout pending in force (None: unbounded)
    shares: tuple[float, ...] = ()  # each executor's share of the component's executed tuples
    worker_cpu: float = 0.0  # the busiest of its workers, in cores
    # Of its busiest executor's busy time, the share its thread was on a CPU (None: not
    # reported): near 1 it computes (the GIL its bound), near 0 it waits (I/O, sleeps).
    cpu_share: float | None = None


@dataclass
class Signals:
    """One round of a topology: complete when every executor it runs reported twice."""

    time: float
    components: dict[str, ComponentSignals]
    missing: list[Executor]  # executors with no delta this round (new, restarted, silent)
    workers_cpu: dict[tuple[str, int], float]

    @property
    def complete(self) -> bool:
        return not self.missing

    def throughput(self, spouts: Iterable[str]) -> float:
        """Trees acked a second over the spouts given (the topology's output)."""
        return sum(self.components[s].acked_rate for s in spouts if s in self.components)


def signals(before: Reading, after: Reading, running: Mapping[Executor, str]) -> Signals:
    """The round between two readings, for the executors the topology runs now: each
    executor's rates over the time between its worker's two beats."""
    missing: list[Executor] = []
    per: dict[str, list[tuple[Executor, dict[str, float], ExecutorReading]]] = {}
    for executor, component in sorted(running.items()):
        now, then = after.executors.get(executor), before.executors.get(executor)
        if now is None or then is None or now.incarnation != then.incarnation or now.time <= then.time:
            missing.append(executor)  # new, restarted, or no beat since the last read
            continue
        took = now.time - then.time
        # Per second of its own worker's beats: every rate below is a sum of these.
        delta = {name: max(getattr(now, name) - getattr(then, name), 0.0) / took for name in _COUNTED}
        if now.cpu_secs is not None and then.cpu_secs is not None:
            delta["cpu_secs"] = max(now.cpu_secs - then.cpu_secs, 0.0) / took
        per.setdefault(component, []).append((executor, delta, now))
    cpu: dict[tuple[str, int], float] = {}
    for slot, w in after.workers.items():
        old = before.workers.get(slot)
        if old is not None and old.incarnation == w.incarnation and w.time > old.time:
            cpu[slot] = max(w.cpu_secs - old.cpu_secs, 0.0) / (w.time - old.time)
    hosting = {e: slot for slot, w in after.workers.items() for e in w.executors}
    out: dict[str, ComponentSignals] = {}
    for component, rows in per.items():
        busy = [d["busy_secs"] for _e, d, _r in rows]
        executed = sum(d["executed"] for _e, d, _r in rows)
        acked = sum(d["acked"] for _e, d, _r in rows)
        complete = sum(d["complete_secs"] for _e, d, _r in rows)
        pendings = [r.pending for _e, _d, r in rows if r.pending is not None]
        bounds = [r.max_pending for _e, _d, r in rows]
        # The p99 of the round's own trees where the spouts report it, else the workers' summary
        # (over their latest samples, much longer than a round).
        p99s = [r.recent_p99_ms for _e, _d, r in rows if r.recent_p99_ms is not None] or [
            w.p99_ms[component] for slot, w in after.workers.items()
            if component in w.p99_ms and any(hosting.get(e) == slot for e, _d, _r in rows)]
        out[component] = ComponentSignals(
            name=component, executors=len(rows),
            capacity=min(max(busy), 1.0), capacity_mean=min(sum(busy) / len(busy), 1.0),
            congested=min(max(d["backpressure_secs"] for _e, d, _r in rows), 1.0),
            executed_rate=executed, acked_rate=acked,
            failed_rate=sum(d["failed"] for _e, d, _r in rows),
            complete_ms=complete * 1000 / acked if acked else None,
            p99_ms=max(p99s) if p99s else None,
            pending=sum(pendings) if pendings else None,
            max_pending=(None if not bounds or any(b is None for b in bounds)
                         else sum(b for b in bounds if b is not None)),
            shares=tuple(d["executed"] / executed for _e, d, _r in rows) if executed else (),
            worker_cpu=max((cpu.get(hosting[e], 0.0) for e, _d, _r in rows if e in hosting), default=0.0),
            cpu_share=_cpu_share(rows))
    return Signals(time=after.time, components=out, missing=missing, workers_cpu=cpu)


def _cpu_share(rows: list[tuple[Executor, dict[str, float], ExecutorReading]]) -> float | None:
    _e, busiest, _r = max(rows, key=lambda row: row[1]["busy_secs"])
    if "cpu_secs" not in busiest or busiest["busy_secs"] <= 0:
        return None
    return min(busiest["cpu_secs"] / busiest["busy_secs"], 1.0)


def reading_from_beats(beats: Mapping[str, Mapping[str, Mapping[str, Any]]], topology_id: str,
                       time: float) -> Reading:
    """A reading from the heartbeats supervisors publish (node -> port -> beat)."""
    executors: dict[Executor, ExecutorReading] = {}
    workers: dict[tuple[str, int], WorkerReading] = {}
    for node, ports in beats.items():
        for port, beat in ports.items():
            if not isinstance(beat, Mapping) or beat.get("topology_id") != topology_id:
                continue
            incarnation = (node, str(port), beat.get("pid"))
            beat_time = _number(beat.get("time"))
            mine: list[Executor] = []
            for snap in beat.get("executor_stats") or ():
                try:
                    executor = (int(snap["executor"][0]), int(snap["executor"][-1]))
                    executors[executor] = ExecutorReading(
                        component=str(snap["component"]), incarnation=incarnation, time=beat_time,
                        busy_secs=_number(snap.get("busy_secs")),
                        backpressure_secs=_number(snap.get("backpressure_secs")),
                        executed=_number(snap.get("executed")), acked=_number(snap.get("acked")),
                        failed=_number(snap.get("failed")), complete_secs=_number(snap.get("complete_secs")),
                        queue_depth=int(_number(snap.get("queue_depth"))),
                        pending=_count(snap.get("pending")), max_pending=_count(snap.get("max_pending")),
                        recent_p99_ms=_optional(snap.get("recent_p99_ms")),
                        cpu_secs=_optional(snap.get("cpu_secs")))
                except (KeyError, TypeError, ValueError, IndexError):
                    continue  # a malformed snapshot: that executor is not reporting
                mine.append(executor)
            p99 = {}
            for component, s in (beat.get("stats") or {}).items():
                latency = s.get("complete_latency_ms") if isinstance(s, Mapping) else None
                if isinstance(latency, Mapping) and isinstance(latency.get("p99"), (int, float)):
                    p99[str(component)] = float(latency["p99"])
            system = beat.get("system") or {}
            try:
                slot = (str(node), int(port))
            except ValueError:
                continue
            workers[slot] = WorkerReading(incarnation=incarnation, time=beat_time,
                                          cpu_secs=_number(system.get("cpu_secs")),
                                          executors=tuple(mine), p99_ms=p99)
    return Reading(time=time, executors=executors, workers=workers)


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0.0
    return float(value)


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return int(value)


def _optional(value: Any) -> float | None:
    return None if isinstance(value, bool) or not isinstance(value, (int, float)) else float(value)
