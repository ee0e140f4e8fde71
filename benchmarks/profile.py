"""Where a tuple's time goes: the word count (benchmarks/wordcount.py's, acking on) sampled
by py-spy, each CPU sample put to the stage of the hot path it was in, and the stages in
microseconds per sentence.

    python benchmarks/profile.py [--duration 8] [--rate 100] [--pure] [--stacks FILE]

(as root, or wherever ptrace of one's own children is allowed)

The word count runs in a child pinned to one core (one spout, split and count, one acker).
py-spy (a dependency of squall) samples its threads ``--rate`` times a second with native
frames, so the Cython builds of the hot path show (as their generated C files' functions).
It stops the process for each sample, which slows it (to about two thirds of its
throughput at 100 Hz, a half at 500) and adds to the CPU a sentence takes (12 us
against 10.7 unsampled); the shares, not the totals, are the point.  Cython inlines
what a compiled module calls of its own, so a stage is as fine as the compiled
functions are: most of the bolt's acking shows as its executor's.  A sample goes to
the first stage that claims a frame, from the leaf up:

=========  ==================================================================
user       the topology's own code (spout next_tuple, split, count)
emit       the collector: emit, anchoring, edge ids (executors/emit.py, acks.py)
route      choosing the target tasks: groupings (routing.py)
queue      the executors' queues and batches (queues.py)
ack        acking, XOR bookkeeping in the executors (the collector's ack, executors)
acker      the acker task and its ledger (acker/, executors/acker.py)
crossing   leaving or entering the worker (worker/wire/: transfer, transport, frames,
           codec, reader, zmq); none in one worker
tuple      making tuples (topology/tuple.py, typed by tuple.pxd)
executor   the executors' loops (executors/: executor.py, spout.py, bolt.py, component.py)
other      the rest (interpreter, threads, metrics...)
=========  ==================================================================

Samples of a blocked thread (a lock, a condition, a sleep) are idle and left out.
Microseconds per sentence = the stage's share of the other samples x the child's CPU
seconds / sentences acked, over the sampled window.  ``--pure`` profiles the same with
``SQUALL_PURE_PYTHON=1``, where every stage is plain Python.  Nothing here asserts a number.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "topologies"))

# (stage, what a frame names: a Python file path or a Cython C name's module part)
STAGES = [
    ("user", ("bench_wordcount", "sentences.py")),
    ("acker", ("squall/acker/", "ledger.c", "rotating_map.c", "executors/acker", "executors_5acker")),
    ("crossing", ("squall/worker/wire/", "_6worker_4wire_", "transfer", "transport", "zmq")),
    ("route", ("routing",)),
    ("queue", ("queues",)),
    ("tuple", ("topology/tuple", "(tuple.c:", "_8topology_5tuple_")),
    ("executor", ("run_batch",)),  # the bolt's loop (executors/acks.py)
    ("emit", ("executors/emit", "executors_4emit", "executors/acks", "executors_4acks")),
    ("executor", ("executor",)),
]
# A function of the collector or an executor that acks: its name (Python's, or the end of a
# Cython C name such as ``..._13BoltCollector_5ack``) has one of these as a word.
ACK_NAMES = re.compile(r"(?:^|[^a-z])(ack|acks|acked|acktable|fail|anchor|anchors|xor)(?:$|[^a-z])")


# A thread blocked (on a lock, a condition, a sleep, a socket) is idle, not a stage's cost:
# py-spy's own idle detection does not hold with native frames.
WAITS = {"PyThread_acquire_lock_timed", "pthread_cond_timedwait", "pthread_cond_wait", "sem_timedwait",
         "sem_clockwait", "sem_wait", "do_futex_wait", "epoll_wait", "poll", "select", "clock_nanosleep",
         "nanosleep", "pysleep", "zmq_poll"}


def stage_of(stack: list[str]) -> str:
    """The stage a sample's stack (root first) was in: the leaf-most frame a stage claims
    ("idle" for a blocked thread)."""
    if any(frame.split(" (", 1)[0] in WAITS for frame in stack[-6:]):
        return "idle"
    for frame in reversed(stack):
        for stage, marks in STAGES:
            if any(m in frame for m in marks):
                function = frame.split(" (", 1)[0].lower()
                if stage in ("emit", "executor") and ACK_NAMES.search(function):
                    return "ack"
                return stage
    return "other"


def child(duration: float, warmup: float, ready: str) -> None:
    from bench_wordcount import Count, Split, pooled_sentences

    from squall import Grouping, LocalCluster, Topology
    from squall.runtime.logging import configure_logging

    configure_logging("error")
    Sentences = pooled_sentences(acking=True, rate=None)  # noqa: N806 - a class

    class WordCount(Topology):
        sentences = Sentences.spec()
        split = Split.spec(inputs=[sentences])
        count = Count.spec(inputs={split: Grouping.fields("word")})

    with LocalCluster() as cluster:
        runner = cluster.submit("profile", WordCount, {"topology.acker.executors": 1,
                                                       "topology.max.spout.pending": 1000})
        time.sleep(warmup)
        before, cpu0 = runner.stats(), time.process_time()
        Path(ready).write_text("go")
        time.sleep(duration)
        after, cpu1 = runner.stats(), time.process_time()
    acked = (after["count"]["executed"] - before["count"]["executed"]) / 8
    print(json.dumps({"sentences": acked, "cpu_secs": cpu1 - cpu0}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=8.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--rate", type=int, default=100, help="samples a second")
    parser.add_argument("--pure", action="store_true", help="the hot path as plain Python")
    parser.add_argument("--stacks", type=Path, help="keep py-spy's raw stacks here")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--ready", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.duration, args.warmup, args.ready)
        return 0
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        print("py-spy is missing: pip install py-spy (a dependency of squall)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        ready, raw = Path(tmp) / "ready", args.stacks or Path(tmp) / "stacks.txt"
        env = {**os.environ, "SQUALL_PURE_PYTHON": "1" if args.pure else "0"}
        proc = subprocess.Popen([sys.executable, __file__, "--child", "--duration", str(args.duration),
                                 "--warmup", str(args.warmup), "--ready", str(ready)],
                                stdout=subprocess.PIPE, text=True, env=env,
                                preexec_fn=lambda: os.sched_setaffinity(0, {0}))
        while not ready.exists():
            if proc.poll() is not None:
                print("the word count ended before it was ready", file=sys.stderr)
                return 1
            time.sleep(0.05)
        subprocess.run([spy, "record", "--pid", str(proc.pid), "--native", "--format", "raw",
                        "--rate", str(args.rate), "--duration", str(int(args.duration) - 1),
                        "--output", str(raw)],  # (native frames need the process stopped per sample)
                       check=True, capture_output=True, timeout=args.duration + 60)
        out, _ = proc.communicate(timeout=60)
        totals = json.loads(out.strip().splitlines()[-1])
        samples: Counter[str] = Counter()
        for line in raw.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            samples[stage_of(stack.split(";"))] += int(count)
    samples.pop("idle", None)
    total = sum(samples.values())
    per_sentence_us = totals["cpu_secs"] / totals["sentences"] * 1e6
    mode = "pure Python" if args.pure else "compiled (Cython builds)"
    print(f"word count, acking on, one core, {mode}: {totals['sentences'] / args.duration:,.0f} "
          f"sentences/s, {per_sentence_us:.2f} us of CPU a sentence ({total} samples)\n")
    print("| stage | share | us / sentence |")
    print("|---|---:|---:|")
    for stage in dict.fromkeys([s for s, _ in STAGES] + ["ack", "other"]):
        if stage in samples:
            share = samples[stage] / total
            print(f"| {stage} | {share:.1%} | {share * per_sentence_us:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
