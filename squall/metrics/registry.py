"""A component's own metrics (Storm's ``registerMetric``): counters, gauges
and histograms, registered in ``initialize`` and updated from the executor
thread:

    self.misses = self.metrics.counter("cache_misses")
    self.depth = self.metrics.gauge("backlog", lambda: len(self.backlog))
    self.sizes = self.metrics.histogram("batch_size")
    ...
    self.misses.inc(); self.sizes.observe(len(batch))

A pure core: nothing here reads a clock or does I/O.  ``snapshot()`` gives
plain data (counters cumulative, so a reader turns them into rates and
windows; gauges as last read; histograms as count, sum, min, max and
percentiles of a bounded sample), which the worker ships with its stats.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from typing import Any

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]{0,127}$")
SAMPLE = 1024  # values a histogram keeps for its percentiles (reservoir sampling)


class Counter:
    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0

    def inc(self, n: int | float = 1) -> None:
        if n < 0:
            msg = f"a counter only grows; inc({n}) would lower it"
            raise ValueError(msg)
        self.value += n


class Gauge:
    __slots__ = ("fn", "value")

    def __init__(self, fn: Callable[[], Any] | None) -> None:
        self.fn = fn
        self.value: Any = None

    def set(self, value: float) -> None:
        self.value = value

    def read(self) -> Any:
        return self.fn() if self.fn is not None else self.value


class Histogram:
    __slots__ = ("count", "max", "min", "rng", "sample", "total")

    def __init__(self, seed: int = 0) -> None:
        self.count = 0
        self.total = 0.0
        self.min: float | None = None
        self.max: float | None = None
        self.sample: list[float] = []
        self.rng = random.Random(seed)

    def observe(self, value: float) -> None:
        self.count += 1
        self.total += value
        self.min = value if self.min is None or value < self.min else self.min
        self.max = value if self.max is None or value > self.max else self.max
        if len(self.sample) < SAMPLE:
            self.sample.append(value)
        else:
            # Reservoir sampling: every value seen so far is kept with equal chance.
            i = self.rng.randrange(self.count)
            if i < SAMPLE:
                self.sample[i] = value

    def summary(self) -> dict[str, Any]:
        ordered = sorted(self.sample)

        def pct(p: float) -> float | None:
            return ordered[min(len(ordered) - 1, int(len(ordered) * p))] if ordered else None

        return {"count": self.count, "sum": self.total, "min": self.min, "max": self.max,
                "p50": pct(0.5), "p99": pct(0.99)}


class MetricsRegistry:
    """One task's metrics, by name.  Asking twice for the same name and kind
    gives the same metric; the same name as another kind is an error."""

    def __init__(self, owner: str = "component") -> None:
        self.owner = owner
        self._metrics: dict[str, Counter | Gauge | Histogram] = {}

    def _get(self, name: str, kind: type, make: Callable[[], Any]) -> Any:
        if not isinstance(name, str) or not _NAME.match(name):
            msg = (f"{self.owner}: metric name {name!r} must start with a letter or '_' and hold "
                   "letters, digits, '_', '.', ':' or '-' (at most 128)")
            raise ValueError(msg)
        metric = self._metrics.get(name)
        if metric is None:
            metric = self._metrics[name] = make()
        elif not isinstance(metric, kind):
            have, want = type(metric).__name__.lower(), kind.__name__.lower()
            msg = f"{self.owner}: metric {name!r} is a {have}, not a {want}"
            raise ValueError(msg)
        return metric

    def counter(self, name: str) -> Counter:
        return self._get(name, Counter, Counter)

    def gauge(self, name: str, fn: Callable[[], Any] | None = None) -> Gauge:
        gauge = self._get(name, Gauge, lambda: Gauge(fn))
        if fn is not None:
            gauge.fn = fn
        return gauge

    def histogram(self, name: str) -> Histogram:
        return self._get(name, Histogram, lambda: Histogram(seed=len(self._metrics)))

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """{"counters": {name: value}, "gauges": {name: value}, "histograms": {name: summary}}.

        A gauge whose function raises reads as None: a metric never takes a task down.
        """
        out: dict[str, dict[str, Any]] = {"counters": {}, "gauges": {}, "histograms": {}}
        # A copy first: the executor thread may register a metric while the
        # heartbeat thread reads (values are read racily, which is fine for numbers).
        for name, metric in sorted(list(self._metrics.items())):
            if isinstance(metric, Counter):
                out["counters"][name] = metric.value
            elif isinstance(metric, Gauge):
                try:
                    out["gauges"][name] = metric.read()
                except Exception:  # noqa: BLE001 - the user's function; reported as no value
                    out["gauges"][name] = None
            else:
                out["histograms"][name] = metric.summary()
        return out
