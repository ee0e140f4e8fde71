"""Multilang bolt throughput: the same bolt in-process and as a child process.

    python benchmarks/multilang.py [--duration 5] [--max-pending 5000]

A spout emits words with message ids (acking on); the bolt under test
re-emits each word anchored to it and acks it; a sink takes the words.
The bolt is an in-process Squall bolt, or a ShellBolt child: pystorm
(what streamparse runs) and Squall's own adapter, in JSON and in msgpack
mode, and a Node.js bolt.  Each configuration runs in a fresh process;
tuples/s is what the bolt processed per second after a warm-up.  Nothing
here asserts a number.  Storm's multilang users report about 1,000 tuples/s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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
]


def run(spec: dict[str, Any], duration: float, warmup: float, max_pending: int, acking: bool) -> dict[str, Any]:
    from squall import Bolt, LocalCluster, Spout, Topology
    from squall.multilang import MSGPACK_SERIALIZER, ShellBolt
    from squall.ops.logging import configure_logging

    configure_logging("error")
    words = [f"word{i}" for i in range(1000)]

    class Words(Spout):
        outputs = ("word",)

        def initialize(self, conf: dict[str, Any], context: Any) -> None:
            self.i = 0

        def next_tuple(self) -> None:
            i = self.i
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
    if kind == "inproc":
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
        before = runner.stats()
        cpu0 = _cpu([me]), _cpu(kids)
        start = time.perf_counter()
        time.sleep(duration)
        after = runner.stats()
        elapsed = time.perf_counter() - start
        cpu1 = _cpu([me]), _cpu(kids)
        errors = len(runner.errors)
    shutil.rmtree(workdir, ignore_errors=True)
    executed = after["echo"]["executed"] - before["echo"]["executed"]
    acked = after["words"]["acked"] - before["words"]["acked"]
    return {"tuples_per_s": executed / elapsed, "acked_per_s": acked / elapsed,
            "failed": after["words"]["failed"], "errors": errors,
            "parent_us": (cpu1[0] - cpu0[0]) / max(executed, 1) * 1e6,
            "child_us": (cpu1[1] - cpu0[1]) / max(executed, 1) * 1e6}


def _cpu(processes: list[Any]) -> float:
    """User + system CPU seconds of these processes (all their threads)."""
    total = 0.0
    for p in processes:
        t = p.cpu_times()
        total += t.user + t.system
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=1.5)
    parser.add_argument("--max-pending", type=int, default=5000, help="topology.max.spout.pending")
    parser.add_argument("--no-acking", action="store_true", help="topology.acker.executors: 0")
    parser.add_argument("--only", help="run only configurations whose label contains this")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run(json.loads(args.child), args.duration, args.warmup, args.max_pending,
                             not args.no_acking)))
        return 0
    acking = "acking off" if args.no_acking else f"acking on, max spout pending {args.max_pending}"
    print(f"one bolt re-emitting each word (anchored) and acking it; {acking}; "
          f"{os.cpu_count()} CPUs; {args.duration:.0f} s per run\n")
    header = (f"{'bolt':<38}{'tuples/s':>11}{'vs in-process':>15}{'parent CPU us/tuple':>21}"
              f"{'child CPU us/tuple':>20}{'failed':>8}")
    print(header)
    print("-" * len(header))
    baseline = None
    for label, spec in CONFIGS:
        if args.only and args.only not in label:
            continue
        if spec["kind"] == "node" and shutil.which("node") is None:
            print(f"{label:<38}{'(no node)':>11}")
            continue
        cmd = [sys.executable, __file__, "--child", json.dumps(spec), "--duration", str(args.duration),
               "--warmup", str(args.warmup), "--max-pending", str(args.max_pending)]
        if args.no_acking:
            cmd.append("--no-acking")
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            print(f"{label:<38} failed:\n{proc.stderr[-2000:]}")
            continue
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        rate = r["tuples_per_s"]
        if spec["kind"] == "inproc":
            baseline = rate
        ratio = f"{rate / baseline:.2f}x" if baseline else "-"
        child_us = f"{r['child_us']:.1f}" if spec["kind"] != "inproc" else "-"
        print(f"{label:<38}{rate:>11,.0f}{ratio:>15}{r['parent_us']:>21.1f}{child_us:>20}{r['failed']:>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
