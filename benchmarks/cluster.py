"""Cluster-mode word count next to local mode, and recovery after SIGKILL.

    python benchmarks/cluster.py [--duration 8] [--security both|secure|insecure] [--repeat 1]
                                 [--pending 2000,5000] [--workers 2,4] [--workers-as both|own|supervisor]

Local mode runs in a process of its own, pinned to one core as ``squall
local`` pins itself, and unpinned; the cluster's workers are pinned by their
supervisors, one core per node of the dev cluster.

Starts a real dev cluster (ZooKeeper JVM, nimbus, 2 supervisors) on this
machine.  Throughput is the spout's acked sentences per second, read from
nimbus's stats between two points ``--duration`` seconds apart.  Recovery
is measured on a durable word count fed at a steady rate: from SIGKILL of a
worker to (a) the supervisor's replacement process running and (b) acks
flowing again at half the rate they had before the kill.

Secure mode (the default: CURVE on every worker socket, frames validated,
nimbus over TLS) and ``--insecure`` dev clusters are measured side by side,
so the rows show what the security costs.

This machine's speed drifts (a VM's does, by up to 2x from one minute to the
next), so beside the ratio of the medians the table gives the median of the
per-round ratios (each cluster run against the pinned local run of its own
round), and the CPU time each sentence cost: the workers' (or the local
process's) user and system time over the window, per acked sentence.  Where
both modes keep their cores busy, throughput is cores / CPU per sentence, so
that column shows what crossing workers costs whatever the machine's speed.

Every configuration runs at each ``--pending`` (max spout pending per spout
task), since the cluster needs more trees in flight than one process for the
same rate (Little's law: rate = trees in flight / time a tree takes).  Half of
each sentence's words cross to the other worker and their acks cross back,
each way a batch a send thread packs and a receive thread unpacks when their
worker's GIL lets them (every few milliseconds, under load): a tree takes
longer, and with the trees in flight local mode needs, a worker waits on the
other's acks with nothing to run.  2000 is what this benchmark ran at from
its first version; 5000 covers the cluster's round trip on this machine, and
changes nothing for local mode, whose trees never wait on another process.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from squall.cli.devcluster import DevCluster  # noqa: E402

BENCH = REPO / "benchmarks" / "topologies" / "bench_wordcount.py"
PINNED = "local mode, 1 worker, pinned to 1 core"
UNPINNED = "local mode, 1 worker, unpinned"


def submit(cluster: DevCluster, file: Path, name: str, *conf: str) -> None:
    args = [sys.executable, "-m", "squall.cli", "submit", "--config", str(cluster.config_file), str(file),
            "--name", name]
    for kv in conf:
        args += ["--conf", kv]
    subprocess.run(args, check=True, capture_output=True, cwd=REPO)


def acked(cluster: DevCluster, name: str) -> tuple[float, int]:
    stats = cluster.api("GET", f"topologies/{name}")["stats"]
    return time.monotonic(), int(stats.get("sentences", {}).get("acked", 0))


def cpu_secs(pids: list[int]) -> float:
    """User and system time the processes have used so far (those that are gone count 0)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def cluster_throughput(cluster: DevCluster, workers: int, duration: float,
                       pending: int) -> tuple[float, float]:
    """Acked sentences per second, and the workers' CPU seconds per sentence."""
    name = f"bench{workers}"
    submit(cluster, BENCH, name, f"topology.workers={workers}", f"topology.max.spout.pending={pending}")
    deadline = time.monotonic() + 60
    while acked(cluster, name)[1] == 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(2)  # warm up
    pids = list(cluster.worker_pids().values())
    t0, a0 = acked(cluster, name)
    c0 = cpu_secs(pids)
    time.sleep(duration)
    t1, a1 = acked(cluster, name)
    c1 = cpu_secs(pids)
    cluster.api("POST", f"topologies/{name}/kill", {"wait_secs": 0})
    while cluster.worker_pids():
        time.sleep(0.2)
    return (a1 - a0) / (t1 - t0), (c1 - c0) / max(a1 - a0, 1)


