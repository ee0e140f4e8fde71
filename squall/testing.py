"""Helpers for users' own tests (and ours).

``complete_topology`` is Storm's ``Testing.completeTopology``: it replaces
spouts with fixed lists of tuples, runs the topology in local mode until
every one of them is fully processed, and returns every tuple each
component emitted.

    result = complete_topology(WordCount, mock_sources={"sentences": [["a b"], ["b"]]})
    assert sorted(result["split"]) == [["a"], ["b"], ["b"]]
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from squall.errors import ComponentError, SquallError
from squall.local.cluster import LocalCluster, definition_of
from squall.topology.component import DEFAULT_STREAM, Spout
from squall.topology.loading import CONSTRUCT_OPTION
from squall.topology.topology import TopologyDef
from squall.worker.executors.reporting import ErrorRecord


def poll_for(predicate: Callable[[], Any], timeout: float = 10.0, message: str = "condition",
             interval: float = 0.01) -> Any:
    """Wait until ``predicate()`` is truthy and return it; fail with ``message`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            msg = f"timed out after {timeout}s waiting for {message}"
            raise AssertionError(msg)
        time.sleep(interval)


def wait_for_progress(measure: Callable[[], float], target: float, stall: float = 60.0,
                      message: str = "progress", interval: float = 0.05) -> float:
    """Wait until ``measure()`` reaches ``target``; fail only when it has not moved for
    ``stall`` seconds.  A busy machine is slow, not stuck: a fixed budget for the whole
    wait is what it misses, a stall is what a real fault looks like."""
    last = measure()
    moved = time.monotonic()
    while last < target:
        time.sleep(interval)
        value = measure()
        if value != last:
            last, moved = value, time.monotonic()
        elif time.monotonic() - moved > stall:
            msg = f"no progress for {stall}s waiting for {message}: stuck at {last} of {target}"
            raise AssertionError(msg)
    return last


class _Progress:
    """How far the mock spouts got: shared by every mock task of one run."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.settled = 0
        self.acked: list[Any] = []
        self.failed: list[Any] = []
        self._lock = threading.Lock()

    def settle(self, ok: bool, msg_id: Any) -> None:
        with self._lock:
            (self.acked if ok else self.failed).append(msg_id)
            self.settled += 1

    @property
    def done(self) -> bool:
        return self.settled >= self.total


class MockSpout(Spout):
    """Emits a fixed list of (stream, values); each task takes every n-th item."""

    items: list[tuple[str, list[Any]]] = []
    progress: _Progress
    component: str = ""

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        n = len(context.this_component_tasks)
        i = context.this_task_index
        self._todo = [(k, item) for k, item in enumerate(self.items) if k % n == i]
        self._next = 0

    def next_tuple(self) -> None:
        if self._next < len(self._todo):
            k, (stream, values) = self._todo[self._next]
            self._next += 1
            self.emit(list(values), tup_id=(self.component, k), stream=stream)

    def ack(self, tup_id: Any) -> None:
        self.progress.settle(True, tup_id)

    def fail(self, tup_id: Any) -> None:
        self.progress.settle(False, tup_id)


class CompletedTopology:
    def __init__(self, tuples: dict[tuple[str, str], list[list[Any]]], acked: list[Any],
                 failed: list[Any], errors: list[ErrorRecord]) -> None:
        self._tuples = tuples
        self.acked = acked
        self.failed = failed
        self.errors = errors

    def tuples(self, component: str, stream: str = DEFAULT_STREAM) -> list[list[Any]]:
        return list(self._tuples.get((component, stream), []))

    def __getitem__(self, component: str) -> list[list[Any]]:
        return self.tuples(component)

    def __repr__(self) -> str:
        counts = {f"{c}/{s}": len(v) for (c, s), v in self._tuples.items()}
        return f"CompletedTopology(emitted={counts}, acked={len(self.acked)}, failed={len(self.failed)})"


def _mock_items(name: str, source: Any) -> list[tuple[str, list[Any]]]:
    if isinstance(source, Mapping):
        return [(stream, list(v)) for stream, rows in source.items() for v in rows]
    return [(DEFAULT_STREAM, list(v)) for v in source]


def _with_mocks(defn: TopologyDef, mock_sources: Mapping[str, Any], progress: _Progress) -> TopologyDef:
    components = dict(defn.components)
    for name, source in mock_sources.items():
        cdef = components.get(name)
        if cdef is None or cdef.kind != "spout":
            msg = f"mock_sources names {name!r}, which is not a spout of {defn.name}"
            raise SquallError(msg)
        items = _mock_items(name, source)
        for stream, _values in items:
            if stream not in cdef.streams:
                msg = f"mock_sources for {name!r} use stream {stream!r}, which it does not declare"
                raise SquallError(msg)
        cls = type(f"Mock{name.title()}", (MockSpout,),
                   {"items": items, "progress": progress, "component": name, "outputs": None})
        # The mock replaces the spout whole: a recipe that would build the user's instance
        # (a Flux construct, a spout given by value) goes with it.
        options = {k: v for k, v in cdef.options.items() if k != CONSTRUCT_OPTION}
        components[name] = replace(cdef, cls=cls, options=options)
    return replace(defn, components=components)


def complete_topology(topology: Any, mock_sources: Mapping[str, Any] | None = None,
                      conf: dict[str, Any] | None = None, timeout: float = 60.0,
                      fail_fast: bool = True, name: str = "complete") -> CompletedTopology:
    """Run until every mock tuple is acked or failed and the topology is idle.

    With ``fail_fast`` an error any component reported is re-raised here as
    :class:`ComponentError` (the original exception chained), so a test sees
    its bolt's bug rather than a missing tuple.
    """
    defn = definition_of(topology)
    mock_sources = dict(mock_sources or {})
    total = sum(len(_mock_items(n, s)) for n, s in mock_sources.items())
    progress = _Progress(total)
    defn = _with_mocks(defn, mock_sources, progress)
    captured: dict[tuple[str, str], list[list[Any]]] = {}
    lock = threading.Lock()

    def capture(component: str, stream: str, values: Any) -> None:
        with lock:
            captured.setdefault((component, stream), []).append(list(values))

    with LocalCluster() as cluster:
        runner = cluster.submit(name, defn, conf, capture=capture)

        def finished() -> bool:
            if fail_fast and any(e.fatal for e in runner.errors):
                return True
            # Idle twice, a moment apart: nothing was in flight between the looks.
            if progress.done and runner.idle():
                time.sleep(0.02)
                return runner.idle()
            return False

        poll_for(finished, timeout, f"all {total} mock tuples of {defn.name} to be processed "
                 f"({progress.settled} settled)")
        errors = list(runner.errors)
    if fail_fast and errors:
        first = errors[0]
        msg = f"component {first.component!r} task {first.task} raised {first.error}"
        raise ComponentError(msg) from first.exception
    with lock:
        tuples = {k: list(v) for k, v in captured.items()}
    return CompletedTopology(tuples, list(progress.acked), list(progress.failed), errors)
