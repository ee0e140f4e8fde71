"""The Streams API's word count beside the same word count as hand-written bolts, and a
windowed join of two streams.

    python benchmarks/streams.py [--duration 5] [--warmup 2] [--cores 1] [--repeat 3]
                                 [--only wordcount|join]

Local mode; each configuration runs in a fresh process pinned to ``--cores`` CPUs
(benchmarks/topologies/pinned.py), rounds of every configuration in turn, each
round in a rotated order, so that a machine whose speed drifts slows every row
alike.  The table shows each row's median run with the spread of its rounds.
Nothing here asserts a number.

**Word count.**  The hand-written rows are benchmarks/wordcount.py's topology:
its sentence pool (8 words from a 1,000-word vocabulary, pre-generated) through
its ``PooledSentences`` spout, ``Split`` (one tuple per word) and ``Count``
fields-grouped on the word (a ``Counter``, emitting nothing).  The Streams rows
do the same work with the same spout::

    builder.new_stream(PooledSentences, ValueMapper(0))
        .flat_map(str.split).map_to_pair(lambda w: (w, 1)).count_by_key()
        .for_each(len)

``count_by_key`` gives its running ``(word, n)`` per word (Storm's semantics), where
the hand-written ``Count`` keeps its count and discards it; ``for_each(len)`` is the
cheapest terminal that emits nothing (a C builtin: no Python frame), so the Streams
row pays only for what the API itself insists on (the running-result tuple).
At parallelism 1 the Streams row is two components (spout, one bolt running all
five operations: the mapper, ``flat_map``, ``map_to_pair``, ``count_by_key``,
``for_each``) where the hand-written one has three (spout, split, count): the fused
bolt saves the split-to-count hop, one tuple per word.  At parallelism 2 both have
three, since ``count_by_key`` above parallelism 1 starts a bolt fields-grouped on
``key`` (``[word, 1]`` crosses, where the hand-written split sends ``[word]``).
The row "its split emitting [word, 1]" is the hand-written par-2 topology with a
split sending that pair: its gap to the hand-written row is what the engine charges
for the pair (two fields; an ``int``, which every emit checks against msgpack's
range), its gap to the Streams row what the operations' Python calls cost.

Throughput is sentences per second: the last bolt's executed tuples over the run
(divided by 8 where it executes words).  CPU is the process's user + system time
per sentence over the same seconds (steadier than throughput when the machine is
shared).  Latency is the spout tuples' complete latency (acking on: the spout's own
samples over the run, ``topology.max.spout.pending`` 1,000 as wordcount.py's
maximum row).

**Windowed join.**  Two spouts of pre-generated ``(key, value)`` pairs,
``a.window(TumblingWindows.of(w)).join(b).for_each(tally)``: the bolt that joins
applies the window to both sides together and pairs every value of ``a`` with every
value of ``b`` under the same key; ``tally`` (a module function, so the task calls it
by reference) counts results.  The layout has three bolts: each spout's mapper runs
in a bolt of its own (a spout's tuples are mapped before they leave their first
bolt, and two spouts' chains meet only in the join's), then the join.
``Count(1000)`` with keys from 1,000: about 500 values a side, about 250 results a
window.  ``Duration.milliseconds(500)`` with keys from 10,000: the results grow
with the rate (about (rate x 0.25 s)^2 / 10,000 a window).  Shown: input pairs per
second through the join's bolt, joined results per second, and the spout tuples'
complete latency, which for a window includes the wait for it to end.  Acking on,
``topology.max.spout.pending`` is 2,000 a spout for the count window and 100,000
for the duration one: a window keeps its tuples pending until it ends, so the cap
must cover a window and the next one's arrivals, or it, not the join, sets the rate.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "topologies"))
from pinned import run_pinned  # noqa: E402

WORDS = 8  # per sentence


def split_pairs() -> Any:
    from squall import Bolt

    class SplitPairs(Bolt):
        """Split, sending what the Streams rows' first bolt sends at parallelism 2."""

        outputs = ["word", "one"]

        def process(self, tup: Any) -> None:
            for word in tup.values[0].split():
                self.emit([word, 1])

    return SplitPairs


