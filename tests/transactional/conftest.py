"""The transactional tests' shared fixture: a :class:`Run` per test, unregistered after it."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import pytest

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
