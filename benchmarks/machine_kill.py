"""The Storm@Twitter paper's machine-kill experiment (§3.4, Figures 9 and 10), on Squall.

    python benchmarks/machine_kill.py [--step-secs 50] [--rate 300] [--out /tmp/machine_kill-run]
    python benchmarks/machine_kill.py --quick        # about two minutes

The paper ran a topology (spout -> shuffle -> distributor -> fields(user_id)
-> user count -> fields(ts) -> aggregator, acking on) at a fixed offered
load on 16 machines, removed three machines every 15 minutes, and plotted
throughput (tuples acked per minute) and average complete latency over
time.  Here: a real dev cluster on this machine (ZooKeeper, nimbus and
``--machines`` supervisors, each one "machine" with ``--slots`` slots), the
same topology shape (benchmarks/topologies/paper_topology.py) submitted
through the CLI with ``topology.workers=4``, and every ``--step-secs`` one
supervisor is SIGKILLed together with its workers, until ``--min-machines``
are left.  Nimbus's failure detection is set to seconds, not minutes.

Every ``--poll-secs`` the timeline reads nimbus's REST API
(``GET /api/v1/topology/<name>?window=:all-time``): throughput is the delta
of the spout's acked count between two polls over the time between them,
latency the delta of (complete latency x acked) over the delta of acked,
i.e. the average complete latency of the trees acked in that interval.
The table gives, per period, the average throughput and latency and how
long after the kill throughput came back to 90% of the offered load; the
plots (PNG, matplotlib's Agg backend, the optional ``bench`` extra) show
both over time with a vertical line at each kill.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from squall.cli.devcluster import DevCluster  # noqa: E402

TOPOLOGY_FILE = REPO / "benchmarks" / "topologies" / "paper_topology.py"
NAME = "paper-machine-kill"
SPOUT = "client_events"
RECOVERED = 0.9  # throughput back to this share of the offered load counts as recovered

# Failure detection in seconds: a dead machine's supervisor misses its heartbeats,
# its workers theirs, and nimbus moves their executors to the machines left.
CLUSTER_CONF: dict[str, Any] = {
    "nimbus.stats.freq.secs": 1,
    "nimbus.monitor.freq.secs": 1,
    "nimbus.supervisor.timeout.secs": 5,
    "nimbus.task.timeout.secs": 5,
    "supervisor.heartbeat.frequency.secs": 1,
    "supervisor.assignments.sync.secs": 1,
    "supervisor.worker.timeout.secs": 5,
    "worker.heartbeat.frequency.secs": 1,
}


class Timeout(Exception):
    """The run's hard overall timeout went off."""


@dataclass
class Sample:
    t: float  # seconds since the measurement started
    machines: int
    acked: int
    failed: int
    latency_ms: float  # all-time average complete latency
    latency_600_ms: float  # the 10-minute window's, as the UI shows it
    workers_assigned: int
    workers_alive: int
    throughput: float | None = None  # over the interval that ends here
    interval_latency_ms: float | None = None


@dataclass
class Run:
    offered: float
    samples: list[Sample] = field(default_factory=list)
    kills: list[tuple[float, int, int]] = field(default_factory=list)  # (t, supervisor, machines left)
    oddities: list[str] = field(default_factory=list)


def submit(cluster: DevCluster, conf: dict[str, Any]) -> None:
    args = [sys.executable, "-m", "squall.cli", "submit", str(TOPOLOGY_FILE), "--config",
            str(cluster.config_file), "--name", NAME]
    for key, value in conf.items():
        args += ["--conf", f"{key}={value}"]
    done = subprocess.run(args, capture_output=True, text=True, cwd=REPO, timeout=120)
    if done.returncode != 0:
        msg = f"submit failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
        raise RuntimeError(msg)


