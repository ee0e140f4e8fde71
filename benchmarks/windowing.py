"""Windowed bolts against the same sum done by a plain bolt.

    python benchmarks/windowing.py [--duration 5] [--warmup 2]

Local mode, acking on, one reliable spout of integers (message id per
tuple; ``topology.max.spout.pending`` 30,000 for the count window and
200,000 for the 1 s window: a window keeps its tuples pending until they
expire, up to length + slide, so the cap must cover that many seconds of
input or it, not the bolt, sets the rate).  Two windows, each beside a plain bolt
computing the same sums:

- a sliding count window, ``Count(10_000)`` sliding by ``Count(1_000)``:
  the WindowedBolt sums ``window.tuples``; the plain bolt keeps the last
  10,000 values in a deque with a running sum and emits every 1,000th tuple
  (acked at once, its output anchored to one tuple);
- a tumbling 1 s window, ``tumbling=Duration.seconds(1)``: the plain bolt
  adds into a counter and emits on a 1 s tick.

Each row is a fresh process: tuples the bolt took in per second and spout
tuples acked per second over ``--duration`` seconds after ``--warmup``.
Then bytes per buffered tuple, measured with tracemalloc on the window core
alone (50,000 tuples shaped as the executor makes them: a values record and
a one-root anchor map): what the window itself adds per tuple (a reference,
a timestamp, a flag) and what it keeps alive with the tuple objects.
Nothing here asserts a number.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import deque
from typing import Any

PENDING = {"sliding": 30_000, "tumbling": 200_000}


def run(kind: str, duration: float, warmup: float) -> dict[str, Any]:
    from squall import Bolt, LocalCluster, Spout, Topology
    from squall.runtime.logging import configure_logging
    from squall.windowing import Count, Duration, WindowedBolt

    configure_logging("error")

    class Ints(Spout):
        outputs = ["n"]

        def initialize(self, conf: dict[str, Any], context: Any) -> None:
            self.i = 0

        def next_tuple(self) -> None:
            i = self.i
            self.i = i + 1
            self.emit([i % 1000], tup_id=i)

    class WindowSum(WindowedBolt):
        outputs = ["sum"]

        def process_window(self, window: Any) -> None:
            self.emit([sum(t.values.n for t in window.tuples)])

    class PlainSliding(Bolt):
        outputs = ["sum"]

        def initialize(self, conf: dict[str, Any], context: Any) -> None:
            self.values: deque[int] = deque()
            self.total = 0
            self.seen = 0

        def process(self, tup: Any) -> None:
            n = tup.values.n
            self.values.append(n)
            self.total += n
            if len(self.values) > 10_000:
                self.total -= self.values.popleft()
            self.seen += 1
            if self.seen % 1000 == 0:
                self.emit([self.total])

    class PlainTumbling(Bolt):
        outputs = ["sum"]

        def initialize(self, conf: dict[str, Any], context: Any) -> None:
            self.total = 0

        def process(self, tup: Any) -> None:
            self.total += tup.values.n

        def process_tick(self, tup: Any) -> None:
            self.emit([self.total])
            self.total = 0

    class Drop(Bolt):
        def process(self, tup: Any) -> None:
            pass

    bolts = {
        "sliding-window": lambda s: WindowSum.spec(inputs=[s], window=Count(10_000), slide=Count(1000)),
        "sliding-plain": lambda s: PlainSliding.spec(inputs=[s]),
        "tumbling-window": lambda s: WindowSum.spec(inputs=[s], tumbling=Duration.seconds(1)),
        "tumbling-plain": lambda s: PlainTumbling.spec(inputs=[s],
                                                       config={"topology.tick.tuple.freq.secs": 1}),
    }
    spout = Ints.spec()
    T = Topology.from_specs("Bench", {"ints": spout, "sums": bolts[kind](spout),  # noqa: N806
                                      "sink": Drop.spec(inputs=["sums"])})
    conf = {"topology.acker.executors": 1, "topology.max.spout.pending": PENDING[kind.split("-")[0]]}
    with LocalCluster() as cluster:
        runner = cluster.submit("bench", T, conf)
        time.sleep(warmup)
        s0 = runner.stats()
        start = time.perf_counter()
        time.sleep(duration)
        s1 = runner.stats()
        elapsed = time.perf_counter() - start
    return {"in_per_s": (s1["sums"]["executed"] - s0["sums"]["executed"]) / elapsed,
            "acked_per_s": (s1["ints"]["acked"] - s0["ints"]["acked"]) / elapsed}


def bytes_per_tuple(n: int = 50_000) -> dict[str, float]:
    import os
    import random
    import tracemalloc

    from squall.topology.tuple import Tuple, record_type
    from squall.windowing import Count, WindowCore
    from squall.windowing.policy import make_policy

    record = record_type(("n",))
    rng = random.Random(0)
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    tuples = [Tuple(rng.getrandbits(64), "ints", "default", 3, record(i % 1000),
                    {rng.getrandbits(64): rng.getrandbits(64)}) for i in range(n)]
    with_tuples = tracemalloc.get_traced_memory()[0]
    core = WindowCore(make_policy("bench", window=Count(n), slide=Count(n + 1)))
    now = int.from_bytes(os.urandom(4), "little")
    for i, tup in enumerate(tuples):
        core.add(tup, now + i)
    buffered = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert len(core) == n
    return {"window": (buffered - with_tuples) / n, "tuple": (with_tuples - base) / n}


def in_child(spec: dict[str, Any]) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], capture_output=True,
                          text=True, check=True, timeout=600)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run(**json.loads(args.child))))
        return 0
    print(f"\nsums over a window, acking on, local mode ({args.duration:g} s after {args.warmup:g} s)\n")
    print(f"{'bolt':<52}{'tuples in/s':>13}{'acked/s':>11}{'vs plain':>10}")
    print("-" * 86)
    for shape, label in (("sliding", "Count(10,000) sliding by Count(1,000)"),
                         ("tumbling", "tumbling Duration.seconds(1)")):
        plain = in_child({"kind": f"{shape}-plain", "duration": args.duration, "warmup": args.warmup})
        window = in_child({"kind": f"{shape}-window", "duration": args.duration, "warmup": args.warmup})
        print(f"{'WindowedBolt, ' + label:<52}{window['in_per_s']:>13,.0f}{window['acked_per_s']:>11,.0f}"
              f"{window['in_per_s'] / plain['in_per_s']:>9.2f}x")
        print(f"{'plain bolt, same sums':<52}{plain['in_per_s']:>13,.0f}{plain['acked_per_s']:>11,.0f}"
              f"{1:>9.2f}x")
    mem = bytes_per_tuple()
    print("\nbytes per buffered tuple (tracemalloc, 50,000 tuples in a count window)\n")
    print(f"{'the window itself (reference, timestamp, flag)':<52}{mem['window']:>8.1f}")
    print(f"{'the tuple it keeps alive (Tuple, values, anchors)':<52}{mem['tuple']:>8.1f}")
    print(f"{'total':<52}{mem['window'] + mem['tuple']:>8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
