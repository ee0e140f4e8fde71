"""streamparse's quickstart bolt on Squall: in the worker's process through Squall's
streamparse compatibility layer (the default), and as the real streamparse over multilang
(``python -m streamparse.run bolts.wordcount.WordCountBolt``, what Storm runs for a
streamparse bolt), in JSON (streamparse's default) and msgpack.

    python benchmarks/streamparse.py [--duration 5] [--repeat 3] [--no-acking]
                                     [--streamparse-python PATH]

The bolt is the one ``squall sparse quickstart`` writes (count each word, log every
thousand, emit ``[word, count]``), unchanged.  A Squall spout feeds it words of the
quickstart's cycle, with message ids unless ``--no-acking`` (max spout pending 5000), all in
one local-mode process pinned to one core (its multilang child on the same core).  The
real streamparse runs from a virtualenv of its own (``--streamparse-python``; by default one
made under ~/.cache/squall-bench with ``pip install streamparse msgpack``, which needs the package
index).  Storm's streamparse users report 1,000-2,000 tuples/s for such a bolt.
Each configuration runs in a fresh process, ``--repeat`` times in rounds; the table shows
medians.  Nothing here asserts a number.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CONFIGS = [
    ("streamparse code in the worker (Squall's layer)", {"kind": "inproc"}),
    ("real streamparse over multilang, JSON", {"kind": "multilang", "serializer": "json"}),
    ("real streamparse over multilang, msgpack", {"kind": "multilang", "serializer": "msgpack"}),
]
ANIMALS = ["dog", "cat", "zebra", "elephant"]


def streamparse_python(given: str | None) -> str:
    """A Python with the real streamparse: ``given``, or a virtualenv made once for this."""
    if given:
        return given
    venv = Path.home() / ".cache" / "squall-bench" / "streamparse"
    python = venv / "bin" / "python"
    if not python.exists():
        print(f"making {venv} (pip install streamparse)...", file=sys.stderr, flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "streamparse", "msgpack"], check=True)
    return str(python)


def run(spec: dict[str, Any], duration: float, warmup: float, acking: bool, python: str) -> dict[str, Any]:
    from squall import LocalCluster, Spout, Topology
    from squall.cli.sparse_quickstart import quickstart
    from squall.multilang import MSGPACK_SERIALIZER, ShellBolt
    from squall.runtime.logging import configure_logging

    configure_logging("error")
    root = quickstart("bench", Path(tempfile.mkdtemp(prefix="squall-bench-")))
    source = root / "src"
    sys.path.insert(0, str(source))

    class Words(Spout):
        outputs = ("word",)

        def initialize(self, conf: dict[str, Any], context: Any) -> None:
            self.i = 0

        def next_tuple(self) -> None:
            self.i += 1
            self.emit([ANIMALS[self.i % 4]], tup_id=self.i if acking else None)

    words = Words.spec()
    if spec["kind"] == "inproc":
        from squall import plugins

        plugins.add_import_roots()  # what squall local and the workers do: `streamparse` importable
        from bolts.wordcount import WordCountBolt  # the quickstart's, through `from streamparse import`

        bolt = WordCountBolt.spec(inputs=[words])
    else:
        bolt = ShellBolt.spec(command=python, args=["-m", "streamparse.run", "bolts.wordcount.WordCountBolt",
                                                    "-s", spec["serializer"]],
                              cwd=str(source), outputs=["word", "count"], inputs=[words])
    conf: dict[str, Any] = {"topology.max.spout.pending": 5000}
    if not acking:
        conf["topology.acker.executors"] = 0
    if spec.get("serializer") == "msgpack":
        conf["topology.multilang.serializer"] = MSGPACK_SERIALIZER
    topology = Topology.from_specs("Bench", {"words": words, "count": bolt}, conf)
    with LocalCluster() as cluster:
        runner = cluster.submit("bench", topology)
        time.sleep(warmup)
        before, start = runner.stats(), time.perf_counter()
        time.sleep(duration)
        after, elapsed = runner.stats(), time.perf_counter() - start
        errors = [e.error for e in runner.errors]
    executed = after["count"]["executed"] - before["count"]["executed"]
    return {"tuples_per_s": executed / elapsed, "errors": errors[:3]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-acking", action="store_true")
    parser.add_argument("--streamparse-python", help="a Python with the real streamparse installed")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--python", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run(json.loads(args.child), args.duration, args.warmup, not args.no_acking,
                             args.python)))
        return 0
    python = streamparse_python(args.streamparse_python)
    version = subprocess.run([python, "-c", "import streamparse; print(streamparse.__version__)"],
                             capture_output=True, text=True, check=True).stdout.strip()
    acking = "acking off" if args.no_acking else "acking on, max spout pending 5000"
    print(f"streamparse's quickstart bolt, local mode pinned to one core, {acking}; real streamparse "
          f"{version}; {args.duration:.0f} s runs, medians of {args.repeat}\n")
    runs: dict[str, list[float]] = {label: [] for label, _ in CONFIGS}
    for _ in range(args.repeat):
        for label, spec in CONFIGS:
            cmd = [sys.executable, __file__, "--child", json.dumps(spec), "--python", python,
                   "--duration", str(args.duration), "--warmup", str(args.warmup),
                   *(["--no-acking"] if args.no_acking else [])]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False,
                                  preexec_fn=lambda: os.sched_setaffinity(0, {0}))
            if proc.returncode != 0:
                print(f"{label}: failed\n{proc.stderr[-1500:]}", file=sys.stderr)
                continue
            result = json.loads(proc.stdout.strip().splitlines()[-1])
            if result["errors"]:
                print(f"{label}: errors {result['errors']}", file=sys.stderr)
            runs[label].append(result["tuples_per_s"])
    print(f"{'configuration':<52}{'tuples/s':>12}{'x multilang JSON':>18}")
    print("-" * 82)
    base = statistics.median(runs[CONFIGS[1][0]]) if runs[CONFIGS[1][0]] else float("nan")
    for label, _ in CONFIGS:
        if not runs[label]:
            print(f"{label:<52}{'failed':>12}")
            continue
        rate = statistics.median(runs[label])
        print(f"{label:<52}{rate:>12,.0f}{rate / base:>18.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
