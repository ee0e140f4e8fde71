"""The transactional tests' shared fixture: a :class:`Run` per test, unregistered after it."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from squall.cluster.zookeeper import DevZookeeper
from squall.runtime.ports import free_port
from tests.transactional.topologies import RUNS, Run

_names = itertools.count()


@pytest.fixture
def run() -> Iterator[Callable[..., Run]]:
    """``run(**knobs)`` makes a registered Run; every gate is opened and every run dropped afterwards."""
    made: list[str] = []

    def make(**knobs: Any) -> Run:
        name = f"run-{next(_names)}"
        made.append(name)
        return Run(name, **knobs)

    yield make
    for name in made:
        RUNS[name].commit_gate.set()
        del RUNS[name]


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevZookeeper]:
    """One embedded ZooKeeper per test module (each test uses a root of its own)."""
    tmp: Path = tmp_path_factory.mktemp("zk")
    zk = DevZookeeper(free_port(), tmp / "data", tmp / "zk.log")
    zk.start()
    yield zk
    zk.stop()