def spout_stats(cluster: DevCluster, window: str) -> dict[str, Any]:
    page = cluster.api("GET", f"topology/{NAME}?window={window}")
    spouts = [s for s in page.get("spouts", []) if s.get("spoutId") == SPOUT]
    out = spouts[0] if spouts else {"acked": 0, "failed": 0, "completeLatency": "0"}
    return {**out, "workersTotal": page.get("workersTotal", 0)}


def sample(cluster: DevCluster, t: float, machines: int) -> Sample:
    total = spout_stats(cluster, ":all-time")
    recent = spout_stats(cluster, "600")
    return Sample(t=t, machines=machines, acked=int(total["acked"]), failed=int(total["failed"]),
                  latency_ms=float(total["completeLatency"]), latency_600_ms=float(recent["completeLatency"]),
                  workers_assigned=int(total["workersTotal"]), workers_alive=len(cluster.worker_pids()))


def add_interval(run: Run, prev: Sample, cur: Sample) -> None:
    d_acked = cur.acked - prev.acked
    dt = cur.t - prev.t
    if d_acked < 0:
        run.oddities.append(f"t={cur.t:.0f}s: the all-time acked count went down "
                            f"({prev.acked} -> {cur.acked}): a dead worker's statistics left nimbus's totals")
        return
    cur.throughput = d_acked / dt if dt > 0 else None
    if d_acked > 0:
        weighted = cur.latency_ms * cur.acked - prev.latency_ms * prev.acked
        cur.interval_latency_ms = max(weighted / d_acked, 0.0)


def wait_flowing(cluster: DevCluster, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError, KeyError):
            if int(spout_stats(cluster, ":all-time")["acked"]) > 0:
                return
        time.sleep(0.5)
    msg = f"no tuple acked within {timeout:.0f}s of the submit"
    raise RuntimeError(msg)


def experiment(cluster: DevCluster, args: argparse.Namespace, run: Run) -> None:
    """Fills ``run`` as it goes: a timeout keeps what was measured."""
    submit(cluster, {"topology.workers": args.workers, "paper.rate": args.rate})
    wait_flowing(cluster, 120)
    print(f"acks flowing; warming up {args.warmup_secs:.0f}s", file=sys.stderr, flush=True)
    time.sleep(args.warmup_secs)
    machines = args.machines
    victims = list(range(args.machines - 1, args.min_machines - 1, -1))
    periods = len(victims) + 1
    start = time.monotonic()
    next_kill = args.step_secs
    end = args.step_secs * periods
    prev: Sample | None = None
    while True:
        now = time.monotonic() - start
        if victims and now >= next_kill:
            victim = victims.pop(0)
            cluster.kill_supervisor_node(victim)
            machines -= 1
            run.kills.append((now, victim, machines))
            print(f"t={now:5.1f}s killed supervisor-{victim} and its workers: {machines} machines left",
                  file=sys.stderr, flush=True)
            next_kill += args.step_secs
        try:
            cur = sample(cluster, now, machines)
        except (OSError, ValueError, KeyError) as e:
            run.oddities.append(f"t={now:.0f}s: nimbus's API did not answer ({e})")
            cur = None
        if cur is not None:
            if prev is not None:
                add_interval(run, prev, cur)
            run.samples.append(cur)
            prev = cur
            tp = "-" if cur.throughput is None else f"{cur.throughput:7.1f}"
            lat = "-" if cur.interval_latency_ms is None else f"{cur.interval_latency_ms:7.1f}"
            print(f"t={now:5.1f}s machines={machines} workers={cur.workers_alive}/{cur.workers_assigned} "
                  f"throughput={tp}/s latency={lat}ms failed={cur.failed}", file=sys.stderr, flush=True)
        if now >= end:
            return
        time.sleep(max(0.0, min(args.poll_secs, end - now, (next_kill - now) if victims else args.poll_secs)))


# -- the table ------------------------------------------------------------------


