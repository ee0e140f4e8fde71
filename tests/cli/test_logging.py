"""Log events from executor threads say who logged them: node, topology,
component and task, as JSON lines when configured so."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from squall import Bolt, LocalCluster, Spout, Topology
from squall.runtime.logging import configure_logging
from squall.testing import poll_for


class LockedStream:
    """A StringIO that several threads may write to at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._parts: list[str] = []

    def write(self, text: str) -> int:
        with self._lock:
            self._parts.append(text)
        return len(text)

    def flush(self) -> None:
        pass

    def events(self) -> list[dict[str, Any]]:
        with self._lock:
            text = "".join(self._parts)
        return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.fixture
def log_stream() -> Iterator[LockedStream]:
    stream = LockedStream()
    configure_logging(level="info", json=True, stream=stream)
    try:
        yield stream
    finally:
        structlog.reset_defaults()


class Numbers(Spout):
    outputs = ["n"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.i = 0

    def next_tuple(self) -> None:
        if self.i < 6:
            self.i += 1
            self.emit([self.i])


class Greeter(Bolt):
    def process(self, tup: Any) -> None:
        if tup.values.n == 6:
            raise RuntimeError("six is too many")
        self.logger.info("hello", n=tup.values.n)
        self.logger.debug("below the level", n=tup.values.n)


class Greetings(Topology):
    numbers = Numbers.spec()
    greeter = Greeter.spec(inputs=[numbers], par=2, tasks=2)


def test_component_log_events_carry_where_they_come_from(log_stream: LockedStream) -> None:
    # Given JSON logging and a topology whose bolt logs "hello" per tuple (2 tasks)
    with LocalCluster(node="node-7") as cluster:
        runner = cluster.submit("greetings", Greetings)
        tasks = runner.plan.component_tasks["greeter"]

        def hellos() -> list[dict[str, Any]]:
            return [e for e in log_stream.events() if e.get("event") == "hello"]

        poll_for(lambda: len(hellos()) == 5, message="5 hello events")
        poll_for(lambda: cluster.errors("greetings"), message="the error report")

    # Then each user event says node, topology, component and task, with its own fields
    events = hellos()
    assert sorted(e["n"] for e in events) == [1, 2, 3, 4, 5]
    for event in events:
        assert event["node"] == "node-7"
        assert event["topology"] == "greetings"
        assert event["component"] == "greeter"
        assert event["task"] in tasks
        assert event["level"] == "info"
    # (both tasks logged, each under its own id)
    assert {e["task"] for e in events} == set(tasks)
    # And events below the level are dropped
    assert not [e for e in log_stream.events() if e.get("event") == "below the level"]

    # And Squall's own events from an executor thread carry the same context
    errors = [e for e in log_stream.events() if e.get("event") == "component error"]
    assert len(errors) == 1
    assert errors[0]["node"] == "node-7"
    assert errors[0]["topology"] == "greetings"
    assert errors[0]["component"] == "greeter"
    assert errors[0]["task"] in tasks
    assert "six is too many" in errors[0]["error"]

    # While events from the caller's thread are not mislabelled as a component's
    started = [e for e in log_stream.events() if e.get("event") == "worker started"]
    assert started and all("component" not in e for e in started)


@pytest.mark.parametrize("json_lines", [True, False])
def test_a_secret_inside_an_exception_is_redacted_in_its_traceback(json_lines: bool) -> None:
    stream = LockedStream()
    configure_logging(level="info", json=json_lines, stream=stream)
    try:
        try:
            msg = "cannot reach redis://:s3cr3t-pw@cache:6379/0 (token=abc123)"
            raise ConnectionError(msg)
        except ConnectionError:
            structlog.get_logger("test").exception("store failed", password="hunter2")
    finally:
        structlog.reset_defaults()
    with stream._lock:
        text = "".join(stream._parts)
    assert "ConnectionError" in text and "Traceback" in text  # the trace is there
    for secret in ("s3cr3t-pw", "abc123", "hunter2"):
        assert secret not in text
