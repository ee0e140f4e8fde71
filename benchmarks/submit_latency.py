"""How long nimbus takes to answer a submit: ``POST /api/v1/topologies`` of the word count.

    python benchmarks/submit_latency.py [--submits 20] [--verify auto off] [--insecure]

Starts a real dev cluster (ZooKeeper JVM, nimbus, one supervisor; secure by default: TLS and
a token on every request) for each ``--verify`` mode (``nimbus.verify.sandbox``: ``auto``
imports the package in bubblewrap's sandbox where it works, ``off`` imports nothing), then
submits the word count ``--submits`` times, as ``squall submit`` would send it (the
examples/ directory's code package), and kills it after each submit (not timed).  A
submit's time is the request's, from sending to the whole answer: nimbus's checks, the
package's verification, the writes to ZooKeeper and the assignment.  Run with
``PYTHONPATH`` at another checkout to measure that one's nimbus (a mode it does not know
is passed through and ignored).
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import tempfile
import time
from pathlib import Path
from statistics import median, quantiles
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from squall.cli.args import load_topology  # noqa: E402
from squall.cli.devcluster import DevCluster  # noqa: E402
from squall.cli.packing import plan, portable  # noqa: E402
from squall.config import DEFAULTS  # noqa: E402
from squall.runtime.package import pack  # noqa: E402
from squall.testing import poll_for  # noqa: E402

WORDCOUNT = REPO / "examples" / "wordcount.py"


def submit_body(name: str) -> bytes:
    """What ``squall submit examples/wordcount.py --name NAME`` sends."""
    topology = load_topology(str(WORDCOUNT))
    topology_conf = topology.config
    code = pack(plan(str(WORDCOUNT), topology.definition(), topology_conf).entries,
                DEFAULTS["nimbus.code.max.bytes"])
    return json.dumps({"name": name, "conf": {},
                       "topology": portable(topology.definition().to_dict(), WORDCOUNT.parent),
                       "code": base64.b64encode(code).decode()}).encode()


def measure(mode: str, submits: int, secure: bool) -> dict[str, Any]:
    body = submit_body("latency")
    times: list[float] = []
    with tempfile.TemporaryDirectory(prefix="squall-submit-bench-") as tmp:
        cluster = DevCluster(Path(tmp) / "c", supervisors=1, slots=2, secure=secure,
                             conf={"nimbus.verify.sandbox": mode})
        try:
            cluster.start()
            for _ in range(submits):
                started = time.perf_counter()
                response = cluster.request("POST", "/api/v1/topologies", body, timeout=120)
                times.append(time.perf_counter() - started)
                if response.status_code != 200:
                    msg = f"submit answered {response.status_code}: {response.text[:500]}"
                    raise SystemExit(msg)
                cluster.api("POST", "topologies/latency/kill", {"wait_secs": 0})
                poll_for(lambda: cluster.api("GET", "topologies") == [], timeout=60, message="the kill")
            logs = (cluster.root / "logs" / "nimbus-0.log").read_text(errors="replace")
        finally:
            cluster.stop()
    how = ("sandboxed" if "package verification sandboxed" in logs
           else "not imported" if "package verification off" in logs else "unsandboxed (before the sandbox)")
    ms = [t * 1000 for t in times]
    return {"mode": mode, "how": how, "n": len(ms), "median": median(ms),
            "p90": quantiles(ms, n=10)[8] if len(ms) >= 2 else ms[0], "max": max(ms)}


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["POST /api/v1/topologies (the word count; killed after each, not timed)", "",
             "| nimbus.verify.sandbox | package imported | submits | median (ms) | p90 (ms) | max (ms) |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {r['mode']} | {r['how']} | {r['n']} | {r['median']:.0f} | {r['p90']:.0f} | {r['max']:.0f} |"
              for r in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--submits", type=int, default=20)
    parser.add_argument("--verify", nargs="+", default=["auto", "off"], metavar="MODE")
    parser.add_argument("--insecure", action="store_true")
    args = parser.parse_args()
    print(table([measure(mode, args.submits, not args.insecure) for mode in args.verify]))


if __name__ == "__main__":
    main()
