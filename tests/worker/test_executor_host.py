"""Executors see the worker only through ExecutorHost: the worker implements all of it, and no
executor module imports the worker (the worker imports them, so there is no circle)."""

from __future__ import annotations

import ast
from pathlib import Path

import squall
from squall.clock import Clock
from squall.topology.component import ComponentSpec
from squall.topology.topology import Topology
from squall.worker.executors.host import ExecutorHost
from squall.worker.plan import plan_topology
from squall.worker.worker import Worker

EXECUTOR_MODULES = ("executor", "component", "spout", "bolt", "acker", "emit")


def host_members() -> set[str]:
    methods = {name for name, value in vars(ExecutorHost).items()
               if callable(value) and not name.startswith("_")}
    return set(ExecutorHost.__annotations__) | methods


def test_the_worker_offers_every_member_of_the_interface() -> None:
    source = ComponentSpec("tests.helpers:BrokerSpout", "spout", outputs=["n"])
    plan = plan_topology(Topology.from_specs("t", {"source": source}).definition())
    worker = Worker(plan, plan.executors, "inproc://host-test", {}, None, Clock())
    missing = [name for name in sorted(host_members()) if not hasattr(worker, name)]
    assert not missing
    assert host_members() >= {"send_data", "send_control", "die", "clock", "plan"}


def test_no_executor_module_imports_the_worker() -> None:
    root = Path(squall.__file__).parent / "worker" / "executors"  # the sources (the modules may be compiled)
    for name in EXECUTOR_MODULES:
        tree = ast.parse((root / f"{name}.py").read_text())
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        imported |= {a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
        assert "squall.worker.worker" not in imported, name
        assert not any(m and m.startswith("squall.worker.process.lifecycle") for m in imported), name