def wordcount_topology(kind: str, acking: bool, par: int) -> tuple[Any, str, int]:
    """(a Topology class, the component whose executed tuples measure the rate, how
    many of them make a sentence)."""
    from bench_wordcount import Count, Split, pooled_sentences

    from squall import Grouping, Topology
    from squall.streams import StreamBuilder, ValueMapper

    Sentences = pooled_sentences(acking=acking)  # noqa: N806 - a class
    SplitPairs = split_pairs()  # noqa: N806 - a class
    if kind in ("hand", "hand_pair"):
        splitter = Split if kind == "hand" else SplitPairs

        class WordCount(Topology):
            sentences = Sentences.spec(par=par)
            split = splitter.spec(inputs=[sentences], par=par)
            count = Count.spec(inputs={split: Grouping.fields("word")}, par=par)

        return WordCount, "count", WORDS
    builder = StreamBuilder()
    (builder.new_stream(Sentences, ValueMapper(0), parallelism=par)
        .flat_map(str.split).map_to_pair(lambda w: (w, 1)).count_by_key()
        .for_each(len))
    topology = builder.build(name="bench")
    last = max(c for c in topology.definition().components if c.startswith("bolt"))
    return topology, last, 1 if last == "bolt1" else WORDS


JOIN_KEYS = {"count": 1000, "duration": 10_000}


def join_topology(window: str, acking: bool) -> tuple[Any, str]:
    from bench_streams import pooled_pairs, tally

    from squall.streams import Count, Duration, PairValueMapper, StreamBuilder, TumblingWindows

    length = Count(1000) if window == "count" else Duration.milliseconds(500)
    keys = JOIN_KEYS[window]
    builder = StreamBuilder()
    a = builder.new_stream(pooled_pairs(1, keys, acking=acking), PairValueMapper(0, 1))
    b = builder.new_stream(pooled_pairs(2, keys, acking=acking), PairValueMapper(0, 1))
    a.window(TumblingWindows.of(length)).join(b).for_each(tally)
    topology = builder.build(name="bench")
    return topology, max(c for c in topology.definition().components if c.startswith("bolt"))


def cpu_secs() -> float:
    t = os.times()
    return t.user + t.system