def periods(run: Run, step: float) -> list[dict[str, Any]]:
    bounds = [0.0, *(t for t, _, _ in run.kills), run.samples[-1].t if run.samples else 0.0]
    machines = [run.samples[0].machines if run.samples else 0, *(m for _, _, m in run.kills)]
    rows = []
    for i, m in enumerate(machines):
        lo, hi = bounds[i], bounds[i + 1]
        inside = [s for s in run.samples if lo < s.t <= hi + 1e-9 and s.throughput is not None]
        span = sum(1 for _ in inside)
        acked = sum(s.throughput * (s.t - p.t) for s, p in _with_prev(run, inside))
        seconds = sum(s.t - p.t for s, p in _with_prev(run, inside))
        lat_weight = [(s.interval_latency_ms, s.throughput * (s.t - p.t)) for s, p in _with_prev(run, inside)
                      if s.interval_latency_ms is not None]
        weight = sum(w for _, w in lat_weight)
        recovered = None
        if i > 0:
            for s in inside:
                if s.throughput >= RECOVERED * run.offered:
                    recovered = s.t - lo
                    break
        rows.append({"window": f"{lo:.0f}-{hi:.0f} s", "machines": m,
                     "workers": next((s.workers_alive for s in reversed(run.samples) if s.machines == m), 0),
                     "throughput": acked / seconds if seconds else 0.0,
                     "latency": sum(v * w for v, w in lat_weight) / weight if weight else 0.0,
                     "min": min((s.throughput for s in inside), default=0.0),
                     "recovered": recovered, "first": i == 0, "polls": span})
    return rows


def _with_prev(run: Run, inside: list[Sample]) -> list[tuple[Sample, Sample]]:
    index = {id(s): k for k, s in enumerate(run.samples)}
    return [(s, run.samples[index[id(s)] - 1]) for s in inside if index[id(s)] > 0]


def table(run: Run, step: float) -> str:
    lines = [(f"Offered load: {run.offered:.0f} tuples/s; period {step:.0f} s "
              f"(the paper's 15 minutes, scaled); throughput = spout acks/s, latency = complete latency."),
             "",
             ("| Time window | # machines | live workers (end) | Avg throughput (tuples/s) | Min (tuples/s) "
              "| Avg complete latency (ms) | Back to 90% of offered after |"),
             "|---|---|---|---|---|---|---|"]
    for r in periods(run, step):
        rec = "n/a (start)" if r["first"] else ("not within the period" if r["recovered"] is None
                                                else f"{r['recovered']:.1f} s")
        lines.append(f"| {r['window']} | {r['machines']} | {r['workers']} | {r['throughput']:.1f} | "
                     f"{r['min']:.1f} | {r['latency']:.1f} | {rec} |")
    return "\n".join(lines)


# -- the plots ------------------------------------------------------------------


def have_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def plot(run: Run, out: str) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = [s for s in run.samples if s.throughput is not None]
    paths = []
    for what, ylabel, values, title in (
            ("throughput", "tuples acked / s", [s.throughput for s in points],
             "Throughput (cf. the paper's Figure 9)"),
            ("latency", "average complete latency (ms)", [s.interval_latency_ms for s in points],
             "Complete latency (cf. the paper's Figure 10)")):
        fig, ax = plt.subplots(figsize=(10, 4))
        ax.plot([s.t for s in points], [v if v is not None else float("nan") for v in values], marker=".",
                linewidth=1)
        if what == "throughput":
            ax.axhline(run.offered, color="grey", linestyle=":", label=f"offered load ({run.offered:.0f}/s)")
        for k, (t, _victim, left) in enumerate(run.kills):
            ax.axvline(t, color="red", linestyle="--", linewidth=1,
                       label="machine killed" if k == 0 else None)
            ax.annotate(f"-> {left} machines", (t, 1.0), xycoords=("data", "axes fraction"),
                        xytext=(3, -12), textcoords="offset points", color="red", fontsize=8)
        ax.set_xlabel("time (s)")
        ax.set_ylabel(ylabel)
        ax.set_title(f"{title}: Squall, {run.samples[0].machines if run.samples else '?'} machines, "
                     "one killed per step")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(loc="lower left", fontsize=8)
        fig.tight_layout()
        path = Path(f"{out}-{what}.png")
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)
    return paths


