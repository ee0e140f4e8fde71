"""Nimbus's GET /metrics for Prometheus: the families from a snapshot (pure), then
scraped from a real cluster running the word count; every answer must parse
with prometheus_client's own parser."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from squall.cli.devcluster import DevCluster
from squall.testing import poll_for
from squall.ui import prometheus

REPO = Path(__file__).resolve().parents[2]


def parse(text: str) -> dict[str, Any]:
    """family name -> family, checking that Prometheus's parser takes the whole text."""
    return {f.name: f for f in text_string_to_metric_families(text)}


def samples(families: dict[str, Any], name: str, **labels: str) -> list[Any]:
    return [s for f in families.values() for s in f.samples
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]


def snapshot() -> dict[str, Any]:
    spout = {"emitted": 10, "acked": 9, "failed": 1, "completeLatency": "12.500",
             "streams": {"emitted": {"default": 10}, "transferred": {"default": 20}}}
    bolt = {"emitted": 0, "acked": 7, "failed": 0, "executed": 7, "executeLatency": "0.250", "capacity": 0.4,
            "streams": {"executed_by": {"spout/coordinator:default": 7}}}
    user = {"counters": {"cache.misses": 3, "cache_misses_total": 4},
            "gauges": {"cache_misses": 2, "backlog": 5, "broken": None, "flag": True},
            "histograms": {"batch-size": {"count": 4, "sum": 10.0, "min": 1, "max": 4, "p50": 2, "p99": 4}}}
    return {"supervisors": 1, "slots_total": 4, "slots_used": 1, "topologies": [{
        "id": "wc-1-ab", "name": "wc", "status": "active", "uptime": 12.0, "workers": 1, "executors": 2,
        "tasks": 2, "kinds": {"spout/coordinator": "spout", "count": "bolt"},
        "placement": {(1, 1): {"node": "n1", "worker": "h1:6700"},
                      (2, 2): {"node": "n1", "worker": "h1:6700"}},
        "all_time": {("spout/coordinator", (1, 1)): spout, ("count", (2, 2)): bolt},
        "recent": {("spout/coordinator", (1, 1)): spout, ("count", (2, 2)): bolt},
        "latest": {(1, 1): {"component": "spout/coordinator", "queue_depth": 3, "pending": 6},
                   (2, 2): {"component": "count", "queue_depth": 0, "pending": None},
                   (9, 9): {"component": "gone", "queue_depth": 1, "pending": None}},
        "user_metrics": [{"node": "n1", "worker": "h1:6700", "metrics": {"count": {"2": user}}}],
        "worker_system": [{"node": "n1", "port": 6700, "sample": {
            "time": 1.0, "queue_depth": 3, "system": {"rss_bytes": 40e6, "threads": 8, "cpu_secs": 2.5,
                                                      "gc_secs": 0.1, "backpressure": False},
            "transfer": {"frames_sent": 4, "frames_dropped": 1}}},
                          {"node": "n1", "port": 6701, "sample": None}]}]}


def test_the_families_of_a_snapshot_parse_and_carry_labels() -> None:
    text = generate_latest(prometheus.registry(snapshot)).decode()
    families = parse(text)
    (emitted,) = samples(families, "squall_emitted_total", topology="wc", component="spout/coordinator")
    assert emitted.value == 10 and emitted.labels == {"topology": "wc", "component": "spout/coordinator",
                                                      "executor": "[1-1]", "stream": "default"}
    (executed,) = samples(families, "squall_executed_total", component="count")
    assert executed.labels["source_component"] == "spout/coordinator" and executed.value == 7
    assert samples(families, "squall_complete_latency_ms")[0].value == 12.5
    assert samples(families, "squall_capacity", component="count")[0].value == 0.4
    assert not samples(families, "squall_capacity", component="spout/coordinator")  # bolts only
    (pending,) = samples(families, "squall_pending")
    assert pending.value == 6 and pending.labels["worker"] == "h1:6700" and pending.labels["node"] == "n1"
    assert not samples(families, "squall_queue_depth", component="gone")  # rebalanced away
    assert samples(families, "squall_topology_info")[0].labels["topology_id"] == "wc-1-ab"
    # the components' own metrics: valid names, and a name used as two kinds kept apart
    assert samples(families, "squall_user_cache_misses_total", task="2")[0].value == 3  # the first of two
    assert samples(families, "squall_user_gauge_cache_misses", task="2")[0].value == 2
    assert samples(families, "squall_user_backlog", component="count")[0].value == 5
    quantiles = {s.labels["quantile"]: s.value for s in samples(families, "squall_user_batch_size")}
    assert quantiles == {"0": 1, "0.5": 2, "0.99": 4, "1": 4}
    assert samples(families, "squall_user_batch_size_count")[0].value == 4
    assert not samples(families, "squall_user_broken") and not samples(families, "squall_user_flag")
    # the workers' own series
    where = {"topology": "wc", "node": "n1", "port": "6700"}
    for name, value in (("squall_worker_rss_bytes", 40e6), ("squall_worker_threads", 8),
                        ("squall_worker_queue_depth", 3), ("squall_worker_cpu_seconds_total", 2.5),
                        ("squall_worker_gc_seconds_total", 0.1), ("squall_worker_frames_sent_total", 4),
                        ("squall_worker_frames_dropped_total", 1)):
        (sample,) = samples(families, name)
        assert sample.labels == where and sample.value == value, name


