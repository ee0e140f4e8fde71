"""Word-count throughput, latency and memory: Squall local mode beside a plain loop.

    python benchmarks/wordcount.py [--duration 5] [--cores 1] [--repeat 1]

Each configuration runs in a fresh process pinned to ``--cores`` CPUs, so
peak RSS is its own.  Sentences are 8 words from a 1,000-word vocabulary,
pre-generated so that the spout measures the engine, not ``random``.
Printed as a table; nothing here asserts a number.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sys
import time
from collections import Counter
from typing import Any

# The sentence pool the other benchmarks use (a module that imports no Squall, so the
# plain loop's row carries none in its RSS), and their spout, split and count bolts.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "topologies"))
from pinned import run_pinned  # noqa: E402
from sentences import sentence_pool  # noqa: E402


def run_plain(duration: float) -> dict[str, Any]:
    pool = sentence_pool()
    counts: Counter[str] = Counter()
    n = 0
    start = time.perf_counter()
    deadline = start + duration
    while time.perf_counter() < deadline:
        for sentence in pool[:1000]:
            for word in sentence.split():
                counts[word] += 1
        n += 1000
    elapsed = time.perf_counter() - start
    return {"sentences_per_s": n / elapsed, "tuples_per_s": n * 9 / elapsed}


def run_squall(duration: float, warmup: float, acking: bool, rate: float | None,
               max_pending: int | None, of_max: float | None = None) -> dict[str, Any]:
    """The word count in local mode: at most ``rate`` sentences a second if given; with
    ``of_max``, at that share of the maximum this process reaches just before."""
    from bench_wordcount import Count, Pace, Split, pooled_sentences

    from squall import Grouping, LocalCluster, Topology
    from squall.runtime.logging import configure_logging

    configure_logging("error")
    pace = Pace() if of_max is not None else None
    max_rate = None
    Sentences = pooled_sentences(acking=acking, rate=rate, pace=pace)  # noqa: N806 - a class

    conf: dict[str, Any] = {"topology.acker.executors": 1 if acking else 0}
    if max_pending is not None:
        conf["topology.max.spout.pending"] = max_pending

    class WordCount(Topology):
        sentences = Sentences.spec()
        split = Split.spec(inputs=[sentences])
        count = Count.spec(inputs={split: Grouping.fields("word")})

    with LocalCluster() as cluster:
        runner = cluster.submit("bench", WordCount, conf)
        time.sleep(warmup)
        spout = next(e for w in runner.workers if w for e in w.executors if e.component == "sentences")
        if pace is not None and of_max is not None:
            # The maximum, in this process and this minute, then the share of it: a VM's
            # speed drifts by 10-20% from one minute to the next, so a rate set from another
            # process's maximum can be 95% of this one's, and its queues then never drain.
            max_rate = counted_rate(runner, max(1.0, duration / 2))
            pace.set(max_rate * of_max)
            time.sleep(SETTLE_SECS)  # the maximum's trees in flight complete
        before = runner.stats()
        if acking:
            spout.latencies.clear()
        start = time.perf_counter()
        time.sleep(duration)
        after = runner.stats()
        elapsed = time.perf_counter() - start
        samples = sorted(spout.latencies)
    words = after["count"]["executed"] - before["count"]["executed"]
    tuples = sum(after[c]["executed"] - before[c]["executed"] for c in ("split", "count"))
    out: dict[str, Any] = {
        "sentences_per_s": words / 8 / elapsed,
        "tuples_per_s": (tuples + words / 8) / elapsed,
    }
    if samples:
        out["p50_ms"] = samples[len(samples) // 2] * 1000
        out["p99_ms"] = samples[int(len(samples) * 0.99)] * 1000
    if pace is not None:
        out["of_max_sentences_per_s"] = max_rate
    return out


SETTLE_SECS = 1.0


def counted_rate(runner: Any, secs: float) -> float:
    """Sentences a second through the count bolt over the next ``secs`` seconds."""
    before = runner.stats()["count"]["executed"]
    start = time.perf_counter()
    time.sleep(secs)
    return (runner.stats()["count"]["executed"] - before) / 8 / (time.perf_counter() - start)


MAX_ON = "squall, acking on (max pending 1000)"
AT_80 = "squall, acking on, 80% of its maximum"
CONFIGS: list[tuple[str, dict[str, Any]]] = [
    ("plain Python loop", {"kind": "plain"}),
    ("squall, acking off", {"kind": "squall", "acking": False}),
    (MAX_ON, {"kind": "squall", "acking": True, "max_pending": 1000}),
    # The same two with the hot path's Cython builds turned off (squall/compiled).
    ("  pure Python, acking off", {"kind": "squall", "acking": False, "pure": True}),
    ("  pure Python, acking on", {"kind": "squall", "acking": True, "max_pending": 1000, "pure": True}),
    ("squall, acking on, 5K sentences/s", {"kind": "squall", "acking": True, "rate": 5000.0}),
    # The issue's latency point: 80% of the acking-on maximum (max pending 1000), the maximum
    # measured in the same process just before (see run_squall).
    (AT_80, {"kind": "squall", "acking": True, "max_pending": 1000, "of_max": 0.8}),
]


def pending_tree_bytes(n: int = 100_000) -> dict[str, float]:
    """Bytes per pending tuple tree: the acker's ledger and the spout's pending map."""
    import tracemalloc

    from squall.acker import AckLedger
    from squall.worker.executors.pending import PendingTrees

    rng = random.Random(3)
    ids = [(rng.getrandbits(64), rng.getrandbits(64)) for _ in range(n)]
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    ledger = AckLedger()
    for root, val in ids:
        ledger.init(root, val, spout_task=3)
    acker = (tracemalloc.get_traced_memory()[0] - base) / n
    base = tracemalloc.get_traced_memory()[0]
    pending = PendingTrees()  # what a spout executor keeps
    now = time.monotonic()
    for i, (root, _val) in enumerate(ids):
        pending.put_new(root, (3, i, now + i))
    spout = (tracemalloc.get_traced_memory()[0] - base) / n
    tracemalloc.stop()
    return {"acker": acker, "spout": spout}


def child(spec: dict[str, Any], duration: float, warmup: float) -> None:
    if spec["kind"] == "plain":
        result = run_plain(duration)
    else:
        result = run_squall(duration, warmup, spec["acking"], spec.get("rate"), spec.get("max_pending"),
                            spec.get("of_max"))
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


def run_child(spec: dict[str, Any], args: argparse.Namespace) -> dict[str, Any] | None:
    env = {**os.environ, "SQUALL_PURE_PYTHON": "1" if spec.get("pure") else "0"}
    result, errors = run_pinned(__file__, ["--child", json.dumps(spec), "--duration", str(args.duration),
                                           "--warmup", str(args.warmup)], args.cores, env)
    if result is None:
        print(errors, file=sys.stderr)
    return result


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run of median throughput (its latencies and memory with it)."""
    return sorted(runs, key=lambda r: r["sentences_per_s"])[len(runs) // 2]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--cores", type=int, default=1, help="CPUs each run is pinned to")
    parser.add_argument("--repeat", type=int, default=1,
                        help="rounds of every configuration; the table shows each one's median run")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(json.loads(args.child), args.duration, args.warmup)
        return 0
    print(f"word count, 8-word sentences, 1,000-word vocabulary, local mode, {args.cores} core(s), "
          f"{args.duration:.0f} s per run, {args.repeat} round(s)\n")
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label, _spec in CONFIGS}
    # Rounds of every configuration in turn: a machine whose speed drifts (a VM's does,
    # by 10-20%) then slows every configuration alike, and the medians stay comparable.
    for _round in range(args.repeat):
        for label, spec in CONFIGS:
            r = run_child(spec, args)
            if r is None:
                print(f"{label}: failed", file=sys.stderr)
            else:
                runs[label].append(r)
    header = (f"{'configuration':<40}{'sentences/s':>13}{'tuples/s':>12}"
              f"{'p50 ms':>9}{'p99 ms':>9}{'RSS MB':>9}")
    if args.repeat > 1:
        header += f"{'  sentences/s min-max':>24}"
    print(header)
    print("-" * len(header))
    for label, _spec in CONFIGS:
        if not runs[label]:
            print(f"{label:<40} failed")
            continue
        r = median_run(runs[label])
        p50 = f"{r['p50_ms']:.2f}" if "p50_ms" in r else "-"
        p99 = f"{r['p99_ms']:.2f}" if "p99_ms" in r else "-"
        line = (f"{label:<40}{r['sentences_per_s']:>13,.0f}{r['tuples_per_s']:>12,.0f}{p50:>9}{p99:>9}"
                f"{r['peak_rss_mb']:>9.0f}")
        if args.repeat > 1:
            rates = [x["sentences_per_s"] for x in runs[label]]
            line += f"{min(rates):>14,.0f} - {max(rates):,.0f}"
        print(line)
    if runs[AT_80]:
        r = median_run(runs[AT_80])
        print(f"\n'{AT_80}': {r['sentences_per_s']:,.0f} sentences/s of a maximum of "
              f"{r['of_max_sentences_per_s']:,.0f} reached in the same process just before")
    sizes = pending_tree_bytes()
    print(f"\nstate per pending tuple tree (tracemalloc, 100,000 trees): acker ledger "
          f"{sizes['acker']:.0f} bytes, spout pending map {sizes['spout']:.0f} bytes "
          f"(Storm's acker: about 20 bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