# -- main -----------------------------------------------------------------------


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--step-secs", type=float, default=50.0,
                        help="time between machine kills (the paper: 15 minutes)")
    parser.add_argument("--quick", action="store_true", help="about two minutes: 30 s steps, 2 s polls")
    parser.add_argument("--rate", type=float, default=300.0, help="offered load, tuples/s in total")
    parser.add_argument("--machines", type=int, default=4)
    parser.add_argument("--min-machines", type=int, default=2)
    parser.add_argument("--slots", type=int, default=1, help="slots per machine")
    parser.add_argument("--workers", type=int, default=4, help="topology.workers")
    parser.add_argument("--poll-secs", type=float, default=3.0)
    parser.add_argument("--warmup-secs", type=float, default=10.0)
    parser.add_argument("--timeout", type=float, default=None,
                        help="hard overall timeout, seconds (default: from the step length)")
    parser.add_argument("--out", default=None,
                        help="prefix of the PNGs: <out>-throughput.png, <out>-latency.png "
                             "(default /tmp/machine_kill-<time>)")
    args = parser.parse_args(argv)
    if args.quick:
        args.step_secs, args.poll_secs, args.warmup_secs = 30.0, 2.0, 5.0
    if not 1 <= args.min_machines < args.machines:
        parser.error("need 1 <= --min-machines < --machines")
    if args.out is None:
        args.out = f"/tmp/machine_kill-{time.strftime('%Y%m%d-%H%M%S')}"
    out = Path(args.out).resolve()
    if out == REPO or REPO in out.parents:
        parser.error(f"--out must be outside the repository ({REPO})")
    args.out = str(out)
    if args.timeout is None:
        args.timeout = 240 + args.warmup_secs + args.step_secs * (args.machines - args.min_machines + 1)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    plots = have_matplotlib()
    if not plots:
        print("matplotlib is not installed, so no plots (the table still prints): "
              "pip install 'squall[bench]' or pip install matplotlib", file=sys.stderr)

    def expire(signum: int, frame: Any) -> None:
        raise Timeout(f"hard timeout of {args.timeout:.0f}s reached")

    def terminate(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGALRM, expire)
    signal.signal(signal.SIGTERM, terminate)
    signal.alarm(int(args.timeout))
    run = Run(offered=args.rate)
    with tempfile.TemporaryDirectory(prefix="squall-machine-kill-") as tmp:
        cluster = DevCluster(Path(tmp) / "cluster", supervisors=args.machines, slots=args.slots,
                             conf=CLUSTER_CONF)
        try:
            cluster.start(timeout=120)
            experiment(cluster, args, run)
        except Timeout as e:
            print(f"aborted: {e}", file=sys.stderr)
        finally:
            signal.alarm(0)
            logs = Path(tmp) / "cluster" / "logs"
            with contextlib.suppress(OSError):
                if args.out:
                    keep = Path(f"{args.out}-logs")
                    subprocess.run(["cp", "-r", str(logs), str(keep)], check=False)
            cluster.stop()
    if len(run.samples) < 2:
        return 1
    print(table(run, args.step_secs))
    if run.oddities:
        print("\nOdd things seen:")
        for odd in run.oddities:
            print(f"- {odd}")
    timeline = Path(f"{args.out}-timeline.json")
    timeline.write_text(json.dumps({"offered": run.offered, "kills": run.kills,
                                    "samples": [s.__dict__ for s in run.samples]}, indent=1))
    print(f"\ntimeline: {timeline}\ncluster logs: {args.out}-logs")
    if plots:
        for path in plot(run, args.out):
            print(f"plot: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