# -- a real cluster ------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    c = DevCluster(tmp_path_factory.mktemp("prometheus") / "c", supervisors=1, slots=2,
                   conf={"nimbus.stats.freq.secs": 1})
    try:
        c.start()
        proc = subprocess.run([sys.executable, "-m", "squall.cli", "submit", "--config",
                               str(c.config_file), str(REPO / "examples" / "wordcount.py"),
                               "--conf", "topology.workers=2"],
                              capture_output=True, text=True, timeout=120, cwd=REPO, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        yield c
    finally:
        c.stop()


def scrape(cluster: DevCluster) -> dict[str, Any]:
    response = cluster.request("GET", f"{cluster.nimbus_url}/metrics")
    assert response.status_code == 200 and response.headers["Content-Type"].startswith("text/plain")
    return parse(response.text)


def total(families: dict[str, Any], name: str, **labels: str) -> float:
    return sum(s.value for s in samples(families, name, **labels))


def test_a_running_topology_is_scraped_and_its_counters_grow(cluster: DevCluster) -> None:
    def acked() -> Any:
        # (both workers' stats in: each worker reports on its own beat, not with the other)
        families = scrape(cluster)
        workers = samples(families, "squall_worker_rss_bytes", topology="WordCount")
        if total(families, "squall_acked_total", component="sentences") > 0 and len(workers) == 2:
            return families
        return None

    first = poll_for(acked, timeout=60, interval=0.2, message="acked trees in /metrics")
    assert total(first, "squall_cluster_supervisors") == 1
    assert total(first, "squall_topology_workers", topology="WordCount") == 2
    for component in ("sentences", "split", "count"):
        assert samples(first, "squall_emitted_total", topology="WordCount", component=component,
                       stream="default")
    assert samples(first, "squall_executed_total", component="split", source_component="sentences")
    assert samples(first, "squall_complete_latency_ms", component="sentences")
    assert samples(first, "squall_capacity", component="count")
    queued = {s.labels["component"] for s in samples(first, "squall_queue_depth")}
    assert queued >= {"sentences", "split", "count"}
    for name in ("squall_worker_rss_bytes", "squall_worker_threads", "squall_worker_queue_depth",
                 "squall_worker_cpu_seconds_total", "squall_worker_gc_seconds_total",
                 "squall_worker_frames_sent_total", "squall_worker_frames_dropped_total"):
        series = samples(first, name, topology="WordCount")
        assert len(series) == 2, name  # two workers
        assert all(set(s.labels) == {"topology", "node", "port"} and s.labels["port"].isdigit()
                   for s in series), name
    assert all(s.value > 10 * 2**20 for s in samples(first, "squall_worker_rss_bytes"))
    # squall metrics: the same exposition from the command line (the keyring's token, over TLS)
    proc = subprocess.run([sys.executable, "-m", "squall.cli", "metrics", "--config",
                           str(cluster.config_file)],
                          capture_output=True, text=True, timeout=60, cwd=REPO, check=False)
    assert proc.returncode == 0, proc.stderr
    assert total(parse(proc.stdout), "squall_acked_total", component="sentences") > 0
    before = total(first, "squall_emitted_total", topology="WordCount", component="split")
    poll_for(lambda: total(scrape(cluster), "squall_emitted_total", topology="WordCount", component="split")
             > before, timeout=30, interval=0.2, message="squall_emitted_total growing")
