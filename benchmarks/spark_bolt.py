"""A Spark bolt's per-batch latency, throughput and memory, beside a plain bolt.

    python benchmarks/spark_bolt.py [--duration 10] [--sizes 100,1000,10000] [--remote sc://...]

The computation is the example pipeline's (examples/spark/enrich.py): join
each batch of purchase events with a 1,000-row users table (Parquet, cached
on the server) and aggregate per (one-minute window, region), each aggregate
anchored to its events.  The "Spark bolt" rows run it in Spark through the
example's :class:`EnrichAndAggregate`; the "plain bolt" rows do the same
join (a dict) and aggregation in Python over the same batches, with the
same anchoring and acking.

Each row runs in a fresh local-mode process, against one Spark Connect
server started here (or ``--remote``), with acking on and
``max.spout.pending`` = 3 x the batch size, so that batches fill by size.
Latency is per batch: "Spark" is the job thread's time (Arrow table,
Connect calls, result back), "batch" from the batch's first tuple to its
result being emitted.  Printed as tables; nothing here asserts a number.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import defaultdict, deque
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parents[1]
POOL = 50_000


def load_example() -> Any:
    path = REPO / "examples" / "spark" / "enrich.py"
    spec = importlib.util.spec_from_file_location("squall_example_spark_enrich", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * q))]


def run_child(kind: str, size: int, duration: float, warmup: float, remote: str, workdir: str,
              max_size: int | None) -> dict[str, Any]:
    from squall import Bolt, LocalCluster, Spout, Topology
    from squall.runtime.logging import configure_logging

    configure_logging("error")
    ex = load_example()
    rss_start = psutil.Process().memory_info().rss
    events = ex.make_events(POOL, 1000)
    jobs: Any = deque(maxlen=100_000)  # (tuples, spark or compute secs, first tuple -> result secs)

    class BenchEvents(Spout):
        outputs = ["event_id", "user_id", "amount_cents", "ts"]

        def initialize(self, conf: dict[str, Any], context: Any) -> None:
            self.i = 0

        def next_tuple(self) -> None:
            i = self.i
            self.i = i + 1
            e = events[i % POOL]
            self.emit([i, e[1], e[2], e[3]], tup_id=i)

    class SparkEnrich(ex.EnrichAndAggregate):
        def initialize(self, conf: dict[str, Any], context: Any) -> None:
            super().initialize(conf, context)
            self.metrics.jobs = jobs  # (tuples, secs in the job thread, first tuple -> result)

    class PlainEnrich(Bolt):
        """The same join and aggregation in Python, over batches of the same size."""

        outputs = ex.EnrichAndAggregate.outputs
        auto_ack = auto_anchor = auto_fail = False

        def initialize(self, conf: dict[str, Any], context: Any) -> None:
            self.region = dict(enumerate(ex.users_table(1000)["region"]))
            self.batch: list[Any] = []
            self.first = 0.0

        def process(self, tup: Any) -> None:
            if not self.batch:
                self.first = time.monotonic()
            self.batch.append(tup)
            if len(self.batch) >= (max_size or size):
                started = time.monotonic()
                groups: dict[tuple[int, str], list[Any]] = defaultdict(list)
                for t in self.batch:
                    v = t.values
                    groups[(v.ts - v.ts % ex.WINDOW_SECS, self.region[v.user_id])].append(t)
                for (window, region), members in groups.items():
                    ids = sorted(m.values.event_id for m in members)
                    cents = sum(m.values.amount_cents for m in members)
                    self.emit([window, region, len(members), cents, ids], anchors=members)
                for t in self.batch:
                    self.ack(t)
                now = time.monotonic()
                jobs.append((len(self.batch), now - started, now - self.first))
                self.batch = []

    class Sink(Bolt):
        outputs: list[str] = []

        def process(self, tup: Any) -> None:
            pass

    enrich_cls = SparkEnrich if kind == "spark" else PlainEnrich
    specs = {"events": BenchEvents.spec(), "enrich": enrich_cls.spec(inputs=["events"]),
             "sink": Sink.spec(inputs=["enrich"])}
    topology = Topology.from_specs("SparkBench", specs)
    conf = {"topology.max.spout.pending": 3 * size, "topology.message.timeout.secs": 120,
            "spark.bolt.batch.size": size, "spark.bolt.batch.max.size": max_size, "spark.bolt.batch.ms": 5000,
            "spark.remote": remote,
            "example.dir": workdir}
    with LocalCluster() as cluster:
        runner = cluster.submit("bench", topology, conf)
        deadline = time.monotonic() + 120
        while len(jobs) < 3 and time.monotonic() < deadline:  # session, cache, first queries
            time.sleep(0.05)
        time.sleep(warmup)
        before_jobs = len(jobs)
        before = runner.stats()["events"]["acked"]
        start = time.perf_counter()
        time.sleep(duration)
        elapsed = time.perf_counter() - start
        after = runner.stats()["events"]["acked"]
        measured = list(jobs)[before_jobs:]
        errors = [e.error for e in runner.errors]
    return {
        "batches": len(measured),
        "tuples_per_batch": sum(n for n, _c, _e in measured) / max(1, len(measured)),
        "compute_p50_ms": pct([c for _n, c, _e in measured], 0.5) * 1000,
        "compute_p99_ms": pct([c for _n, c, _e in measured], 0.99) * 1000,
        "batch_p50_ms": pct([e for _n, _c, e in measured], 0.5) * 1000,
        "batch_p99_ms": pct([e for _n, _c, e in measured], 0.99) * 1000,
        "tuples_per_s": (after - before) / elapsed,
        "rss_mb": psutil.Process().memory_info().rss / 2**20,
        "rss_start_mb": rss_start / 2**20,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "errors": errors[:3],
    }


def tree_rss_mb(pid: int) -> tuple[float, float, int]:
    """RSS of a process and of its children (the JVM's Python workers)."""
    proc = psutil.Process(pid)
    own = proc.memory_info().rss
    kids = proc.children(recursive=True)
    rest = 0
    for k in kids:
        try:
            rest += k.memory_info().rss
        except psutil.Error:
            pass
    return own / 2**20, rest / 2**20, len(kids)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=10.0, help="seconds measured per row")
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--remote", default=None,
                        help="use this Spark Connect server instead of starting one")
    parser.add_argument("--master", default="local[2]", help="the started server's master")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        spec = json.loads(args.child)
        print(json.dumps(run_child(spec["kind"], spec["size"], args.duration, args.warmup, spec["remote"],
                                   spec["dir"], spec.get("max_size"))))
        return 0

    sizes = [int(s) for s in args.sizes.split(",")]
    workdir = tempfile.mkdtemp(prefix="squall-spark-bench-")
    server = None
    started = time.monotonic()
    if args.remote is None:
        from squall.spark.server import ConnectServer

        server = ConnectServer(Path(workdir) / "server", master=args.master,
                               conf={"spark.sql.shuffle.partitions": 2})
        server.start(wait=True)
        remote = server.url
        jvm, _workers, _n = tree_rss_mb(server.pid) if server.pid else (0.0, 0.0, 0)
        print(f"Spark Connect server ({args.master}) up and warm in {time.monotonic() - started:.1f} s, "
              f"JVM RSS {jvm:.0f} MiB")
    else:
        remote = args.remote
    print(f"enrich (join 1,000-row Parquet table) + aggregate per (window, region), acking on, "
          f"{os.cpu_count()} cores, {args.duration:.0f} s per row\n")
    header = (f"{'bolt':<14}{'batch':>7}{'mean':>7}{'batches':>9}{'tuples/s':>11}"
              f"{'compute p50':>13}{'p99':>8}{'batch p50':>11}{'p99':>8}{'client RSS':>12}")
    print(header)
    print(f"{'':<14}{'size':>7}{'size':>7}{'':>9}{'':>11}{'ms':>13}{'ms':>8}{'ms':>11}{'ms':>8}{'MiB':>12}")
    print("-" * len(header))
    rows = []
    try:
        # Exact batch sizes first (batch.max.size = batch.size); then the default,
        # where the next batch may grow to 4 x while a job runs.
        # An untimed run first: a fresh server JIT-compiles for a while after its warm-up query.
        subprocess.run([sys.executable, __file__, "--child", json.dumps(
            {"kind": "spark", "size": 1000, "remote": remote, "dir": workdir, "max_size": None}),
            "--duration", "5", "--warmup", "1"], capture_output=True, text=True, check=False, cwd=REPO)
        runs = [(kind, size, size) for size in sizes for kind in ("spark", "plain")]
        runs += [("spark", size, None) for size in sizes[:2]]
        for kind, size, max_size in runs:
            spec = {"kind": kind, "size": size, "remote": remote, "dir": workdir, "max_size": max_size}
            proc = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec), "--duration",
                                   str(args.duration), "--warmup", str(args.warmup)],
                                  capture_output=True, text=True, check=False, cwd=REPO)
            label = ("Spark bolt" if kind == "spark" else "plain bolt") + ("" if max_size else " *")
            if proc.returncode != 0:
                print(f"{label:<14}{size:>7} failed:\n{proc.stderr[-2000:]}")
                continue
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            rows.append((kind, size, r))
            print(f"{label:<14}{size:>7}{r['tuples_per_batch']:>7.0f}{r['batches']:>9}"
                  f"{r['tuples_per_s']:>11,.0f}"
                  f"{r['compute_p50_ms']:>13.1f}{r['compute_p99_ms']:>8.1f}{r['batch_p50_ms']:>11.1f}"
                  f"{r['batch_p99_ms']:>8.1f}{r['peak_rss_mb']:>12.0f}"
                  + (f"   errors: {r['errors']}" if r["errors"] else ""))
        print("* default spark.bolt.batch.max.size: while a job runs the next batch may grow "
              "to 4 x batch.size")
        if server is not None and server.pid is not None:
            jvm, workers, n = tree_rss_mb(server.pid)
            print(f"\nSpark Connect server: JVM RSS {jvm:.0f} MiB, "
                  f"{n} Python worker processes {workers:.0f} MiB "
                  f"(after all rows; default 1 GiB heap)")
        spark_rss = [r["peak_rss_mb"] for k, _s, r in rows if k == "spark"]
        plain_rss = [r["peak_rss_mb"] for k, _s, r in rows if k == "plain"]
        if spark_rss and plain_rss:
            print(f"client (worker) process peak RSS: {max(spark_rss):.0f} MiB with a Spark bolt "
                  f"(pyspark Connect client, no JVM) vs {max(plain_rss):.0f} MiB with the plain bolt")
    finally:
        if server is not None:
            server.stop("benchmark-done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
