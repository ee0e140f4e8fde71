"""The package's public names: every one resolves, and a multilang child
imports none of the parent side (a Python child starts once per restart,
and per task: its import time is start-up latency)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest


@pytest.mark.parametrize("package", ["squall", "squall.drpc", "squall.multilang", "squall.state",
                                     "squall.transactional", "squall.windowing"])
def test_every_exported_name_resolves_to_its_module_object(package: str) -> None:
    module = importlib.import_module(package)
    assert set(module.__all__) == set(module._EXPORTS)
    for name in module.__all__:
        source = importlib.import_module(module._EXPORTS[name])
        assert getattr(module, name) is getattr(source, name)
    assert set(module.__all__) <= set(dir(module))
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = module.Nope


def test_a_python_child_imports_no_parent_side_module() -> None:
    code = ("import sys, squall.multilang.child; "
            "print(sorted(m for m in "
            "('squall.local', 'squall.worker', 'squall.topology', 'structlog', 'zmq') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_from_imports_still_work_for_users() -> None:
    code = ("from squall import Bolt, LocalCluster, Topology; from squall.multilang import ShellBolt; "
            "print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "ok"