def local_throughput(duration: float, pinned: bool, pending: int) -> tuple[float, float]:
    """The same topology in local mode, in a process of its own: pinned to one core as
    ``squall local`` pins itself, or free to move between cores.  Acked sentences per
    second, and the process's CPU seconds per sentence."""
    import json

    cmd = [sys.executable, __file__, "--local-child", "--duration", str(duration), "--pending", str(pending)]
    if pinned:
        cmd.append("--pinned")
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=REPO)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    return float(result["rate"]), float(result["cpu"])


def local_child(duration: float, pinned: bool, pending: int) -> None:
    import json

    sys.path.insert(0, str(BENCH.parent))
    from bench_wordcount import BenchWordCount

    from squall import LocalCluster
    from squall.cli.main import pin_local
    from squall.runtime.logging import configure_logging

    configure_logging("error")
    pin_local("auto" if pinned else "none")  # as squall local --cpu pins itself
    with LocalCluster() as local:
        runner = local.submit("bench", BenchWordCount, {"topology.max.spout.pending": pending})
        time.sleep(2)
        a0, t0, c0 = runner.stats()["sentences"]["acked"], time.monotonic(), time.process_time()
        time.sleep(duration)
        a1, t1, c1 = runner.stats()["sentences"]["acked"], time.monotonic(), time.process_time()
    print(json.dumps({"rate": (a1 - a0) / (t1 - t0), "cpu": (c1 - c0) / max(a1 - a0, 1)}))


