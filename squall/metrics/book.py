"""Storm's topology statistics over its windows: a pure core fed with what
workers report.

Workers report cumulative counters per executor (see
``Executor.stats_snapshot``) with every heartbeat; this book turns them into
increments (a restarted worker counts from zero again) and adds them to
rolling windows, so that it can answer what Storm's UI shows: per
component, per executor and per stream, for the last 10 minutes, 3 hours,
1 day or all time — emitted, transferred, acked, failed, executed, complete
latency (spouts), execute and process latency and capacity (bolts).

Every nimbus keeps one, fed from the heartbeats in ZooKeeper, so a standby
that takes over already has the windows; local mode keeps one per topology.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from squall.metrics.windows import ALL_TIME, WINDOW_IDS, Deltas, RollingSum

# Cumulative fields of a snapshot: plain counters, and counters per stream.
_COUNTERS = ("executed", "acked", "failed", "timed_out", "busy_secs", "complete_secs", "backpressure_secs",
             "progress")
_PER_STREAM = ("emitted", "transferred", "executed_by")
_SUMMED = ("emitted", "transferred", "acked", "failed", "timedOut", "executed", "progress",
           "backpressureSecs")
Executor = tuple[int, int]  # Storm's executor id: [first task, last task]


def window_id(value: Any) -> str:
    """``?window=`` as Storm takes it: "600", "10800", "86400" or ":all-time"."""
    text = ALL_TIME if value in (None, "", "all-time", ALL_TIME) else str(value)
    if text not in WINDOW_IDS:
        msg = f"window must be one of {', '.join(WINDOW_IDS)}, got {value!r}"
        raise ValueError(msg)
    return text


class StatsBook:
    def __init__(self) -> None:
        self.deltas = Deltas()
        # (topology, component, executor, stat, stream) -> RollingSum
        self.sums: dict[tuple[str, str, tuple[int, int], str, str], RollingSum] = {}
        self.first_seen: dict[str, float] = {}  # topology -> when its counters began
        self.latest: dict[tuple[str, tuple[int, int]], dict[str, Any]] = {}  # gauges: queue depth...

    def ingest(self, topology: str, incarnation: Any, snapshots: Iterable[Mapping[str, Any]],
               now: float) -> None:
        """One worker's report: ``incarnation`` changes when the worker restarts."""
        snapshots = list(snapshots)
        # The counters began when the executors did, maybe before this book heard of them.
        began = now - max((float(s.get("uptime_secs") or 0) for s in snapshots), default=0.0)
        self.first_seen[topology] = min(self.first_seen.get(topology, began), began)
        for snap in snapshots:
            component = snap["component"]
            executor = (int(snap["executor"][0]), int(snap["executor"][-1]))
            self.latest[(topology, executor)] = {"component": component, "time": now,
                                                 "queue_depth": snap.get("queue_depth"),
                                                 "pending": snap.get("pending"),
                                                 "max_pending": snap.get("max_pending")}
            for stat in _COUNTERS:
                if stat in snap:
                    self._add(topology, component, executor, stat, "", incarnation, snap[stat], now)
            for stat in _PER_STREAM:
                for stream, value in (snap.get(stat) or {}).items():
                    self._add(topology, component, executor, stat, stream, incarnation, value, now)

    def _add(self, topology: str, component: str, executor: tuple[int, int], stat: str, stream: str,
             incarnation: Any, value: float, now: float) -> None:
        key = (topology, component, executor, stat, stream)
        delta = self.deltas.delta(key, incarnation, value)
        rolling = self.sums.get(key)
        if rolling is None:
            rolling = self.sums[key] = RollingSum()
        rolling.add(now, delta)

    def forget(self, topology: str) -> None:
        """A topology that is gone."""
        for key in [k for k in self.sums if k[0] == topology]:
            del self.sums[key]
        self.deltas.forget({k for k in self.deltas.last if k[0] != topology})
        self.first_seen.pop(topology, None)
        for key in [k for k in self.latest if k[0] == topology]:
            del self.latest[key]

    # -- reading -------------------------------------------------------------------

    def _totals(self, topology: str, window: str, now: float) -> dict[tuple[str, Executor, str, str], float]:
        return {k[1:]: s.totals(now)[window] for k, s in self.sums.items() if k[0] == topology}

    def span(self, topology: str, window: str, now: float) -> float:
        """The seconds a window covers: its length, or less for a young topology."""
        seen = now - self.first_seen.get(topology, now)
        return max(seen, 1e-9) if window == ALL_TIME else max(min(float(window), seen), 1e-9)

    def executors(self, topology: str, window: str, now: float) -> dict[tuple[str, Executor], dict[str, Any]]:
        """(component, executor) -> Storm's numbers for that executor over ``window``."""
        span = self.span(topology, window, now)
        raw: dict[tuple[str, Executor], dict[str, Any]] = {}
        for (component, executor, stat, stream), value in self._totals(topology, window, now).items():
            entry = raw.setdefault((component, executor), {"by_stream": {}})
            if stream:
                entry["by_stream"].setdefault(stat, {})[stream] = value
            else:
                entry[stat] = value
        out = {}
        for key, e in raw.items():
            per = e["by_stream"]
            acked, executed = e.get("acked", 0), e.get("executed", 0)
            out[key] = {
                "emitted": int(sum(per.get("emitted", {}).values())),
                "transferred": int(sum(per.get("transferred", {}).values())),
                "acked": int(acked), "failed": int(e.get("failed", 0)), "executed": int(executed),
                # Squall's own: of a spout's failed trees, those that timed out (not a bolt's fail).
                "timedOut": int(e.get("timed_out", 0)),
                "completeLatency": _ms(e.get("complete_secs", 0), acked),
                "executeLatency": _ms(e.get("busy_secs", 0), executed),
                "capacity": round(e.get("busy_secs", 0) / span, 3),
                # Squall's own: the paper's progress (spouts) and time held back by backpressure.
                "progress": e.get("progress", 0), "backpressureSecs": round(e.get("backpressure_secs", 0), 3),
                "streams": {stat: {s: int(v) for s, v in streams.items()} for stat, streams in per.items()},
            }
            gauges = self.latest.get((topology, key[1]))
            if gauges is not None and gauges.get("pending") is not None:
                # A spout's trees in flight now, and its max spout pending (the tuner's latest
                # value when it tunes; None: unbounded).
                out[key].update(pending=gauges["pending"], maxSpoutPending=gauges.get("max_pending"))
        return out

    def components(self, topology: str, window: str, now: float,
                   current: Iterable[Executor] | None = None) -> dict[str, dict[str, Any]]:
        """component -> Storm's numbers summed over its executors (latencies weighted,
        capacity the busiest executor's, as Storm's UI shows it).  ``current``: only these
        executors (after a rebalance, the ones the topology runs now, as the component
        page's rows are: its totals must be their sum)."""
        keep = None if current is None else {tuple(e) for e in current}
        out: dict[str, dict[str, Any]] = {}
        for (component, executor), e in self.executors(topology, window, now).items():
            if keep is not None and executor not in keep:
                continue
            c = out.setdefault(component, {"emitted": 0, "transferred": 0, "acked": 0, "failed": 0,
                                           "timedOut": 0, "executed": 0, "capacity": 0.0, "executors": 0,
                                           "progress": 0,
                                           "backpressureSecs": 0.0, "_complete": 0.0, "_execute": 0.0})
            for stat in _SUMMED:
                c[stat] += e[stat]
            c["executors"] += 1
            c["capacity"] = max(c["capacity"], e["capacity"])
            c["_complete"] += float(e["completeLatency"]) * e["acked"]
            c["_execute"] += float(e["executeLatency"]) * e["executed"]
        for c in out.values():
            complete, execute = c.pop("_complete"), c.pop("_execute")
            c["completeLatency"] = f"{complete / c['acked']:.3f}" if c["acked"] else "0.000"
            c["executeLatency"] = f"{execute / c['executed']:.3f}" if c["executed"] else "0.000"
            c["processLatency"] = c["executeLatency"]  # acked as it is executed (basic bolts)
        return out


def _ms(secs: float, count: float) -> str:
    # Storm's UI API gives latencies as strings of milliseconds with 3 decimals.
    return f"{secs * 1000 / count:.3f}" if count else "0.000"
