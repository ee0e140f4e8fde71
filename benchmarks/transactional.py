"""Transactional word count beside the at-least-once word count, on the same data.

    python benchmarks/transactional.py [--repeat 1] [--workers 1] [--sentences N] [--quick]
                                       [--timeout 120] [--only LABEL]

Both count the words of the same N sentences (8 words each from a 1,000-word
vocabulary, fixed seed) through the same shape: a source, a split bolt
(par 2) and a count bolt (par 2, fields grouping on the word), in local mode.

- at-least-once: a reliable spout emits each sentence once with a message id
  (replayed on fail), the split bolt is auto-anchored, max spout pending 5000
  (as examples/wordcount.py).  sentences/s is N over the time from the first
  emit to the last of the N acks; p50/p99 there are the spout's complete
  latency (emit to ack).
- transactional: a MemoryTransactionalSpout over 4 partitions (emitter par 2),
  a plain split bolt and a committer count bolt that adds each batch's counts
  to a TransactionalMap (in a MemoryStore, or a SQLiteStore in a tmp dir).
  sentences/s is N over the time from the first batch emitted to the last
  commit (the end is when the committed word total in the store is 8 N);
  p50/p99 are commit latency per txid, from the emitter's first
  ``emit_new_batch`` of that txid to the return of the last committer task's
  ``finish_batch`` for it.

Every run checks its final counts against the expected ones: "EXACT" when
they match.  The at-least-once count may legitimately exceed them after
a replay ("+k dup"); a transactional row that does not match, times out
(``--timeout``) or errors is a failure and is printed as such.  Each run is a
fresh process; with ``--repeat`` > 1, runs go in rounds over all
configurations and the table shows medians.  Nothing here asserts a number.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from typing import Any

VOCAB = [f"word{i}" for i in range(1000)]
WORDS_PER_SENTENCE = 8
PARTITIONS = 4
SEED = 42


def sentences(n: int) -> list[str]:
    """The first ``n`` sentences of one fixed stream: any two runs share a prefix."""
    rng = random.Random(SEED)
    return [" ".join(rng.choices(VOCAB, k=WORDS_PER_SENTENCE)) for _ in range(n)]


def expected_counts(data: list[str]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for s in data:
        counts.update(s.split())
    return counts


def _pct(samples: list[float], q: float) -> float | None:
    if not samples:
        return None
    samples = sorted(samples)
    return samples[min(len(samples) - 1, int(len(samples) * q))]


# -- shared state of one run (each run is its own process) -----------------------------

class Run:
    lock = threading.Lock()
    data: list[str] = []
    # at-least-once
    first_emit: float | None = None
    acked = 0
    failed = 0
    last_ack: float | None = None
    task_counts: list[Counter[str]] = []
    # transactional
    store: Any = None
    batch_start: dict[int, float] = {}   # txid -> first emit_new_batch
    commit_end: dict[int, float] = {}    # txid -> last committer finish_batch return
    last_commit: float | None = None


# -- at-least-once ---------------------------------------------------------------------

def run_at_least_once(n: int, workers: int, timeout: float) -> dict[str, Any]:
    from squall import Grouping, LocalCluster, Spout, Topology
    from squall.runtime.logging import configure_logging

    configure_logging("error")
    Run.data = data = sentences(n)

    class Sentences(Spout):
        outputs = ["sentence"]

        def initialize(self, conf: dict[str, Any], context: Any) -> None:
            self.i = 0
            self.replay: list[int] = []

        def next_tuple(self) -> None:
            if self.replay:
                i = self.replay.pop()
            elif self.i < n:
                i = self.i
                self.i += 1
                if i == 0:
                    Run.first_emit = time.monotonic()
            else:
                return
            self.emit([data[i]], tup_id=i)

        def ack(self, tup_id: Any) -> None:
            Run.acked += 1
            if Run.acked == n:
                Run.last_ack = time.monotonic()

        def fail(self, tup_id: Any) -> None:
            Run.failed += 1
            self.replay.append(tup_id)

    # The same split and count bolts as the other word count benchmarks.
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "topologies"))
    from bench_wordcount import Count as BenchCount
    from bench_wordcount import Split

    class Count(BenchCount):
        def initialize(self, conf: dict[str, Any], context: Any) -> None:
            super().initialize(conf, context)
            with Run.lock:
                Run.task_counts.append(self.counts)

    class WordCount(Topology):
        config = {"topology.max.spout.pending": 5000}
        sentences = Sentences.spec()
        split = Split.spec(inputs=[sentences], par=2)
        count = Count.spec(inputs={split: Grouping.fields("word")}, par=2)

    expected = expected_counts(data)
    out: dict[str, Any] = {}
    cluster = LocalCluster()
    runner = cluster.submit("alo", WordCount, {"topology.workers": workers})
    deadline = time.monotonic() + timeout
    while Run.last_ack is None and time.monotonic() < deadline:
        time.sleep(0.02)
    stats = runner.stats()
    errors = [str(e) for e in runner.errors]
    if Run.last_ack is None:
        out.update(status="TIMEOUT", detail=f"{Run.acked} of {n} sentences acked after {timeout:g} s, "
                   f"{Run.failed} failed; errors: {errors[:3]}")
    else:
        elapsed = Run.last_ack - (Run.first_emit or 0.0)
        time.sleep(0.3)  # let any straggling (replayed) tuples land before comparing
        got: Counter[str] = Counter()
        for c in list(Run.task_counts):
            got.update(c)
        extra = sum(got.values()) - n * WORDS_PER_SENTENCE
        if got == expected:
            exact = "EXACT"
        elif all(got[w] >= k for w, k in expected.items()):
            exact = f"+{extra} dup"
        else:
            missing = sum(max(0, k - got[w]) for w, k in expected.items())
            exact = f"LOST {missing}"
        lat = stats.get("sentences", {}).get("complete_latency_ms", {})
        out.update(status="ok", n=n, elapsed=elapsed, sentences_per_s=n / elapsed,
                   p50_ms=lat.get("p50"), p99_ms=lat.get("p99"), replays=Run.failed, exact=exact,
                   errors=errors[:3])
    _shutdown(cluster, out)
    return out


# -- transactional ---------------------------------------------------------------------

def _transactional_classes() -> dict[str, Any]:
    from squall import Bolt
    from squall.state import TransactionalMap
    from squall.transactional import BatchBolt, Committer, MemoryTransactionalSpout

    class TimedSpout(MemoryTransactionalSpout):
        def emit_new_batch(self, attempt: Any, emit: Any, partition: int, last_metadata: Any) -> Any:
            Run.batch_start.setdefault(attempt.txid, time.monotonic())
            return super().emit_new_batch(attempt, emit, partition, last_metadata)

    class Split(Bolt):
        outputs = ["tx", "word"]

        def process(self, tup: Any) -> None:
            tx = tup.values[0]
            for word in tup.values[1].split():
                self.emit([tx, word])

    class Count(Committer, BatchBolt):
        outputs: list[str] = []

        def initialize(self, conf: dict[str, Any], context: Any, attempt: Any) -> None:
            self.attempt = attempt
            self.counts: Counter[str] = Counter()

        def process(self, tup: Any) -> None:
            self.counts[tup.values[1]] += 1

        def finish_batch(self) -> None:
            if self.counts:
                TransactionalMap(Run.store).increment(self.attempt.txid, self.counts)
            now = time.monotonic()
            with Run.lock:
                txid = self.attempt.txid
                if now > Run.commit_end.get(txid, 0.0):
                    Run.commit_end[txid] = now
                if Run.last_commit is None or now > Run.last_commit:
                    Run.last_commit = now

    return {"spout": TimedSpout, "split": Split, "count": Count}


def run_transactional(n: int, batch: int, pending: int, store_kind: str, workers: int,
                      timeout: float) -> dict[str, Any]:
    from squall import Grouping, LocalCluster
    from squall.runtime.logging import configure_logging
    from squall.state import MemoryStore, SQLiteStore, TransactionalMap
    from squall.transactional import TransactionalTopology

    configure_logging("error")
    Run.data = data = sentences(n)
    take = max(1, batch // PARTITIONS)
    parts = [[[s] for s in data[p::PARTITIONS]] for p in range(PARTITIONS)]
    n_batches = max(math.ceil(len(p) / take) for p in parts)
    tmpdir = None
    if store_kind == "sqlite":
        tmpdir = tempfile.mkdtemp(prefix="squall-tx-bench-")
        Run.store = SQLiteStore(os.path.join(tmpdir, "state.db"), namespace="counts")
    else:
        Run.store = MemoryStore("counts")
    cls = _transactional_classes()

    class TxWordCount(TransactionalTopology):
        sentences = cls["spout"].spec(data=parts, fields=["sentence"], take_per_batch=take, par=2)
        split = cls["split"].spec(inputs=[sentences], par=2)
        count = cls["count"].spec(inputs={split: Grouping.fields("word")}, par=2)

    expected = expected_counts(data)
    target = n * WORDS_PER_SENTENCE
    state = TransactionalMap(Run.store)

    def committed_total() -> int:
        return sum(v or 0 for v in state.get_many(VOCAB))

    out: dict[str, Any] = {}
    cluster = LocalCluster()
    runner = cluster.submit("tx", TxWordCount, {"topology.max.spout.pending": pending,
                                                "topology.workers": workers})
    deadline = time.monotonic() + timeout
    total = 0
    while time.monotonic() < deadline:
        total = committed_total()
        if total >= target:
            break
        time.sleep(0.05)
    stats = runner.stats()
    errors = [str(e) for e in runner.errors]
    coord = stats.get("sentences/coordinator", {})
    if total < target:
        out.update(status="TIMEOUT",
                   detail=(f"{total} of {target} words committed after {timeout:g} s; "
                           f"{len(Run.commit_end)} of {n_batches} txids committed, "
                           f"{len(Run.batch_start)} started; coordinator acked {coord.get('acked')} "
                           f"failed {coord.get('failed')}; errors: {errors[:3]}"))
    else:
        end = Run.last_commit or time.monotonic()
        start = min(Run.batch_start.values())
        elapsed = end - start
        time.sleep(0.3)  # a late extra commit would show here
        final = dict(zip(VOCAB, state.get_many(VOCAB), strict=True))
        got = Counter({w: v for w, v in final.items() if v})
        if got == expected:
            exact = "EXACT"
        else:
            diff = sum(got.values()) - target
            wrong = sum(1 for w in set(got) | set(expected) if got[w] != expected[w])
            exact = f"INEXACT ({diff:+d} words, {wrong} keys wrong)"
        lat = [(end_t - Run.batch_start[t]) * 1000 for t, end_t in Run.commit_end.items()
               if t in Run.batch_start]
        out.update(status="ok", n=n, batches=n_batches, committed_txids=len(Run.commit_end),
                   elapsed=elapsed, sentences_per_s=n / elapsed, batches_per_s=n_batches / elapsed,
                   p50_ms=_pct(lat, 0.50), p99_ms=_pct(lat, 0.99), replays=coord.get("failed", 0),
                   exact=exact, errors=errors[:3])
    _shutdown(cluster, out)
    try:
        Run.store.close()
    finally:
        if tmpdir:
            shutil.rmtree(tmpdir, ignore_errors=True)
    return out


def _shutdown(cluster: Any, out: dict[str, Any]) -> None:
    """Print the result first (a hang in shutdown must not lose it), then stop the cluster."""
    print(json.dumps(out), flush=True)
    done = threading.Event()

    def watchdog() -> None:
        if not done.wait(30):
            print(json.dumps({"shutdown": "hung for 30 s"}), flush=True)
            os._exit(3)

    threading.Thread(target=watchdog, daemon=True).start()
    cluster.shutdown()
    done.set()


# -- the configurations and the parent -------------------------------------------------

def default_n(batch: int, pending: int) -> int:
    """At least 20 batches and 100K sentences: a few seconds a run on a 2-core machine."""
    return max(100_000, 20 * batch)


def configs(args: argparse.Namespace) -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    alo_n = args.sentences or (5_000 if args.quick else 100_000)
    out.append(("at-least-once, max pending 5000", {"kind": "alo", "n": alo_n}))
    batches = [100, 1000] if args.quick else [100, 1000, 10_000]
    for batch in batches:
        for pending in (1, 3, 10):
            n = args.sentences or (min(5_000, 10 * batch) if args.quick else default_n(batch, pending))
            out.append((f"tx batch {batch:,}, pending {pending}",
                        {"kind": "tx", "n": n, "batch": batch, "pending": pending, "store": "memory"}))
    n = args.sentences or (5_000 if args.quick else default_n(1000, 3))
    out.append(("tx batch 1,000, pending 3, SQLiteStore",
                {"kind": "tx", "n": n, "batch": 1000, "pending": 3, "store": "sqlite"}))
    if args.only:
        out = [(label, spec) for label, spec in out if args.only in label or spec["kind"] == "alo"]
    return out


def child(spec: dict[str, Any], workers: int, timeout: float) -> None:
    try:
        if spec["kind"] == "alo":
            run_at_least_once(spec["n"], workers, timeout)
        else:
            run_transactional(spec["n"], spec["batch"], spec["pending"], spec["store"], workers, timeout)
    except Exception:  # noqa: BLE001
        print(json.dumps({"status": "ERROR", "detail": traceback.format_exc()[-3000:]}), flush=True)


def run_child(spec: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", json.dumps(spec),
           "--workers", str(args.workers), "--timeout", str(args.timeout)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killed = False
    try:
        stdout, stderr = proc.communicate(timeout=args.timeout + 90)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
        killed = True
    result: dict[str, Any] | None = None
    notes = []
    for line in stdout.splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if "shutdown" in obj:
            notes.append(f"shutdown {obj['shutdown']}")
        elif "status" in obj:
            result = obj
    if result is None:
        why = "killed by the parent's timeout" if killed else f"exit code {proc.returncode}"
        result = {"status": "ERROR", "detail": f"no result ({why}); stderr: {stderr[-2000:]}"}
    if killed:
        notes.append("child killed by the parent's timeout")
    if notes:
        result["notes"] = notes
    return result


def _fmt(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, help="N for every configuration (default: per batch size)")
    parser.add_argument("--workers", type=int, default=1, help="topology.workers")
    parser.add_argument("--repeat", type=int, default=1,
                        help="runs per configuration, in rounds; the table shows the median")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds before a run is a TIMEOUT")
    parser.add_argument("--quick", action="store_true", help="a short smoke run with small N")
    parser.add_argument("--only", help="run only the transactional configurations whose label contains "
                                       "this (and the at-least-once baseline)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(json.loads(args.child), args.workers, args.timeout)
        return 0

    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    print(f"transactional vs at-least-once word count; {cores} CPUs (nproc), "
          f"Python {platform.python_version()} ({platform.python_implementation()}), {platform.machine()}; "
          f"local mode, {args.workers} worker(s); 8-word sentences, 1,000-word vocabulary, seed {SEED}; "
          f"{PARTITIONS} partitions, emitter/split/count par 2"
          + (f"; median of {args.repeat} runs" if args.repeat > 1 else "") + "\n", flush=True)

    cfgs = configs(args)
    results: dict[str, list[dict[str, Any]]] = {label: [] for label, _ in cfgs}
    t0 = time.monotonic()
    for r in range(args.repeat):
        for label, spec in cfgs:
            res = run_child(spec, args)
            results[label].append(res)
            status = res["status"] if res["status"] != "ok" else f"{res['sentences_per_s']:,.0f} sentences/s"
            print(f"  [{time.monotonic() - t0:6.1f} s] run {r + 1}: {label}: {status}"
                  + (f" {res.get('exact')}" if res["status"] == "ok" else ""), file=sys.stderr, flush=True)

    print("| configuration | N | batches | sentences/s | range | vs at-least-once | batches/s "
          "| p50 ms | p99 ms | replays | exact |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|")
    baseline = None
    failures: list[str] = []
    for label, spec in cfgs:
        runs = results[label]
        bad = [r for r in runs if r["status"] != "ok"]
        good = [r for r in runs if r["status"] == "ok"]
        for r in bad:
            failures.append(f"{label}: {r['status']}: {r.get('detail', '')}".rstrip())
        for r in good:
            if r.get("errors"):
                failures.append(f"{label}: reported errors: {r['errors']}")
            if spec["kind"] == "tx" and r["exact"] != "EXACT":
                failures.append(f"{label}: {r['exact']}")
        for r in runs:
            for note in r.get("notes", []):
                failures.append(f"{label}: {note}")
        if not good:
            status = bad[0]["status"] if bad else "-"
            print(f"| {label} | {spec['n']:,} | - | {status} | - | - | - | - | - | - | {status} |")
            continue
        rate = statistics.median(r["sentences_per_s"] for r in good)
        rng = (f"{min(r['sentences_per_s'] for r in good) / 1000:.1f}K-"
               f"{max(r['sentences_per_s'] for r in good) / 1000:.1f}K") if len(good) > 1 else "-"
        if spec["kind"] == "alo":
            baseline = rate
        ratio = f"{rate / baseline:.2f}x" if baseline else "-"
        bps = statistics.median(r["batches_per_s"] for r in good) if spec["kind"] == "tx" else None
        p50s = [r["p50_ms"] for r in good if r.get("p50_ms") is not None]
        p99s = [r["p99_ms"] for r in good if r.get("p99_ms") is not None]
        p50 = statistics.median(p50s) if p50s else None
        p99 = statistics.median(p99s) if p99s else None
        replays = sum(r["replays"] or 0 for r in good)
        exacts = {r["exact"] for r in good}
        exact = ", ".join(sorted(exacts))
        if bad:
            exact += f"; {len(bad)} run(s) {bad[0]['status']}"
        batches = f"{good[0]['batches']:,}" if spec["kind"] == "tx" else "-"
        print(f"| {label} | {spec['n']:,} | {batches} | {rate:,.0f} | {rng} | {ratio} | {_fmt(bps, ',.1f')} "
              f"| {_fmt(p50, '.1f')} | {_fmt(p99, '.1f')} | {replays} | {exact} |")
    print("\nsentences/s: N over first emit to last ack (at-least-once) or to last commit (transactional). "
          "p50/p99: at-least-once, the spout's complete latency per sentence; transactional, commit "
          "latency per txid (first emit of its batch to its last committer finish_batch). "
          "replays: failed tuple trees (at-least-once) or failed transaction attempts (coordinator).")
    if failures:
        print("\nFAILURES:")
        for f in failures:
            print(f"- {f}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
