"""Trident's word count beside the plain at-least-once word count, on the same sentences and
one core: sentences per second, and how long a batch takes from its start to its commit.

    python benchmarks/trident.py [--duration 10] [--batch 100 --batch 1000 ...] [--repeat 1]

Each configuration runs in a fresh process pinned to ``--cores`` CPUs.  The Trident word
count is ``each(Split) -> group_by(word) -> persistent_aggregate(MemoryMapState opaque,
Count)``: a batch is ``--batch`` sentences of the pool, the same ones again if it is
replayed.  Counted: sentences of committed batches after the warm-up.  The plain word count
is benchmarks/wordcount.py's (spout, split, count, acking on).  Printed as a table; nothing
here asserts a number.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "topologies"))
from pinned import run_pinned  # noqa: E402


def run_trident(duration: float, warmup: float, batch: int, pending: int) -> dict[str, Any]:
    from trident_bench import Committed, PoolBatches

    from squall import LocalCluster
    from squall.runtime.logging import configure_logging
    from squall.trident import Count, MemoryMapState, TridentTopology
    from squall.trident.testing import Split

    configure_logging("error")
    topology = TridentTopology()
    (topology.new_stream("sentences", PoolBatches(batch))
     .each(["sentence"], Split(), ["word"])
     .group_by(["word"])
     .persistent_aggregate(MemoryMapState.factory(), Count(), ["count"]))
    with LocalCluster() as cluster:
        cluster.submit("trident-wordcount", topology.build("TridentWordCount"),
                       conf={"topology.max.spout.pending": pending})
        time.sleep(warmup)
        t0 = time.perf_counter()
        time.sleep(duration)
        t1 = time.perf_counter()
    with Committed.lock:
        done = [b for b in Committed.batches if t0 <= b[1] <= t1]
    latencies = sorted((end - start) * 1000 for start, end, _n in done)
    sentences = sum(n for _s, _e, n in done)

    def pct(q: float) -> float:
        return latencies[min(len(latencies) - 1, int(q * len(latencies)))] if latencies else float("nan")

    return {"sentences_per_s": sentences / (t1 - t0), "batches": len(done), "p50_ms": pct(0.5),
            "p99_ms": pct(0.99)}


def run_plain(duration: float, warmup: float) -> dict[str, Any]:
    from bench_wordcount import Count, Split, pooled_sentences

    from squall import Grouping, LocalCluster, Topology
    from squall.runtime.logging import configure_logging

    configure_logging("error")
    sentences = pooled_sentences(acking=True)

    class WordCount(Topology):
        config = {"topology.acker.executors": 1}
        spout = sentences.spec()
        split = Split.spec(inputs=[spout])
        count = Count.spec(inputs={split: Grouping.fields("word")})

    with LocalCluster() as cluster:
        runner = cluster.submit("wordcount", WordCount)
        time.sleep(warmup)
        before, t0 = _acked(runner), time.perf_counter()
        time.sleep(duration)
        after, t1 = _acked(runner), time.perf_counter()
    return {"sentences_per_s": (after - before) / (t1 - t0), "batches": 0, "p50_ms": float("nan"),
            "p99_ms": float("nan")}


def _acked(runner: Any) -> int:
    stats = runner.stats()
    return int(sum(s.get("acked", 0) for name, s in stats.items() if name == "spout"))


def child(spec: dict[str, Any], duration: float, warmup: float) -> None:
    if spec["kind"] == "plain":
        result = run_plain(duration, warmup)
    else:
        result = run_trident(duration, warmup, spec["batch"], spec["pending"])
    print(json.dumps(result))


def run_child(spec: dict[str, Any], args: argparse.Namespace) -> dict[str, Any] | None:
    result, errors = run_pinned(__file__, ["--child", json.dumps(spec), "--duration", str(args.duration),
                                           "--warmup", str(args.warmup)], args.cores)
    if result is None:
        print(errors, file=sys.stderr)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--cores", type=int, default=1)
    parser.add_argument("--batch", type=int, action="append", default=None,
                        help="sentences per Trident batch (repeatable; default 100, 1000, 5000, 10000)")
    parser.add_argument("--pending", type=int, default=1,
                        help="Trident batches in flight (topology.max.spout.pending; 1, Trident's "
                             "default, is the fastest on one core: a second batch in flight only "
                             "competes with the first for the core)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(json.loads(args.child), args.duration, args.warmup)
        return 0
    batches = args.batch or [100, 1000, 5000, 10000]
    configs = [("plain word count (at least once)", {"kind": "plain"})] + [
        (f"Trident, batches of {b:,}", {"kind": "trident", "batch": b, "pending": args.pending})
        for b in batches]
    print(f"word count, 8-word sentences, local mode, {args.cores} core(s), {args.duration:.0f} s per run, "
          f"{args.repeat} round(s), Trident max spout pending {args.pending}\n")
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label, _ in configs}
    for _ in range(args.repeat):
        for label, spec in configs:
            result = run_child(spec, args)
            if result is not None:
                runs[label].append(result)
    header = (f"{'configuration':<36}{'sentences/s':>13}{'x plain':>9}{'batches':>9}"
              f"{'commit p50 ms':>15}{'p99 ms':>9}")
    print(header)
    print("-" * len(header))
    plain = None
    for label, _spec in configs:
        if not runs[label]:
            print(f"{label:<36} failed")
            continue
        r = sorted(runs[label], key=lambda x: x["sentences_per_s"])[len(runs[label]) // 2]
        plain = plain or r["sentences_per_s"]
        ratio = r["sentences_per_s"] / plain if plain else float("nan")
        print(f"{label:<36}{r['sentences_per_s']:>13,.0f}{ratio:>9.2f}{r['batches']:>9}"
              f"{r['p50_ms']:>15.1f}{r['p99_ms']:>9.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
