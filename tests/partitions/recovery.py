"""What a fault cost, from a workload's history and the nemesis's (pure: ops in, numbers
out; benchmarks/partitions.py prints and plots them).

* **throughput**: completions (``ok``) a second, in one-second bins on the recorder's
  clock;
* **time to 90%**: from the fault's stop (the heal, the resume, the restart) until the
  rate over the ``window`` seconds before is back to 90% of the rate in the ten seconds
  before the fault began (0 when it is already; the window lags a fall by up to its
  length, so a fault shorter than it may show no fall);
* **p99 complete latency during the fault**: of the messages invoked while the fault
  held, from the client's invocation to its ``ok`` (the client's view: what a user
  waits, the queue included);
* **slowest**: the longest of those, which shows a fault that holds messages until it
  ends.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from tests.partitions.history import INFO, INVOKE, NEMESIS, OK, Op


@dataclass(frozen=True)
class Episode:
    fault: str
    detail: str
    start: float
    stop: float
    baseline: float  # completions/s before it began
    lowest: float  # lowest windowed rate while it held or recovering
    recovery: float | None  # seconds from stop to 90% (None: not within the history)
    p99_ms: float | None
    slowest_ms: float | None
    messages: int  # invoked while it held


def rates(times: Iterable[float], start: float, end: float, bin_secs: float = 1.0) -> list[tuple[float, int]]:
    """(bin start, completions in the bin) from ``start`` to ``end``."""
    n = max(0, math.ceil((end - start) / bin_secs))
    counts = [0] * n
    for t in times:
        i = int((t - start) // bin_secs)
        if 0 <= i < n:
            counts[i] += 1
    return [(start + i * bin_secs, c) for i, c in enumerate(counts)]


def _windowed(times: list[float], t: float, window: float) -> float:
    return sum(1 for x in times if t - window < x <= t) / window


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def faults(nemesis: Iterable[Op]) -> list[tuple[str, str, float, float]]:
    """(fault class, what it did, start, stop) of each fault the nemesis played."""
    out, started = [], None
    for op in nemesis:
        if op.process != NEMESIS or op.type != INFO:
            continue
        if op.value.get("phase") == "start":
            shown = {k: v for k, v in op.value.items()
                     if k not in ("fault", "phase", "op", "result", "error")}
            started = (op.value.get("fault", op.f), f"{op.f} {shown}", op.time)
        elif started is not None:
            out.append((*started, op.time))
            started = None
    return out


def episodes(ops: Iterable[Op], nemesis: Iterable[Op], window: float = 3.0) -> list[Episode]:
    ops = list(ops)
    done = sorted(op.time for op in ops if op.type == OK)
    invoked: dict[object, float] = {}
    latency: list[tuple[float, float]] = []  # (invoked at, seconds to ok), each message's first ok
    for op in ops:
        if op.type == INVOKE:
            invoked.setdefault(op.process, op.time)
        elif op.type == OK and op.process in invoked:
            latency.append((invoked.pop(op.process), op.time))
    end = done[-1] if done else 0.0
    out = []
    for fault, detail, start, stop in faults(nemesis):
        before = [t for t in done if start - 10 <= t < start]
        baseline = len(before) / 10 if before else 0.0
        recovery: float | None = None
        t = stop
        while t <= end:
            if _windowed(done, t, window) >= 0.9 * baseline:
                recovery = t - stop
                break
            t += 0.25
        until = stop + (recovery if recovery is not None else 0.0)
        steps = [start + window + 0.25 * i for i in range(int(max(0.0, until - start - window) / 0.25) + 1)]
        lowest = min((_windowed(done, x, window) for x in steps), default=baseline)
        during = [(ok - inv) * 1000 for inv, ok in latency if start <= inv <= stop]
        out.append(Episode(fault, detail, start, stop, baseline, lowest, recovery,
                           percentile(during, 0.99), max(during) if during else None,
                           sum(1 for inv, _ok in latency if start <= inv <= stop)))
    return out
