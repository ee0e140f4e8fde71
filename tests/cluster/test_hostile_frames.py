"""Hostile frames against a real (secure) dev cluster's workers, while a word
count runs: strangers are refused at the handshake, an insider's malformed
frames are dropped and counted, and the counts stay exact."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import msgpack

from squall.security import curve
from squall.testing import poll_for
from squall.topology.topology import definition_from_dict
from squall.worker.plan import TopologyPlan, plan_topology
from squall.worker.wire.transfer import WORKER_TASK
from squall.worker.wire.zmq_transport import ZmqTransport
from tests.cluster.conftest import WordCountRun

MAX_MESSAGE_BYTES = 1 << 20


class Target:
    """One worker of the running topology, seen from outside through its directory."""

    def __init__(self, directory: Path, pid: int) -> None:
        self.dir = directory
        self.pid = pid
        assignment = json.loads((directory / "assignment.json").read_text())
        self.address: str = assignment["address"]
        self.plan: TopologyPlan = plan_topology(definition_from_dict(assignment["topology"]),
                                                overrides=assignment["conf"])
        self.tasks = [t for first, last in assignment["executors"] for t in range(first, last + 1)]

    def transfer(self) -> dict[str, Any]:
        try:
            return json.loads((self.dir / "heartbeat.json").read_text()).get("transfer", {})
        except (OSError, ValueError):
            return {}

    def tasks_of(self, kind: str) -> list[int]:
        return [t for t in self.tasks if self.plan.components[self.plan.task_component[t]].kind == kind]


def forged_frames(target: Target) -> list[bytes]:
    """What an attacker would like a worker to act on: a tuple, a deactivate, a backpressure."""
    plan = target.plan
    spout = plan.component_tasks["sentences"][0]
    split = plan.component_tasks["split"][0]
    frames = [msgpack.packb([["data", split, [[None, spout, "default", ["0", "forged words here"], None]]]]),
              msgpack.packb([["bp", WORKER_TASK, [target.address, True]]])]
    frames += [msgpack.packb([["deactivate", t, None]]) for t in plan.component_tasks["sentences"]]
    return frames


def malformed_frames(target: Target) -> list[bytes]:
    plan = target.plan
    spout = plan.component_tasks["sentences"][0]
    split = plan.component_tasks["split"][0]
    acker = plan.acker_tasks[0]
    return [
        b"\xc1 not msgpack",
        msgpack.packb([["deactivate", spout, None], ["tick", split, None], ["call", split, None],
                       ["activate", spout, None]]),
        msgpack.packb([["data", split, [[1, spout, "default", ["only one field"], {1: 1}]]]]),
        msgpack.packb([["ack", acker, [["root", 1]]]]),
        msgpack.packb([["bp", WORKER_TASK, ["nobody"]]]),
        msgpack.packb([["acked", split, [1, 2, 3]]]),
    ]


def send(transport: ZmqTransport, address: str, frames: list[bytes]) -> None:
    out = transport.connect(address)
    for frame in frames:
        out.send(frame)
    time.sleep(0.5)  # a PUSH hands frames to its I/O thread: let them go before closing (linger 0)
    out.close()


def test_hostile_frames_change_nothing(make_cluster: Any, tmp_path: Path) -> None:
    # Given a secure cluster running a word count over two workers
    cluster = make_cluster(supervisors=1, slots=2)
    assert cluster.secure
    run = WordCountRun(tmp_path / "wc", sentences=1500)
    run.submit(cluster, "hostile", "topology.workers=2", "squall.test.rate=150",
               f"zmq.max.message.bytes={MAX_MESSAGE_BYTES}")
    poll_for(lambda: len(cluster.worker_pids()) == 2, timeout=60, message="2 workers up")
    poll_for(lambda: len(run.acked()) > 50, timeout=60, message="processing started")
    targets = [Target(cluster.supervisor_dir(i) / "workers" / str(port), pid)
               for (i, port), pid in sorted(cluster.worker_pids().items())]

    # When processes without the topology's key connect to the workers' slots and forge frames
    for keys in (None, curve.raw(curve.new_keypair())):
        stranger = ZmqTransport(curve=keys)
        for target in targets:
            send(stranger, target.address, forged_frames(target))
        stranger.close()
    # Then every handshake is refused and counted, and nothing was received
    for target in targets:
        poll_for(lambda t=target: t.transfer().get("auth_rejected", 0) >= 2, timeout=30,
                 message=f"{target.address} to count the refused handshakes")
        assert sum(target.transfer().get("rejected", {}).values()) == 0

    # When an insider (who read a worker's secrets.json) sends malformed and control frames
    secrets = json.loads((targets[0].dir / "secrets.json").read_text())
    insider = ZmqTransport(curve=curve.raw(secrets["curve"]))
    for target in targets:
        send(insider, target.address, malformed_frames(target))
        # and a frame over zmq.max.message.bytes
        send(insider, target.address, [b"\x00" * (2 * MAX_MESSAGE_BYTES)])
    insider.close()
    # Then each is dropped and counted by reason in the heartbeat, the oversize one as a dropped connection
    for target in targets:
        def counted(t: Target = target) -> bool:
            stats = t.transfer()
            r = stats.get("rejected", {})
            # A message for a task this worker does not hold counts as "task" before its shape is read.
            return (r.get("undecodable", 0) >= 1 and r.get("kind", 0) >= 4
                    and r.get("shape", 0) + r.get("task", 0) >= 4
                    and stats.get("connections_dropped", 0) >= 1)

        try:
            poll_for(counted, timeout=30, message=f"{target.address} to count the malformed frames")
        except AssertionError as e:
            raise AssertionError(f"{e}: {target.transfer()}") from None

    # And the workers are the same processes, the topology never stopped, the counts are exact
    assert {pid for pid in cluster.worker_pids().values()} == {t.pid for t in targets}
    poll_for(run.done, timeout=120, message="all sentences acked")
    assert run.counts() == run.expected
    assert {pid for pid in cluster.worker_pids().values()} == {t.pid for t in targets}
