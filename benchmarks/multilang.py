"""Multilang bolt throughput: the same bolt in-process and as a child process.

    python benchmarks/multilang.py [--duration 5] [--repeat 3] [--max-pending 5000] [--no-acking]
                                    [--rate 5000]

A spout emits words with message ids (unless --no-acking); the bolt
under test re-emits each word anchored to it and acks it; a sink takes the
words.  The bolt is an in-process Squall bolt, or a ShellBolt child: pystorm
(what streamparse runs) and Squall's own adapter, in JSON and in msgpack
mode, and a Node.js bolt.  Then the spout is the child (pystorm and
Squall's adapter, one emit per ``next_tuple``) and the bolt in-process:
Storm's protocol has one spout command in flight at a time, so each tuple
costs two round trips (``next`` and ``ack``, each up to its ``sync``) and
the pipes' latency, not CPU, sets the rate.  Each configuration runs in a
fresh process.

tuples/s is what the bolt processed per second after a warm-up.  p50 and
p99 are the spout's complete latency (emit to the last ack); they mean most
at a moderate ``--rate``, since flat out tuples queue up to max spout
pending.  Each configuration runs ``--repeat`` times, in rounds over all of
them, and the table shows the medians and the throughput's range: on a
shared machine one run can be 20% off.  Nothing here asserts a number.
Storm's multilang users report about 1,000 tuples/s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import psutil

PYSTORM_BOLT = '''
import sys
from pystorm import Bolt

class Echo(Bolt):
    def process(self, tup):
        self.emit([tup.values[0]])

Echo(serializer=sys.argv[1]).run()
'''

SQUALL_BOLT = '''
from squall.multilang.child import Bolt

class Echo(Bolt):
    def process(self, tup):
        self.emit([tup.values[0]])

Echo().run()
'''

# The same spout for both adapters: only the import and the start differ.
_SPOUT_CLASS = '''
class Words(Spout):
    def initialize(self, conf, context):
        self.i = 0

    def next_tuple(self):
        self.i += 1
        self.emit(["word%d" % (self.i % 1000)], tup_id=self.i)
'''
PYSTORM_SPOUT = (f"import sys\nfrom pystorm import Spout\n{_SPOUT_CLASS}\n"
                 "Words(serializer=sys.argv[1]).run()\n")
SQUALL_SPOUT = f"from squall.multilang.child import Spout\n{_SPOUT_CLASS}\nWords().run()\n"

NODE_BOLT = '''
const {BasicBolt} = require(process.argv[2]);
class Echo extends BasicBolt {
  process(tup, done) { this.emit([tup.values[0]], {needTaskIds: false}); done(); }
}
new Echo().run();
'''

NODE_ADAPTER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "multilang",
                            "resources", "multilang.js")

CONFIGS: list[tuple[str, dict[str, Any]]] = [
    ("in-process Python bolt", {"kind": "inproc"}),
    ("pystorm child, JSON", {"kind": "pystorm", "serializer": "json"}),
    ("pystorm child, msgpack", {"kind": "pystorm", "serializer": "msgpack"}),
    ("squall.multilang.child, JSON", {"kind": "squall", "serializer": "json"}),
    ("squall.multilang.child, msgpack", {"kind": "squall", "serializer": "msgpack"}),
    ("Node.js child (multilang.js), JSON", {"kind": "node", "serializer": "json"}),
    # The spout as the child (one emit per next_tuple; the bolt in-process).  Storm's
    # protocol allows one command in flight: each tuple costs a next and an ack round trip.
    ("spout: pystorm child, JSON", {"kind": "pystorm", "serializer": "json", "spout": True}),
    ("spout: pystorm child, msgpack", {"kind": "pystorm", "serializer": "msgpack", "spout": True}),
    ("spout: squall.multilang.child, msgpack", {"kind": "squall", "serializer": "msgpack", "spout": True}),
]


def run(spec: dict[str, Any], duration: float, warmup: float, max_pending: int, acking: bool,
        rate: float | None = None) -> dict[str, Any]:
    from squall import Bolt, LocalCluster, Spout, Topology
    from squall.multilang import MSGPACK_SERIALIZER, ShellBolt, ShellSpout
    from squall.runtime.logging import configure_logging

    configure_logging("error")
    words = [f"word{i}" for i in range(1000)]

    class Words(Spout):
        outputs = ("word",)

        def initialize(self, conf: dict[str, Any], context: Any) -> None:
            self.i = 0
            self.start = time.monotonic()

        def next_tuple(self) -> None:
            i = self.i
            if rate is not None and time.monotonic() < self.start + i / rate:
                return
            self.i = i + 1
            self.emit([words[i % 1000]], tup_id=i)

    class Echo(Bolt):
        outputs = ("word",)

        def process(self, tup: Any) -> None:
            self.emit([tup.values[0]])

    class Sink(Bolt):
        def process(self, tup: Any) -> None:
            pass

    workdir = tempfile.mkdtemp(prefix="squall-bench-")
    kind = spec["kind"]
    words_spec = Words.spec()
    if spec.get("spout"):
        script = {"pystorm": PYSTORM_SPOUT, "squall": SQUALL_SPOUT}[kind]
        with open(os.path.join(workdir, "words.py"), "w") as f:
            f.write(script)
        words_spec = ShellSpout.spec(command=sys.executable, script="words.py",
                                     args=[spec["serializer"]] if kind == "pystorm" else [], cwd=workdir,
                                     outputs=["word"])
        bolt = Echo.spec(inputs=[words_spec])
    elif kind == "inproc":
        bolt = Echo.spec(inputs=[words_spec])
    else:
        script = {"pystorm": ("echo.py", PYSTORM_BOLT), "squall": ("echo.py", SQUALL_BOLT),
                  "node": ("echo.js", NODE_BOLT)}[kind]
        with open(os.path.join(workdir, script[0]), "w") as f:
            f.write(script[1])
        if kind == "node":
            command, args = shutil.which("node") or "node", [os.path.abspath(NODE_ADAPTER)]
        else:
            command, args = sys.executable, [spec["serializer"]] if kind == "pystorm" else []
        bolt = ShellBolt.spec(command=command, script=script[0], args=args, cwd=workdir, outputs=["word"],
                              inputs=[words_spec])
    conf: dict[str, Any] = {"topology.max.spout.pending": max_pending}
    if not acking:
        conf["topology.acker.executors"] = 0
    if spec.get("serializer") == "msgpack":
        conf["topology.multilang.serializer"] = MSGPACK_SERIALIZER

    topology = Topology.from_specs("Bench", {"words": words_spec, "echo": bolt,
                                            "sink": Sink.spec(inputs=[bolt])}, conf)
    me = psutil.Process()
    with LocalCluster() as cluster:
        runner = cluster.submit("bench", topology)
        time.sleep(warmup)
        kids = me.children()
        spout = next(e for w in runner.workers if w for e in w.executors if e.component == "words")
        before = runner.stats()
        spout.latencies.clear()
        cpu0 = _cpu([me]), _cpu(kids)
        start = time.perf_counter()
        time.sleep(duration)
        after = runner.stats()
        elapsed = time.perf_counter() - start
        cpu1 = _cpu([me]), _cpu(kids)
        errors = len(runner.errors)
        latencies = sorted(spout.latencies)
    shutil.rmtree(workdir, ignore_errors=True)
    executed = after["echo"]["executed"] - before["echo"]["executed"]
    acked = after["words"]["acked"] - before["words"]["acked"]
    return {"tuples_per_s": executed / elapsed, "acked_per_s": acked / elapsed,
            "failed": after["words"]["failed"], "errors": errors,
            "parent_us": (cpu1[0] - cpu0[0]) / max(executed, 1) * 1e6,
            "child_us": (cpu1[1] - cpu0[1]) / max(executed, 1) * 1e6,
            "p50_ms": latencies[len(latencies) // 2] * 1000 if latencies else None,
            "p99_ms": latencies[int(len(latencies) * 0.99)] * 1000 if latencies else None}


def _cpu(processes: list[Any]) -> float:
    """User + system CPU seconds of these processes (all their threads)."""
    total = 0.0
    for p in processes:
        t = p.cpu_times()
        total += t.user + t.system
    return total


def _median_ms(runs: list[dict[str, Any]], key: str) -> str:
    values = [r[key] for r in runs if r.get(key) is not None]
    return f"{statistics.median(values):.2f}" if values else "-"


def _run_child(spec: dict[str, Any], args: argparse.Namespace) -> dict[str, Any] | str:
    """One configuration in a fresh process: its result, or the error text."""
    cmd = [sys.executable, __file__, "--child", json.dumps(spec), "--duration", str(args.duration),
           "--warmup", str(args.warmup), "--max-pending", str(args.max_pending)]
    if args.no_acking:
        cmd.append("--no-acking")
    if args.rate:
        cmd += ["--rate", str(args.rate)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=1.5)
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs per configuration, interleaved; the table shows the median")
    parser.add_argument("--max-pending", type=int, default=5000, help="topology.max.spout.pending")
    parser.add_argument("--no-acking", action="store_true", help="topology.acker.executors: 0")
    parser.add_argument("--rate", type=float, help="emit this many tuples/s (a latency run) instead of "
                                                    "as many as the bolt takes")
    parser.add_argument("--only", help="run only configurations whose label contains this")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run(json.loads(args.child), args.duration, args.warmup, args.max_pending,
                             not args.no_acking, args.rate)))
        return 0
    acking = "acking off" if args.no_acking else f"acking on, max spout pending {args.max_pending}"
    offered = f"{args.rate:,.0f} tuples/s offered" if args.rate else "as fast as it goes"
    print(f"one bolt re-emitting each word (anchored) and acking it; {acking}; {offered}; "
          f"{os.cpu_count()} CPUs; "
          f"median of {args.repeat} runs of {args.duration:.0f} s each\n")
    configs = [(label, spec) for label, spec in CONFIGS if not args.only or args.only in label]
    results: dict[str, list[dict[str, Any]]] = {label: [] for label, _ in configs}
    errors: dict[str, str] = {}
    for _ in range(args.repeat):  # rounds over every configuration: a noisy minute hits them all
        for label, spec in configs:
            if label in errors or (spec["kind"] == "node" and shutil.which("node") is None):
                continue
            r = _run_child(spec, args)
            if isinstance(r, str):
                errors[label] = r
            else:
                results[label].append(r)
    header = (f"{'child':<40}{'tuples/s':>10}{'range':>17}{'vs in-process':>15}{'parent CPU us/tuple':>21}"
              f"{'child CPU us/tuple':>20}{'p50 ms':>8}{'p99 ms':>8}{'failed':>8}")
    print(header)
    print("-" * len(header))
    baseline = None
    for label, spec in configs:
        if label in errors:
            print(f"{label:<40} failed:\n{errors[label]}")
            continue
        runs = results[label]
        if not runs:
            print(f"{label:<40}{'(no node)':>10}")
            continue
        rate = statistics.median(r["tuples_per_s"] for r in runs)
        low = min(r["tuples_per_s"] for r in runs) / 1000
        high = max(r["tuples_per_s"] for r in runs) / 1000
        if spec["kind"] == "inproc":
            baseline = rate
        ratio = f"{rate / baseline:.2f}x" if baseline else "-"
        parent_us = statistics.median(r["parent_us"] for r in runs)
        child_us = (f"{statistics.median(r['child_us'] for r in runs):.1f}" if spec["kind"] != "inproc"
                    else "-")
        failed = sum(r["failed"] for r in runs)
        p50, p99 = (_median_ms(runs, key) for key in ("p50_ms", "p99_ms"))
        print(f"{label:<40}{rate:>10,.0f}{f'{low:.0f}K-{high:.0f}K':>17}{ratio:>15}{parent_us:>21.1f}"
              f"{child_us:>20}{p50:>8}{p99:>8}{failed:>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
