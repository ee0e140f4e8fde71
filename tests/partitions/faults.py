"""One seeded schedule of one fault class against a cluster in namespaces, judged: the
body of the partition suite's tests (test_faults_*.py, split so that two processes
run them side by side) and of benchmarks/partitions.py's longer runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.partitions.cluster import NetnsCluster
from tests.partitions.nemesis import Timing, schedule
from tests.partitions.workload import AtLeastOnce, ExactlyOnce, Run, TridentCount, run

# Faults as short as CI can afford, still past every timeout they should trip: the dev
# cluster's session is 6 s, its worker and task timeouts 10 s, so nimbus moves the workers
# of a supervisor gone silent after 16 s (its ZooKeeper node gone at 6, then the timeout).
CI_TIMING = Timing(gap=(3.0, 5.0), fault=(18.0, 22.0), pause_min=18.0)
CI_LENGTH = 28.0  # one fault: gap + fault fit, a second does not
CLUSTER_CONF = {"supervisor.run.worker.as.user": False}


def one_fault_run(root: Path, fault: str, seed: int, *, broken: bool = False, trident: bool = False,
                  length: float = CI_LENGTH, timing: Timing = CI_TIMING, skewable: bool = False,
                  **run_args: Any) -> tuple[Run, list[Any]]:
    """A cluster of three supervisors (three slots each) and two nimbuses, the
    at-least-once and the transactional word count (with ``broken``, also the
    at-least-once count that drops 1% of its words; with ``trident``, the Trident count
    read through DRPC), one schedule of ``fault`` (one fault in the CI's ``length``,
    several in a longer one)."""
    with NetnsCluster(root / "cluster", supervisors=3, nimbuses=2, drpc=trident, slots=3,
                      conf=CLUSTER_CONF, skewable=skewable) as cluster:
        events = schedule(seed, [fault], cluster.nodes(), length=length, timing=timing)
        if not events:
            msg = f"the schedule of {fault} (seed {seed}) holds no fault in {length}s"
            raise ValueError(msg)
        workloads = [AtLeastOnce(root, "alo", ["topology.workers=2"]),
                     ExactlyOnce(root, "eo", ["topology.workers=2"])]
        if trident:
            workloads.append(TridentCount(root, "trident", ["topology.workers=2"]))
        if broken:
            workloads.append(AtLeastOnce(root, "alo-broken",
                                         ["topology.workers=1", "squall.test.drop.every=100"]))
        result = run(cluster, workloads, events, **run_args)
        result.write(root)
        return result, events
