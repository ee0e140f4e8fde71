"""Stateful word count: checkpointed state in memory, SQLite and Redis, beside the plain word count.

    python benchmarks/state.py [--duration 10] [--cores 1]

The same split and count as benchmarks/wordcount.py, local mode, each run in
a fresh process pinned to ``--cores`` CPUs.  The stateful count keeps its
counts in a KeyValueState checkpointed every 100 ms, 1 s or 10 s; its spout
is a CheckpointedSpout (exactly once: untracked tuples, a position committed
with the state), plus one row with a plain reliable spout (at least once:
every tuple tracked, acked when the checkpoint after it commits).  Redis is
a DevRedis started here.  Printed as a table; nothing here asserts a number.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from typing import Any

POOL = 20_000
HERE = os.path.dirname(os.path.abspath(__file__))
# Run as a script, this directory comes first on sys.path, and benchmarks/redis.py would
# shadow the redis client package that RedisStore imports.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]
sys.path.insert(0, os.path.join(HERE, "topologies"))
from pinned import run_pinned  # noqa: E402


def run(spec: dict[str, Any], duration: float, warmup: float) -> dict[str, Any]:
    from bench_wordcount import Count, Split, pooled_sentences, sentence_pool

    from squall import Grouping, LocalCluster, Topology
    from squall.runtime.logging import configure_logging
    from squall.state import CheckpointedSpout, StatefulBolt

    configure_logging("error")
    Sentences = pooled_sentences(POOL, acking=spec.get("acking", True))  # noqa: N806 - a class
    pool = sentence_pool(POOL)  # the same pool, for the rewinding spout

    class RewindingSentences(CheckpointedSpout):
        outputs = ["sentence"]

        def initialize(self, conf: dict[str, Any], context: Any) -> None:
            self.i = 0

        def snapshot(self) -> int:
            return self.i

        def restore(self, position: Any) -> None:
            self.i = position or 0

        def next_tuple(self) -> None:
            i = self.i
            self.i = i + 1
            self.emit([pool[i % POOL]])

    class StatefulCount(StatefulBolt):
        def init_state(self, state: Any) -> None:
            self.counts = state

        def process(self, tup: Any) -> None:
            word = tup.values[0]
            self.counts.put(word, self.counts.get(word, 0) + 1)

    conf: dict[str, Any] = {"topology.acker.executors": 1 if spec.get("acking", True) else 0,
                            "topology.message.timeout.secs": 60,
                            "topology.max.spout.pending": spec.get("pending", 1000)}
    if spec["kind"] == "plain":
        spout_cls, count_cls = Sentences, Count
    else:
        spout_cls = RewindingSentences if spec["spout"] == "checkpointed" else Sentences
        count_cls = StatefulCount
        conf["topology.state.provider"] = spec["provider"]
        conf["topology.state.checkpoint.interval.ms"] = spec["interval_ms"]
        conf["topology.state.provider.config"] = (
            {"url": spec["redis"]} if spec["provider"] == "redis"
            else {"path": os.path.join(spec["dir"], f"state-{os.getpid()}.sqlite")})

    sentences = spout_cls.spec()
    split = Split.spec(inputs=[sentences])
    count = count_cls.spec(inputs={split: Grouping.fields("word")})
    # Named per run: checkpointed state is keyed by the definition's name, and each run
    # starts from none (the Redis runs share one server).
    word_count = Topology.from_specs(f"WordCount{os.getpid()}",
                                      {"sentences": sentences, "split": split, "count": count})

    with LocalCluster() as cluster:
        runner = cluster.submit(f"bench{os.getpid()}", word_count, conf)
        time.sleep(warmup)
        before = runner.stats()
        start = time.perf_counter()
        time.sleep(duration)
        after = runner.stats()
        elapsed = time.perf_counter() - start
    words = after["count"]["executed"] - before["count"]["executed"]
    return {"sentences_per_s": words / 8 / elapsed, "words_per_s": words / elapsed}


def configs(redis_url: str, directory: str) -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = [
        ("plain word count (reliable, max pending 1000)", {"kind": "plain"}),
        ("plain word count (acking off)", {"kind": "plain", "acking": False}),
    ]
    for provider in ("memory", "sqlite", "redis"):
        for interval in (100, 1000, 10_000):
            out.append((f"stateful, {provider}, {interval / 1000:g} s", {
                "kind": "stateful", "spout": "checkpointed", "provider": provider, "interval_ms": interval,
                "redis": redis_url, "dir": directory}))
    out.append(("stateful, sqlite, 1 s, reliable spout (pending 20000)", {
        "kind": "stateful", "spout": "reliable", "provider": "sqlite", "interval_ms": 1000,
        "pending": 20_000, "redis": redis_url, "dir": directory}))
    return out


def measure(spec: dict[str, Any], args: argparse.Namespace) -> dict[str, Any] | str:
    """One run in a fresh process pinned to the cores asked: its result, or its error text."""
    result, errors = run_pinned(__file__, ["--child", json.dumps(spec), "--duration", str(args.duration),
                                           "--warmup", str(args.warmup)], args.cores)
    return errors if result is None else result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--cores", type=int, default=1, help="CPUs each run is pinned to")
    parser.add_argument("--only", help="run only the stateful configurations whose label contains this")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        result = run(json.loads(args.child), args.duration, args.warmup)
        result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps(result))
        return 0
    from squall.contrib.redis.devserver import DevRedis

    print(f"stateful word count, 8-word sentences, 1,000-word vocabulary, local mode, {args.cores} core(s), "
          f"{args.duration:g} s per run; stateful rows use a CheckpointedSpout unless said.\n"
          "Each plain baseline runs first and last; the ratios are against the mean of its two runs.\n")
    with tempfile.TemporaryDirectory() as tmp, DevRedis(os.path.join(tmp, "redis")) as redis:
        rows = configs(redis.url, tmp)
        plain = [(label, spec) for label, spec in rows if spec["kind"] == "plain"]
        stateful = [(label, spec) for label, spec in rows if spec["kind"] != "plain"
                    and (not args.only or args.only in label)]
        results: dict[str, list[Any]] = {}
        for label, spec in [*plain, *stateful, *plain]:
            print(f"  running: {label}", file=sys.stderr, flush=True)
            results.setdefault(label, []).append(measure(spec, args))
    reliable, unacked = (_mean(results[label]) for label, _spec in plain)
    header = (f"{'configuration':<56}{'sentences/s':>13}{'words/s':>11}{'vs reliable':>13}"
              f"{'vs acking off':>15}{'RSS MB':>8}")
    print(header)
    print("-" * len(header))
    for label, _spec in [*plain, *stateful]:
        got = [r for r in results[label] if isinstance(r, dict)]
        if not got:
            print(f"{label:<56} failed:\n{results[label][0]}")
            continue
        sps = _mean(got)
        print(f"{label:<56}{sps:>13,.0f}{sps * 8:>11,.0f}{sps / reliable:>12.2f}x{sps / unacked:>14.2f}x"
              f"{max(r['peak_rss_mb'] for r in got):>8.0f}")
    return 0


def _mean(runs: list[Any]) -> float:
    ok = [r["sentences_per_s"] for r in runs if isinstance(r, dict)]
    return sum(ok) / len(ok) if ok else float("nan")


if __name__ == "__main__":
    sys.exit(main())