def run(spec: dict[str, Any], duration: float, warmup: float) -> dict[str, Any]:
    from squall import LocalCluster
    from squall.runtime.logging import configure_logging

    configure_logging("error")
    acking = spec["acking"]
    if spec["bench"] == "wordcount":
        topology, measured, per_sentence = wordcount_topology(spec["kind"], acking, spec["par"])
    else:
        (topology, measured), per_sentence = join_topology(spec["window"], acking), 1
    conf: dict[str, Any] = {"topology.acker.executors": 1 if acking else 0}
    if spec.get("max_pending"):
        conf["topology.max.spout.pending"] = spec["max_pending"]
    import bench_streams

    with LocalCluster() as cluster:
        runner = cluster.submit("bench", topology, conf)
        time.sleep(warmup)
        spouts = [e for w in runner.workers if w for e in w.executors
                  if e.component in ("sentences", "spout1", "spout2")]
        before, joined, cpu = runner.stats(), bench_streams.JOINED[0], cpu_secs()
        for s in spouts:
            s.latencies.clear()
        start = time.perf_counter()
        time.sleep(duration)
        after, joined, cpu = runner.stats(), bench_streams.JOINED[0] - joined, cpu_secs() - cpu
        elapsed = time.perf_counter() - start
        samples = sorted(x for s in spouts for x in s.latencies.copy())
        spout_names = {s.component for s in spouts}
        bolts = [c for c in after if not c.startswith(("$", "__")) and c not in spout_names]
    units = (after[measured]["executed"] - before[measured]["executed"]) / per_sentence
    out: dict[str, Any] = {"rate": units / elapsed, "cpu_us": cpu / units * 1e6 if units else None,
                           "bolts": len(bolts)}
    if spec["bench"] == "join":
        out["joined_per_s"] = joined / elapsed
    if samples:
        out["p50_ms"] = samples[len(samples) // 2] * 1000
        out["p99_ms"] = samples[int(len(samples) * 0.99)] * 1000
    return out


def wc(kind: str, acking: bool, par: int) -> dict[str, Any]:
    return {"bench": "wordcount", "kind": kind, "acking": acking, "par": par,
            "max_pending": 1000 if acking else None}


def join(window: str, acking: bool, max_pending: int | None) -> dict[str, Any]:
    return {"bench": "join", "window": window, "acking": acking, "max_pending": max_pending}


# Each Streams row right under the hand-written row it is compared with.
WORDCOUNT: list[tuple[str, dict[str, Any]]] = [
    ("hand-written, par 1, acking off", wc("hand", False, 1)),
    ("streams,      par 1, acking off", wc("streams", False, 1)),
    ("hand-written, par 1, acking on", wc("hand", True, 1)),
    ("streams,      par 1, acking on", wc("streams", True, 1)),
    ("hand-written, par 2, acking off", wc("hand", False, 2)),
    ("streams,      par 2, acking off", wc("streams", False, 2)),
    ("hand-written, par 2, acking on", wc("hand", True, 2)),
    ("  its split emitting [word, 1]", wc("hand_pair", True, 2)),
    ("streams,      par 2, acking on", wc("streams", True, 2)),
]
# The pending caps: see the module's docstring.
JOIN: list[tuple[str, dict[str, Any]]] = [
    ("join, Count(1000), acking off", join("count", False, None)),
    ("join, Count(1000), acking on", join("count", True, 2000)),
    ("join, 500 ms, acking off", join("duration", False, None)),
    ("join, 500 ms, acking on", join("duration", True, 100_000)),
]


def child(spec: dict[str, Any], duration: float, warmup: float) -> None:
    result = run(spec, duration, warmup)
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


def median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def fmt(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def table(configs: list[tuple[str, dict[str, Any]]], runs: dict[str, list[dict[str, Any]]],
          unit: str, extra: str | None = None) -> None:
    header = (f"{'configuration':<34}{'bolts':>6}{unit:>12}{'  min-max':<20}{'CPU us':>8}"
              f"{'p50 ms':>9}{'p99 ms':>9}")
    if extra:
        header += f"{extra:>12}"
    print(header)
    print("-" * len(header))
    for label, _spec in configs:
        rs = runs[label]
        if not rs:
            print(f"{label:<34} failed")
            continue
        rates = [r["rate"] for r in rs]
        p50 = [r["p50_ms"] for r in rs if "p50_ms" in r]
        p99 = [r["p99_ms"] for r in rs if "p99_ms" in r]
        cpu = [r["cpu_us"] for r in rs if r.get("cpu_us")]
        line = (f"{label:<34}{rs[0]['bolts']:>6}{median(rates):>12,.0f}"
                f"  {min(rates):>7,.0f} - {max(rates):<8,.0f}{fmt(median(cpu) if cpu else None, '.1f'):>8}"
                f"{fmt(median(p50) if p50 else None, '.2f'):>9}{fmt(median(p99) if p99 else None, '.2f'):>9}")
        if extra:
            line += f"{median([r['joined_per_s'] for r in rs]):>12,.0f}"
        print(line)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--cores", type=int, default=1, help="CPUs each run is pinned to")
    parser.add_argument("--repeat", type=int, default=3, help="rounds of every configuration")
    parser.add_argument("--only", choices=["wordcount", "join"])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(json.loads(args.child), args.duration, args.warmup)
        return 0
    configs = [*([] if args.only == "join" else WORDCOUNT), *([] if args.only == "wordcount" else JOIN)]
    print(f"Streams API benchmark, local mode, {args.cores} core(s), {args.duration:.0f} s per run "
          f"after {args.warmup:.0f} s, {args.repeat} round(s); medians, CPU us per sentence (join: "
          f"per input pair), 'bolts' excludes Squall's own (acker)\n")
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label, _spec in configs}
    env = {**os.environ, "SQUALL_PURE_PYTHON": "0"}
    for i in range(args.repeat):
        k = i % len(configs)  # each round starts one configuration later
        for label, spec in configs[k:] + configs[:k]:
            result, errors = run_pinned(__file__, ["--child", json.dumps(spec), "--duration",
                                                   str(args.duration), "--warmup", str(args.warmup)],
                                        args.cores, env)
            if result is None:
                print(f"{label}: failed\n{errors}", file=sys.stderr)
            else:
                runs[label].append(result)
    if args.only != "join":
        print("word count: 8-word sentences, 1,000-word vocabulary (benchmarks/wordcount.py's)")
        table(WORDCOUNT, runs, "sentences/s")
        print()
    if args.only != "wordcount":
        print("windowed join: two spouts of (key, value), tumbling windows (keys from 1,000 for the count "
              "window, 10,000 for the 500 ms one)")
        table(JOIN, runs, "pairs/s", "joined/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
