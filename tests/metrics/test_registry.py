"""A component's own metrics: counters, gauges, histograms, as Storm's registerMetric."""

from __future__ import annotations

import pytest

from squall.metrics.registry import SAMPLE, MetricsRegistry


def test_counters_gauges_and_histograms_snapshot_as_plain_data() -> None:
    reg = MetricsRegistry("cache")
    misses = reg.counter("cache_misses")
    misses.inc()
    misses.inc(4)
    backlog = [1, 2, 3]
    reg.gauge("backlog", lambda: len(backlog))
    reg.gauge("temperature").set(21.5)
    sizes = reg.histogram("batch_size")
    for v in range(1, 101):
        sizes.observe(v)
    snap = reg.snapshot()
    assert snap["counters"] == {"cache_misses": 5}
    assert snap["gauges"] == {"backlog": 3, "temperature": 21.5}
    h = snap["histograms"]["batch_size"]
    assert (h["count"], h["sum"], h["min"], h["max"]) == (100, 5050, 1, 100)
    assert h["p50"] == 51 and h["p99"] == 100


def test_the_same_name_gives_the_same_metric_and_another_kind_is_refused() -> None:
    reg = MetricsRegistry("bolt")
    assert reg.counter("n") is reg.counter("n")
    with pytest.raises(ValueError, match="metric 'n' is a counter, not a histogram"):
        reg.histogram("n")
    with pytest.raises(ValueError, match="must start with a letter"):
        reg.counter("9 lives")
    with pytest.raises(ValueError, match="only grows"):
        reg.counter("n").inc(-1)


def test_a_histogram_keeps_a_bounded_sample_and_a_failing_gauge_reads_none() -> None:
    reg = MetricsRegistry()
    h = reg.histogram("latency")
    for v in range(100_000):
        h.observe(float(v))
    assert len(h.sample) == SAMPLE
    summary = h.summary()
    assert summary["count"] == 100_000 and summary["max"] == 99_999.0
    assert 40_000 < summary["p50"] < 60_000  # a fair sample of everything seen
    reg.gauge("broken", lambda: 1 / 0)
    assert reg.snapshot()["gauges"]["broken"] is None
