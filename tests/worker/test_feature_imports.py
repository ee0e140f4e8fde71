"""The engine imports no feature by name: a worker that runs none of a feature's components
never imports it, and one that runs them can decode the feature's wire types.

Features (transactional, ...) register the types their values cross as with
squall.worker.wire.value_types when they are imported; a worker imports its
components' classes before it receives anything.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from squall.runtime.ports import free_port
from squall.testing import poll_for
from squall.topology.component import ComponentSpec
from squall.topology.topology import Topology
from tests.worker.test_worker_process import ACKER, SINK, SOURCE, Workers, heartbeat

pytestmark = pytest.mark.timeout(60)

FEATURES = ("squall.transactional", "squall.state", "squall.windowing", "squall.spark", "squall.flux",
            "squall.contrib", "squall.trident", "squall.drpc")

# Components that write down, from inside the worker process, which feature packages it holds.
PROBE = f'''
import json
import os
import sys

from xtopo import Numbers, Sink

FEATURES = {FEATURES!r}


def record(conf, who):
    loaded = sorted(m for m in sys.modules if ".".join(m.split(".")[:2]) in FEATURES)
    path = os.path.join(conf["test.out"], f"modules-{{who}}-{{os.getpid()}}")
    with open(path + ".tmp", "w") as f:
        json.dump(loaded, f)
    os.replace(path + ".tmp", path)


class ProbeSpout(Numbers):
    def ack(self, n):
        super().ack(n)
        record(self.conf, "spout")


class ProbeSink(Sink):
    def process(self, tup):
        super().process(tup)
        record(self.conf, "sink")
'''


def probe_topology() -> dict:
    source = ComponentSpec("probe:ProbeSpout", "spout", outputs=["n"])
    sink = ComponentSpec("probe:ProbeSink", "bolt", inputs=[source], outputs=[])
    return Topology.from_specs("numbers", {"source": source, "sink": sink}).definition().to_dict()


@pytest.fixture
def workers(tmp_path: Path):
    w = Workers(tmp_path)
    (w.code / "probe.py").write_text(PROBE)
    try:
        yield w
    finally:
        w.kill_all()


def test_worker_processes_of_a_plain_topology_import_no_feature(workers: Workers) -> None:
    # Given a plain topology over two worker processes (spout and acker in a, the sink in b),
    a_addr, b_addr = f"zmq+tcp://127.0.0.1:{free_port()}", f"zmq+tcp://127.0.0.1:{free_port()}"
    routes = {1: a_addr, 3: a_addr, 2: b_addr}
    conf = {"test.count": 100}
    a = workers.write("a", workers.assignment("a", a_addr, [SOURCE, ACKER], routes, conf, probe_topology()))
    b = workers.write("b", workers.assignment("b", b_addr, [SINK], routes, conf, probe_topology()))
    for d in (a, b):
        workers.launch(d)
    # When every tuple crossed to b and its ack came back to a
    poll_for(lambda: len(workers.acked()) == 100, timeout=20, message="100 acks at the spout")
    poll_for(lambda: (h := heartbeat(b)) and h["transfer"]["frames_received"] > 0, timeout=5,
             message="b's heartbeat to count frames received")
    # Then neither process imported squall.transactional, nor any other feature
    records = {p.name.split("-")[1]: json.loads(p.read_text()) for p in workers.out.glob("modules-*")}
    assert set(records) == {"spout", "sink"}
    assert records == {"spout": [], "sink": []}


def test_local_mode_running_a_plain_topology_does_not_import_transactional() -> None:
    # Two workers in one process: tuples cross the in-process transport as msgpack frames.
    code = """
import sys
from squall import Bolt, LocalCluster, Spout, Topology
from squall.testing import poll_for

class Count(Spout):
    outputs = ["n"]
    def initialize(self, conf, context):
        self.n = 0
    def next_tuple(self):
        if self.n < 200:
            self.emit([self.n], tup_id=self.n)
            self.n += 1

class Seen(Bolt):
    def process(self, tup):
        pass

class Plain(Topology):
    config = {"topology.workers": 2}
    count = Count.spec(par=2)
    seen = Seen.spec(par=2, inputs=[count])

with LocalCluster() as cluster:
    cluster.submit("plain", Plain)
    poll_for(lambda: cluster.stats("plain")["count"]["acked"] == 400, timeout=30, message="acks")
print(sorted(m for m in sys.modules if m.startswith("squall.transactional")))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_a_worker_running_a_transactional_component_registers_its_wire_type_before_it_starts() -> None:
    # A worker built for one bolt of a transactional topology, in a process that has not imported
    # squall.transactional; an acker-only worker of the same topology does not import it.
    code = """
import json, sys
from squall.topology.topology import definition_from_dict
from squall.worker.plan import plan_topology
from squall.worker.wire.transport import InprocTransport
from squall.worker.wire.value_types import registered
from squall.worker.worker import Worker
from squall.clock import Clock

plan = plan_topology(definition_from_dict(json.loads(sys.stdin.read())))
by_component = {e.component: e for e in plan.executors}
where = {t: "inproc://other" for t in plan.task_component}

def build(component):
    mine = [by_component[component]]
    local = {t: "inproc://me" for t in mine[0].tasks}
    return Worker(plan, mine, "inproc://me", {**where, **local}, InprocTransport(), Clock())

build("__acker")
before = "squall.transactional" in sys.modules
build("split")
print(json.dumps([before, [(w.code, w.cls.__qualname__) for w in registered()]]))
"""
    from tests.transactional.topologies import WordCount

    topology = json.dumps(WordCount.definition().to_dict())
    out = subprocess.run([sys.executable, "-c", code], input=topology, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    before, types = json.loads(out.stdout.strip().splitlines()[-1])
    assert before is False
    assert types == [[17, "TransactionAttempt"]]


def test_every_component_a_transactional_topology_delivers_to_is_a_transactional_class() -> None:
    # What importing a worker's own component classes rests on: the tuples of a transactional
    # topology (each led by a TransactionAttempt) reach only squall.transactional's classes.
    from tests.transactional.topologies import WordCount

    definition = WordCount.definition()
    receivers = [c for c in definition.components.values() if c.inputs]
    assert receivers
    for cdef in receivers:
        ref = cdef.cls if isinstance(cdef.cls, str) else f"{cdef.cls.__module__}:{cdef.cls.__qualname__}"
        assert ref.startswith("squall.transactional."), ref