def recovery(cluster: DevCluster, data: Path, rate: int) -> dict[str, Any]:
    import json
    import random

    data.mkdir()
    data.chmod(0o777)  # workers run as their topology's own user may write here (a shared dir)
    rng = random.Random(1)
    vocab = [f"w{i}" for i in range(200)]
    (data / "sentences.json").write_text(json.dumps([[str(i), " ".join(rng.choices(vocab, k=8))]
                                                     for i in range(rate * 60)]))
    topo = REPO / "tests" / "cluster" / "topologies" / "durable_wordcount.py"
    submit(cluster, topo, "recovery", "topology.workers=2", f"squall.test.rate={rate}",
           f"squall.test.dir={data}")

    def count() -> int:
        path = data / "acked.log"
        return path.read_text().count("\n") if path.exists() else 0

    while len(cluster.worker_pids()) < 2 or count() < rate * 2:
        time.sleep(0.05)
    t0, c0 = time.monotonic(), count()
    time.sleep(2)
    before_rate = (count() - c0) / (time.monotonic() - t0)
    slot, pid = max(cluster.worker_pids().items())
    killed_at = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    relaunched = resumed = None
    window: list[tuple[float, int]] = []
    while time.monotonic() - killed_at < 60 and resumed is None:
        now = time.monotonic()
        if relaunched is None and cluster.worker_pids().get(slot) not in (None, pid):
            relaunched = now - killed_at
        window.append((now, count()))
        window = [(t, c) for t, c in window if now - t <= 0.5]
        if relaunched is not None and len(window) > 1:
            rate_now = (window[-1][1] - window[0][1]) / (window[-1][0] - window[0][0] or 1)
            if rate_now >= before_rate / 2:
                resumed = now - killed_at
        time.sleep(0.02)
    return {"rate_before": before_rate, "relaunched_s": relaunched, "resumed_s": resumed}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=8.0)
    parser.add_argument("--security", choices=["both", "secure", "insecure"], default="both",
                        help="which dev clusters to measure (default: both, side by side)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="rounds of every configuration; the table shows medians")
    parser.add_argument("--pending", default="2000,5000",
                        help="topology.max.spout.pending per spout task, comma separated: every "
                             "configuration at each (default 2000,5000; see above)")
    parser.add_argument("--workers", default="2,4",
                        help="the cluster sizes to measure, comma separated (default 2,4)")
    parser.add_argument("--workers-as", choices=["both", "own", "supervisor"],
                        default="both" if os.geteuid() == 0 else "supervisor",
                        help="workers as their topology's own user (root only), the supervisor's, or both")
    parser.add_argument("--local-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--pinned", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    pendings = [int(p) for p in args.pending.split(",")]
    if args.local_child:
        local_child(args.duration, args.pinned, pendings[0])
        return 0
    modes = {"both": [True, False], "secure": [True], "insecure": [False]}[args.security]
    sizes = [int(w) for w in args.workers.split(",")]
    rows: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    paired: dict[str, list[float]] = {}  # each run / the pinned local run of its round
    pinned_of: dict[str, str] = {}  # a row's label -> the label of the pinned local row it is set against

    def at(label: str, pending: int) -> str:
        return f"{label}, pending {pending}" if len(pendings) > 1 else label

    def measure(label: str, pending: int, result: tuple[float, float]) -> None:
        rate, secs = result
        label = at(label, pending)
        pinned_of[label] = at(PINNED, pending)
        rows.setdefault(label, []).append(rate)
        cpu.setdefault(label, []).append(secs * 1e6)
        paired.setdefault(label, []).append(rate / rows[pinned_of[label]][-1])

    users = {"both": [True, False], "own": [True], "supervisor": [False]}[args.workers_as]
    recoveries: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="squall-bench-") as tmp:
        clusters = {}
        shared = Path(tmp) / "shared"
        shared.mkdir()
        shared.chmod(0o777)
        try:
            for secure in modes:
                for own in users:
                    label = ("CURVE" if secure else "plain") + (", own users" if own else "")
                    conf: dict[str, Any] = {"supervisor.run.worker.as.user": own}
                    if own:
                        conf["supervisor.worker.shared.dirs"] = [str(shared)]
                    clusters[label] = DevCluster(Path(tmp) / f"cluster-{len(clusters)}", supervisors=2,
                                                 slots=2, secure=secure, conf=conf)
                    clusters[label].start()
            # Rounds of every configuration in turn: a machine whose speed drifts (a VM's
            # does, by 10-20%) slows them alike, and the medians stay comparable.
            for _round in range(args.repeat):
                for pending in pendings:
                    measure(PINNED, pending, local_throughput(args.duration, True, pending))
                    if pending == pendings[0]:
                        measure(UNPINNED, pending, local_throughput(args.duration, False, pending))
                    for label, cluster in clusters.items():
                        for workers in sizes:
                            measure(f"cluster ({label}), {workers} workers on 2 nodes", pending,
                                    cluster_throughput(cluster, workers, args.duration, pending))
            for i, (label, cluster) in enumerate(clusters.items()):
                recoveries[label] = recovery(cluster, shared / f"recovery-{i}", rate=500)
        finally:
            for cluster in clusters.values():
                cluster.stop()
    print(f"word count (spout x2, split x2, count x2, acking on, max pending {args.pending} per spout task), "
          f"sentences acked per second, {args.repeat} round(s), median\n")
    spread = args.repeat > 1
    width = max(44, *(len(label) + 2 for label in rows))
    print(f"{'configuration':<{width}}{'sentences/s':>12}{'vs pinned local':>17}"
          + (f"{'per round':>11}" if spread else "") + f"{'CPU us/sentence':>17}"
          + ("      min - max" if spread else ""))
    print("-" * (width + (72 if spread else 46)))
    for label, values in rows.items():
        value = median(values)
        line = f"{label:<{width}}{value:>12,.0f}{value / median(rows[pinned_of[label]]):>16.2f}x"
        if spread:
            line += f"{median(paired[label]):>10.2f}x"
        line += f"{median(cpu[label]):>17.2f}"
        if spread:
            line += f"{min(values):>10,.0f} - {max(values):,.0f}"
        print(line)
    if spread:
        print("\neach cluster run against the pinned local run of its round:")
        for label, ratios in paired.items():
            if label.startswith("cluster"):
                print(f"  {label:<{width}}" + "  ".join(f"{r:.2f}x" for r in ratios))
    print("\nrecovery after SIGKILL of a worker (durable word count at 500 sentences/s):")
    print(f"  {'cluster':<24}{'rate before':>12}{'replacement running':>22}{'acks back to half':>20}")
    for label, rec in recoveries.items():
        running = f"{rec['relaunched_s']:.2f} s" if rec["relaunched_s"] is not None else "-"
        resumed = f"{rec['resumed_s']:.2f} s" if rec["resumed_s"] is not None else "not in 60 s"
        print(f"  {label:<24}{rec['rate_before']:>12.0f}{running:>22}{resumed:>20}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
