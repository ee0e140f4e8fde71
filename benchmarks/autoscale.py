"""Self-regulation against a stepped input (issue 50): a word count whose split waits
4 ms a sentence, sized for 1x (one split executor carries about 250 sentences a second;
1x is 100), fed 1x, then 4x, then 1x again, three ways on the same dev cluster:

* ``autoscale``: sized for 1x, self-regulation on;
* ``fixed 1x``: the same sizing, self-regulation off;
* ``hand-sized``: the split at 4 executors, the best fixed size for 4x, self-regulation off.

For each phase: the input rate, the throughput (trees acked a second) and p99 complete
latency over the whole phase ("during") and its last third ("after"), and the time from
the step until the topology meets the target -- every 3 s window after it acked at least
95% of the input with a p99 under the target -- for the rest of the phase.  Then the
actions self-regulation took.

    python benchmarks/autoscale.py [--period 3] [--phases 45 90 90] [--target-ms 250]
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
from squall.cli.tables import table  # noqa: E402

TOPOLOGY = REPO / "benchmarks" / "topologies" / "stepped_wordcount.py"
BASE_RATE = 100
STEPS = (1, 4, 1)
# run -> (its conf, the split's executors set by rebalance after submit)
RUNS: dict[str, tuple[tuple[str, ...], int | None]] = {
    "autoscale": (("topology.autoscale=true",), None), "fixed 1x": ((), None), "hand-sized": ((), 4)}


def submit(cluster: DevCluster, name: str, folder: Path, conf: list[str]) -> None:
    args = [sys.executable, "-m", "squall.cli", "submit", "--config", str(cluster.config_file),
            str(TOPOLOGY), "--name", name, "--conf", f"bench.dir={folder}"]
    for kv in conf:
        args += ["--conf", kv]
    subprocess.run(args, check=True, capture_output=True, cwd=REPO)


def cli(cluster: DevCluster, *args: str) -> None:
    subprocess.run([sys.executable, "-m", "squall.cli", args[0], "--config", str(cluster.config_file),
                    *args[1:]], check=False, capture_output=True, cwd=REPO)


def acks(folder: Path) -> list[tuple[float, float | None]]:
    out = []
    for path in folder.glob("acks-*.log"):
        for line in path.read_text().splitlines():
            when, _, latency = line.partition(" ")
            try:
                out.append((float(when), None if latency == "fail" else float(latency)))
            except ValueError:
                continue
    return sorted(out)


def p99(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def phase_stats(samples: list[tuple[float, float | None]], start: float, end: float, rate: float,
                target_ms: float) -> dict[str, Any]:
    inside = [(t, lat) for t, lat in samples if start <= t < end]
    tail = [(t, lat) for t, lat in inside if t >= end - (end - start) / 3]
    ok = [lat for _t, lat in inside if lat is not None]
    windows = []
    t = start
    while t + 3 <= end:
        w = [lat for s, lat in inside if t <= s < t + 3 and lat is not None]
        windows.append((t, len(w) / 3 >= 0.95 * rate and (p99(w) or 0) <= target_ms))
        t += 3
    reached = None
    for i, (when, good) in enumerate(windows):
        if good and all(g for _w, g in windows[i:]):
            reached = when - start
            break
    return {"rate": rate, "thr": len(ok) / (end - start), "p99": p99(ok),
            "thr_after": len([1 for _t, lat in tail if lat is not None]) / ((end - start) / 3),
            "p99_after": p99([lat for _t, lat in tail if lat is not None]),
            "failed": sum(1 for _t, lat in inside if lat is None), "reached": reached}


def one_run(cluster: DevCluster, label: str, root: Path, period: float, phases: list[float],
            target_ms: float) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    folder = root / label.replace(" ", "-")
    folder.mkdir()
    (folder / "rate").write_text(str(BASE_RATE * STEPS[0]))
    name = label.replace(" ", "-")
    extra, split = RUNS[label]
    conf = [f"topology.autoscale.period.secs={period}", "topology.autoscale.quiet.rounds=6", *extra]
    submit(cluster, name, folder, conf)
    if split is not None:
        cli(cluster, "rebalance", name, "-e", f"split={split}")
    while not acks(folder):  # running
        time.sleep(0.5)
    bounds = []
    for step, seconds in zip(STEPS, phases, strict=True):
        (folder / "rate").write_text(str(BASE_RATE * step))
        start = time.time()
        time.sleep(seconds)
        bounds.append((start, time.time(), BASE_RATE * step))
    log = cluster.api("GET", f"topology/{name}/autoscale")
    cli(cluster, "kill", name, "-w", "0")
    samples = acks(folder)
    return [phase_stats(samples, s, e, r, target_ms) for s, e, r in bounds], log["actions"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--period", type=float, default=3.0,
                        help="seconds a self-regulation round (default 3)")
    parser.add_argument("--phases", type=float, nargs=3, default=[45.0, 90.0, 90.0],
                        help="seconds at 1x, 4x and 1x (default 45 90 90)")
    parser.add_argument("--target-ms", type=float, default=250.0, help="the p99 target (default 250 ms)")
    parser.add_argument("--only", action="append", choices=sorted(RUNS), help="these runs only")
    args = parser.parse_args()
    rows, logs = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        cluster = DevCluster(Path(tmp) / "c", supervisors=1, slots=4,
                             conf={"supervisor.run.worker.as.user": False})
        cluster.start()
        try:
            for label in args.only or RUNS:
                stats, actions = one_run(cluster, label, Path(tmp), args.period, args.phases, args.target_ms)
                logs[label] = actions
                for i, s in enumerate(stats):
                    rows.append([label, f"{i + 1}: {STEPS[i]}x ({s['rate']:.0f}/s)", f"{s['thr']:.0f}",
                                 f"{s['p99']:.0f}" if s["p99"] is not None else "-", f"{s['thr_after']:.0f}",
                                 f"{s['p99_after']:.0f}" if s["p99_after"] is not None else "-",
                                 "never" if s["reached"] is None else f"{s['reached']:.0f}", s["failed"]])
                print(table(["run", "phase", "tuples/s during", "p99 ms during", "tuples/s after",
                             "p99 ms after", "s to target", "failed"], rows[-3:]), flush=True)
        finally:
            cluster.stop()
    print()
    print(table(["run", "phase", "tuples/s during", "p99 ms during", "tuples/s after", "p99 ms after",
                 "s to target", "failed"], rows))
    for label, actions in logs.items():
        for a in sorted((a for a in actions if a["status"] != "noted"), key=lambda a: a["id"]):
            print(f"{label}: #{a['id']} {a['policy']} {a['component']} {a['resolution']} -> {a['status']}: "
                  f"{a.get('outcome', '')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
