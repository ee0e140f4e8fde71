"""Self-regulation on a dev cluster (issue 50): each of examples/autoscale/sizing.py's
topologies, sized wrong on purpose, submitted with self-regulation on; what it did, how
long it took, and what the topology carried before and after.

    python benchmarks/autoscale.py [--period 3] [--cap 150] [--only WaitingTopology]

Throughput is the spout's acked trees a second over the first rounds (before any action)
and the last ones; p99 is the complete latency of the round's own trees, as the action log
recorded it before and after each action.  One row per topology.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from squall.cli.devcluster import DevCluster  # noqa: E402
from squall.cli.tables import autoscale_report, table  # noqa: E402

EXAMPLE = REPO / "examples" / "autoscale" / "sizing.py"
SCENARIOS = {  # topology -> (its bolt, extra conf)
    "WaitingTopology": ("waits", ()),
    "CpuTopology": ("computes", ()),
    "IdleTopology": ("waits", ("topology.autoscale.quiet.rounds=5",)),
    "QueueingTopology": ("waits", ("topology.autoscale.latency.p99.ms=50",)),
}


def submit(cluster: DevCluster, topology: str, name: str, conf: list[str]) -> None:
    args = [sys.executable, "-m", "squall.cli", "submit", "--config", str(cluster.config_file), str(EXAMPLE),
            "--topology", topology, "--name", name]
    for kv in conf:
        args += ["--conf", kv]
    subprocess.run(args, check=True, capture_output=True, cwd=REPO)


def sample(cluster: DevCluster, name: str, bolt: str) -> dict[str, Any]:
    info = cluster.api("GET", f"topologies/{name}")
    component = cluster.api("GET", f"topology/{name}/component/{bolt}")
    return {"t": time.monotonic(), "acked": int(info["stats"].get("numbers", {}).get("acked", 0)),
            "executors": len(component["executorStats"]), "workers": len(info["workers"])}


def rate(samples: list[dict[str, Any]]) -> float:
    if len(samples) < 2:
        return 0.0
    return (samples[-1]["acked"] - samples[0]["acked"]) / max(samples[-1]["t"] - samples[0]["t"], 1e-9)


def run(cluster: DevCluster, topology: str, period: float, cap: float) -> list[Any]:
    bolt, extra = SCENARIOS[topology]
    name = topology.removesuffix("Topology").lower()
    conf = ["topology.autoscale=true", f"topology.autoscale.period.secs={period}",
            "topology.autoscale.rounds=3", "topology.autoscale.settle.rounds=3",
            "topology.autoscale.cooldown.secs=120", *extra]
    submit(cluster, topology, name, conf)
    started = time.monotonic()
    samples: list[dict[str, Any]] = []
    while time.monotonic() - started < cap:
        time.sleep(period / 2)
        try:
            samples.append(sample(cluster, name, bolt))
        except OSError:
            continue
        log = cluster.api("GET", f"topology/{name}/autoscale")
        acts = [a for a in log["actions"] if a["status"] != "noted"]
        last = max((a.get("judged_at") or a["time"] for a in acts), default=None)
        settled = acts and all(a["status"] in ("helped", "undone", "failed") for a in acts)
        # Converged: every action judged, and none for two symptoms' worth of rounds since.
        if settled and last is not None and time.time() - last > 8 * period and len(samples) > 8:
            break
    log = cluster.api("GET", f"topology/{name}/autoscale")
    acts = sorted((a for a in log["actions"] if a["status"] != "noted"), key=lambda a: a["id"])
    moving = [s for s in samples if s["acked"] > 0]
    before, after = moving[:4], moving[-4:]  # the first rounds (no action yet: it takes three), the last
    p99 = [(a.get("before") or {}).get("p99_ms") for a in acts] + [(acts[-1].get("after") or {}).get("p99_ms")
                                                                  if acts else None]
    subprocess.run([sys.executable, "-m", "squall.cli", "kill", "--config", str(cluster.config_file), name,
                    "-w", "0"], check=False, capture_output=True, cwd=REPO)
    took = (max(a.get("judged_at") or a["time"] for a in acts) - acts[0]["time"]) if acts else None
    print(autoscale_report(log), flush=True)
    return [topology, f"{rate(before):.0f}", f"{rate(after):.0f}",
            f"{moving[0]['executors'] if moving else '?'} -> {samples[-1]['executors'] if samples else '?'}",
            f"{moving[0]['workers'] if moving else '?'} -> {samples[-1]['workers'] if samples else '?'}",
            " | ".join(f"{a['policy']} {_what(a)}: {a['status']}" for a in acts) or "none",
            "" if p99[0] is None else f"{p99[0]:.0f} -> {p99[-1] or 0:.0f}",
            "" if took is None else f"{took:.0f}"]


def _what(action: dict[str, Any]) -> str:
    r = action.get("resolution") or {}
    parts = [f"{c}={n}" for c, n in (r.get("executors") or {}).items()]
    if r.get("workers") is not None:
        parts.append(f"workers={r['workers']}")
    parts += [f"pending={n}" for n in (r.get("max_pending") or {}).values()]
    return ",".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--period", type=float, default=3.0, help="seconds a round (default 3)")
    parser.add_argument("--cap", type=float, default=150.0, help="seconds at most a topology (default 150)")
    parser.add_argument("--only", action="append", choices=sorted(SCENARIOS), help="these topologies only")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cluster = DevCluster(Path(tmp) / "c", supervisors=1, slots=4,
                             conf={"supervisor.run.worker.as.user": False})
        cluster.start()
        try:
            for topology in args.only or SCENARIOS:
                rows.append(run(cluster, topology, args.period, args.cap))
                print(table(["topology", "tuples/s before", "after", "bolt executors", "workers", "actions",
                             "p99 ms before -> after", "s first action -> last judged"], rows[-1:]),
                      flush=True)
        finally:
            cluster.stop()
    print()
    print(table(["topology", "tuples/s before", "after", "bolt executors", "workers", "actions",
                 "p99 ms before -> after", "s first action -> last judged"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
