"""LocalCluster: run topologies in this process, no ZooKeeper, no JVM.

    with LocalCluster() as cluster:
        cluster.submit("wc", WordCount)
        ...
"""

from __future__ import annotations

import socket
import threading
from typing import Any

import structlog

from squall.clock import Clock
from squall.cluster.fenced_state import BACKEND_RESOURCE, MemoryBackend
from squall.errors import SquallError, TopologyValidationError
from squall.local.runner import LocalTopology
from squall.nimbus.admission import check_name, plan_submission
from squall.topology.class_check import verify_loadable
from squall.topology.topology import Topology, TopologyDef
from squall.worker.executors.reporting import ErrorRecord

log = structlog.get_logger("squall.local.LocalCluster")


def definition_of(topology: Any) -> TopologyDef:
    if isinstance(topology, TopologyDef):
        return topology
    if isinstance(topology, type) and issubclass(topology, Topology):
        return topology.definition()
    if isinstance(topology, Topology):
        return type(topology).definition()
    msg = f"expected a Topology subclass, got {topology!r}"
    raise TopologyValidationError(msg)


class LocalCluster:
    def __init__(self, conf: dict[str, Any] | None = None, clock: Clock | None = None,
                 node: str = "local") -> None:
        self.conf = dict(conf or {})
        self.clock = clock or Clock()
        self.node = node
        self._topologies: dict[str, LocalTopology] = {}
        # Transactional topologies' state (current txids, batch metadata): kept
        # for the life of this cluster, so a resubmission continues where the
        # killed topology stopped, as it would with ZooKeeper.
        root = self.conf.get("transactional.zookeeper.root") or "/transactional"
        self.transactional_state = MemoryBackend(root)
        self._lock = threading.Lock()

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def submit(self, name: str, topology: Any, conf: dict[str, Any] | None = None,
               capture: Any = None) -> LocalTopology:
        check_name(name)
        defn = definition_of(topology)
        verify_loadable(defn)
        # Nimbus's checks (squall.nimbus.admission): a conf a cluster refuses is refused here,
        # at submit, not by a worker crash-looping on it.  One host: this one.
        plan, _warnings = plan_submission(name, defn, {} if conf is None else conf, [socket.gethostname()],
                                          log, base=self.conf)
        plan.name = name
        with self._lock:
            if name in self._topologies:
                msg = f"a topology named {name!r} is already running"
                raise TopologyValidationError(msg)
            runner = LocalTopology(plan, self.clock, node=self.node, capture=capture,
                                   resources={BACKEND_RESOURCE: self.transactional_state})
            self._topologies[name] = runner
        runner.start()
        return runner

    def topology(self, name: str) -> LocalTopology:
        runner = self._topologies.get(name)
        if runner is None:
            msg = f"no topology named {name!r} is running (running: {sorted(self._topologies)})"
            raise SquallError(msg)
        return runner

    def kill(self, name: str, wait: float = 0.0) -> None:
        """Deactivate, let pending tuples drain for ``wait`` seconds, then stop."""
        runner = self.topology(name)
        if wait > 0:
            runner.set_active(False)
            self.clock.sleep_until(self.clock.now() + wait, threading.Event())
        runner.stop("killed", orderly=True)
        with self._lock:
            self._topologies.pop(name, None)

    def topologies(self) -> dict[str, LocalTopology]:
        """name -> runner, of the topologies running now (a copy: kills may follow)."""
        with self._lock:
            return dict(self._topologies)

    def activate(self, name: str) -> None:
        self.topology(name).set_active(True)

    def deactivate(self, name: str) -> None:
        self.topology(name).set_active(False)

    def stats(self, name: str) -> dict[str, dict[str, Any]]:
        return self.topology(name).stats()

    def metrics(self, name: str) -> dict[str, dict[str, Any]]:
        """component -> task -> the task's own metrics (``self.metrics`` in components)."""
        return self.topology(name).metrics()

    def errors(self, name: str) -> list[ErrorRecord]:
        return list(self.topology(name).errors)

    def shutdown(self) -> None:
        with self._lock:
            runners = list(self._topologies.values())
            self._topologies.clear()
        for runner in runners:
            runner.stop("cluster-shutdown", orderly=True)
