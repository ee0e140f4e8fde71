"""From ``squall submit --requirements`` to the topology's first ack: a cold environment
cache, a warm one, and no requirements at all.

    python benchmarks/envs.py [--rounds 3] [--supervisors 2] [--insecure]

Starts a real dev cluster (ZooKeeper JVM, nimbus, ``--supervisors`` supervisors with two
slots each; secure by default) and submits benchmarks/topologies/first_ack.py with the
``squall`` CLI, as a user would, timing from the command's start to the spout's first
acked tuple (the spout writes the time).  Its requirements are local wheels (no network,
so the numbers are venv's and pip's, not an index's): each cold round asks for a package
no environment has yet (``sqbenchN``, so nimbus and every supervisor build afresh), each
warm round for the same requirements again (every node's cache has them).  The bolt imports
the package in the workers.  Each topology is killed before the next round (not timed).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from squall.cli.devcluster import DevCluster  # noqa: E402
from squall.testing import poll_for  # noqa: E402
from tests.helpers import make_wheel  # noqa: E402

TOPOLOGY = REPO / "benchmarks" / "topologies" / "first_ack.py"


def squall(cluster: DevCluster, *args: str) -> str:
    argv = [sys.executable, "-m", "squall.cli", args[0], "--config", str(cluster.config_file), *args[1:]]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=900, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, check=False)
    if proc.returncode != 0:
        msg = f"squall {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"
        raise RuntimeError(msg)
    return proc.stdout


def first_ack(cluster: DevCluster, work: Path, name: str, requirements: Path | None,
              package: str | None) -> float:
    """Seconds from `squall submit` to the first ack."""
    args = ["submit", str(TOPOLOGY), "--name", name, "--conf", f"squall.test.dir={work}",
            "--conf", "topology.workers=2"]
    if requirements is not None:
        args += ["--requirements", str(requirements), "--conf", f'squall.bench.imports=["{package}"]']
    started = time.time()
    squall(cluster, *args)
    acked = poll_for(lambda: (work / f"{name}.ack").exists() and (work / f"{name}.ack").read_text(),
                     timeout=300, message=f"{name}'s first ack", interval=0.02)
    seconds = float(acked) - started
    squall(cluster, "kill", name, "-w", "0")
    poll_for(lambda: name not in squall(cluster, "list"), timeout=60, message=f"{name} gone")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--supervisors", type=int, default=2)
    parser.add_argument("--insecure", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="squall-envs-bench-") as tmp:
        work = Path(tmp)
        wheels = work / "wheels"
        wheels.mkdir()
        for i in range(args.rounds + 1):
            make_wheel(wheels, f"sqbench{i}", "1.0")
        cluster = DevCluster(work / "c", supervisors=args.supervisors, slots=2, secure=not args.insecure,
                             conf={"supervisor.run.worker.as.user": False,
                                   "squall.env.build.paths": [str(wheels)]})  # the admin allows the wheels
        times: dict[str, list[float]] = {"no requirements": [], "cold cache": [], "warm cache": []}
        try:
            cluster.start()
            warm = work / "warm.txt"
            warm.write_text(f"--no-index\n--find-links {wheels}\nsqbench{args.rounds}==1.0\n")
            first_ack(cluster, work, "prime", warm, f"sqbench{args.rounds}")  # every node has it now
            for i in range(args.rounds):
                times["no requirements"].append(first_ack(cluster, work, f"plain{i}", None, None))
                cold = work / f"cold{i}.txt"
                cold.write_text(f"--no-index\n--find-links {wheels}\nsqbench{i}==1.0\n")
                times["cold cache"].append(first_ack(cluster, work, f"cold{i}", cold, f"sqbench{i}"))
                times["warm cache"].append(
                    first_ack(cluster, work, f"warm{i}", warm, f"sqbench{args.rounds}"))
        finally:
            cluster.stop()
    print(f"submit --requirements to first ack, {args.supervisors} supervisors, "
          f"{'insecure' if args.insecure else 'secure'}, {args.rounds} rounds (seconds)")
    print(f"{'case':<18}{'median':>8}{'min':>8}{'max':>8}")
    for case, values in times.items():
        print(f"{case:<18}{median(values):>8.2f}{min(values):>8.2f}{max(values):>8.2f}")


if __name__ == "__main__":
    main()
