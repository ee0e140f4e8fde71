"""Max spout pending by hand and by the paper's tuner (Storm@Twitter §3.3.3), side by side.

    python benchmarks/autotune.py [--duration 6] [--settle 40] [--period 2] [--repeat 1]

Two topologies in local mode, acking on: the word count (the same split and
count bolts as benchmarks/cluster.py) and a word count whose count bolt is
slow (50 µs of work per word, a busy loop: a bottleneck the spout must not
flood).  For each, a sweep of fixed ``topology.max.spout.pending`` values,
then the tuner (``topology.max.spout.pending.autotune``, a period of
``--period`` seconds, starting at 100) given ``--settle`` seconds to settle,
alone and with a latency target (``--latency-ms``), the latter also started
at 10,000.
Each row is a fresh process, pinned to one core as ``squall local`` and the
cluster's workers pin themselves (``--unpinned``: free to move between cores,
where a GIL's threads trade cores and small batches cost more; see
docs/monitoring.md): sentences acked per second and the spout's
complete latency p50/p99 over ``--duration`` seconds after a warm-up; the
tuner's row also says where it settled (its value at the start and end of the
measurement).  Nothing here asserts a number.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

POOL_SIZE = 20_000
FIXED = [100, 300, 1000, 3000, 10000]
SLOW_WORK_SECS = 50e-6


def run(kind: str, pending: int | None, autotune: bool, period: float, settle: float,
        duration: float, latency_ms: float | None = None, tolerance: float = 0.05,
        pinned: bool = True) -> dict[str, Any]:
    from squall import Bolt, Grouping, LocalCluster, Topology
    from squall.cli.main import pin_local
    from squall.runtime.logging import configure_logging

    pin_local("auto" if pinned else "none")  # as squall local --cpu pins itself

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "topologies"))
    from bench_wordcount import Count, Split, pooled_sentences

    configure_logging("error")
    Sentences = pooled_sentences(POOL_SIZE)  # noqa: N806 - a class

    class SlowCount(Bolt):
        outputs = ["word", "count"]

        def process(self, tup: Any) -> None:
            until = time.perf_counter() + SLOW_WORK_SECS
            while time.perf_counter() < until:
                pass

    counter = SlowCount if kind == "slow" else Count
    conf: dict[str, Any] = {"topology.acker.executors": 1, "topology.max.spout.pending": pending}
    if autotune:
        conf.update({"topology.max.spout.pending.autotune": True,
                     "topology.max.spout.pending.autotune.secs": period,
                     "topology.max.spout.pending.autotune.latency.ms": latency_ms,
                     "topology.max.spout.pending.autotune.tolerance": tolerance})

    class WordCount(Topology):
        sentences = Sentences.spec()
        split = Split.spec(inputs=[sentences])
        count = counter.spec(inputs={split: Grouping.fields("word")})

    with LocalCluster() as cluster:
        runner = cluster.submit("bench", WordCount, conf)
        time.sleep(settle if autotune else 2.0)
        spout = next(e for w in runner.workers if w for e in w.executors if e.component == "sentences")
        tuned_from = spout.max_pending
        before = runner.stats()["sentences"]["acked"]
        spout.latencies.clear()
        start = time.perf_counter()
        time.sleep(duration)
        acked = runner.stats()["sentences"]["acked"] - before
        elapsed = time.perf_counter() - start
        samples = sorted(spout.latencies)
        tuned_to = spout.max_pending
    out: dict[str, Any] = {"sentences_per_s": acked / elapsed, "from": tuned_from, "to": tuned_to}
    if samples:
        out["p50_ms"] = samples[len(samples) // 2] * 1000
        out["p99_ms"] = samples[int(len(samples) * 0.99)] * 1000
    return out


def in_child(spec: dict[str, Any]) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], capture_output=True,
                          text=True, check=True, timeout=600)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=6.0)
    parser.add_argument("--settle", type=float, default=40.0)
    parser.add_argument("--period", type=float, default=2.0)
    parser.add_argument("--tolerance", type=float, default=0.05,
                        help="topology.max.spout.pending.autotune.tolerance (default 0.05)")
    parser.add_argument("--latency-ms", type=float, default=20.0,
                        help="the latency target of the last row (default 20 ms)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="rounds of every configuration; the tables show each one's median run")
    parser.add_argument("--unpinned", action="store_true",
                        help="run each topology free to move between cores (squall local --cpu none)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run(**json.loads(args.child))))
        return 0
    common = {"period": args.period, "settle": args.settle, "duration": args.duration,
              "tolerance": args.tolerance, "pinned": not args.unpinned}
    for kind, title in (("wordcount", "word count"), ("slow", "word count, count bolt 50 µs a word")):
        specs = {str(p): {"kind": kind, "pending": p, "autotune": False, **common} for p in FIXED}
        specs["tuner"] = {"kind": kind, "pending": 100, "autotune": True, **common}
        specs["target"] = {"kind": kind, "pending": 100, "autotune": True, "latency_ms": args.latency_ms,
                           **common}
        specs["target-high"] = {**specs["target"], "pending": FIXED[-1]}
        runs: dict[str, list[dict[str, Any]]] = {key: [] for key in specs}
        # Rounds of every configuration in turn: a machine whose speed drifts (a VM's does,
        # by 10-30%) slows them alike, and the medians stay comparable.
        for _round in range(args.repeat):
            for key, spec in specs.items():
                runs[key].append(in_child(spec))
        med = {key: sorted(rs, key=lambda r: r["sentences_per_s"])[len(rs) // 2] for key, rs in runs.items()}
        rounds = f", median of {args.repeat} rounds" if args.repeat > 1 else ""
        where = "unpinned" if args.unpinned else "pinned to 1 core"
        print(f"\n{title}, acking on, local mode {where}{rounds}\n")
        print(f"{'max spout pending':<34}{'sentences/s':>12}{'p50 ms':>9}{'p99 ms':>9}")
        print("-" * 64)
        tuned = med["tuner"]
        rows = [(str(p), med[str(p)]) for p in FIXED]
        rows.append((f"tuner ({tuned['from']} -> {tuned['to']})", tuned))
        for key in ("target", "target-high"):
            r = med[key]
            rows.append((f"tuner, <= {args.latency_ms:g} ms ({r['from']} -> {r['to']})", r))
        for label, r in rows:
            print(f"{label:<34}{r['sentences_per_s']:>12,.0f}"
                  f"{r.get('p50_ms', 0):>9.1f}{r.get('p99_ms', 0):>9.1f}")
        best_label, best = max(rows[:len(FIXED)], key=lambda row: row[1]["sentences_per_s"])
        meeting = [label for label, r in rows[:len(FIXED)] if r.get("p99_ms", 0) <= args.latency_ms]
        print(f"best fixed: {best_label}; fixed values with p99 <= {args.latency_ms:g} ms: "
              f"{', '.join(meeting) or 'none'}")
        for label, r in rows[len(FIXED):]:
            print(f"  {label:<32} {r['sentences_per_s'] / best['sentences_per_s']:.2f}x the best fixed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
