"""How long nimbus takes to answer a submit: ``POST /api/v1/topologies`` of the word count.

    python benchmarks/submit_latency.py [--submits 20] [--verify auto off] [--insecure]
                                        [--requirements none cold warm]

Starts a real dev cluster (ZooKeeper JVM, nimbus, one supervisor; secure by default: TLS and
a token on every request) for each ``--verify`` mode (``nimbus.verify.sandbox``: ``auto``
imports the package in bubblewrap's sandbox where it works, ``off`` imports nothing), then
submits the word count ``--submits`` times, as ``squall submit`` would send it (the
examples/ directory's code package), and kills it after each submit (not timed).  A
submit's time is the request's, from sending to the whole answer: nimbus's checks, the
package's verification, the writes to ZooKeeper and the assignment.  Run with
``PYTHONPATH`` at another checkout to measure that one's nimbus (a mode it does not know
is passed through and ignored).

``--requirements`` adds a topology environment to each submit (one local wheel, no
network; the cluster's ``squall.env.build.paths`` names its directory): ``cold``, a
package no environment has yet, so nimbus builds one before it answers; ``warm``, the same
requirements every time, so nimbus finds it cached; ``none``, no requirements.  The
supervisors' builds come after the answer and are not timed.
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
from tests.helpers import make_wheel  # noqa: E402

WORDCOUNT = REPO / "examples" / "wordcount.py"


def submit_body(name: str, requirements: list[str] | None = None) -> bytes:
    """What ``squall submit examples/wordcount.py --name NAME [--requirements R]`` sends."""
    topology = load_topology(str(WORDCOUNT))
    topology_conf = topology.config
    code = pack(plan(str(WORDCOUNT), topology.definition(), topology_conf).entries,
                DEFAULTS["nimbus.code.max.bytes"])
    body = {"name": name, "conf": {}, "topology": portable(topology.definition().to_dict(), WORDCOUNT.parent),
            "code": base64.b64encode(code).decode()}
    if requirements is not None:
        body["requirements"] = {"source": "requirements.txt", "lines": requirements}
    return json.dumps(body).encode()


def measure(mode: str, submits: int, secure: bool, requirements: str = "none") -> dict[str, Any]:
    times: list[float] = []
    with tempfile.TemporaryDirectory(prefix="squall-submit-bench-") as tmp:
        wheels = Path(tmp) / "wheels"
        wheels.mkdir()
        for i in range(submits):
            make_wheel(wheels, f"sqlatency{i}", "1.0")

        def lines(i: int) -> list[str] | None:
            if requirements == "none":
                return None
            package = f"sqlatency{i if requirements == 'cold' else 0}"
            return ["--no-index", f"--find-links {wheels}", f"{package}==1.0"]

        bodies = [submit_body("latency", lines(i)) for i in range(submits)]
        cluster = DevCluster(Path(tmp) / "c", supervisors=1, slots=2, secure=secure,
                             conf={"nimbus.verify.sandbox": mode, "squall.env.build.paths": [str(wheels)]})
        try:
            cluster.start()
            if requirements == "warm":  # nimbus has the environment before the first timed submit
                cluster.request("POST", "/api/v1/topologies", bodies[0], timeout=900)
                cluster.api("POST", "topologies/latency/kill", {"wait_secs": 0})
                poll_for(lambda: cluster.api("GET", "topologies") == [], timeout=60, message="the kill")
            for body in bodies:
                started = time.perf_counter()
                response = cluster.request("POST", "/api/v1/topologies", body, timeout=900)
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
    return {"mode": mode, "how": how, "requirements": requirements, "n": len(ms), "median": median(ms),
            "p90": quantiles(ms, n=10)[8] if len(ms) >= 2 else ms[0], "max": max(ms)}


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["POST /api/v1/topologies (the word count; killed after each, not timed)", "",
             ("| nimbus.verify.sandbox | package imported | requirements | submits | median (ms) | p90 (ms) "
              "| max (ms) |"), "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['mode']} | {r['how']} | {r['requirements']} | {r['n']} | {r['median']:.0f} "
              f"| {r['p90']:.0f} | {r['max']:.0f} |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--submits", type=int, default=20)
    parser.add_argument("--verify", nargs="+", default=["auto", "off"], metavar="MODE")
    parser.add_argument("--insecure", action="store_true")
    parser.add_argument("--requirements", nargs="+", default=["none"], choices=["none", "cold", "warm"])
    args = parser.parse_args()
    print(table([measure(mode, args.submits, not args.insecure, case)
                 for mode in args.verify for case in args.requirements]))


if __name__ == "__main__":
    main()
