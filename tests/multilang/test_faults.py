"""Ill-typed and oversize messages from real children: each is a protocol fault.

The bad message is reported (naming the component and what was wrong), the
child is killed and replaced, what it had in flight fails, and the worker
and its executors carry on: later tuples go through the new child.
"""

from __future__ import annotations

from typing import Any

import pytest

from squall.multilang.codec import MAX_MESSAGE_KEY
from squall.testing import poll_for
from tests.multilang.harness import (
    ADAPTERS,
    Probe,
    bolt_topology,
    errors,
    pid_alive,
    running,
    shell,
    spout_topology,
)

FAST = {"topology.subprocess.timeout.secs": 1, "supervisor.worker.restart.backoff.initial.secs": 0.05}
CAP = 64 * 1024


def fatal(runner: Any) -> list[Any]:
    return [e for e in list(runner.errors) if e.fatal]


def fault_restarts(runner: Any, probe: Probe, cmd: str, arg: Any, text: str, restarts: int) -> None:
    """Send one faulty command; wait for its report, its tuple's failure and the new child."""
    bolt = shell(runner)
    pid = bolt.proc.pid
    before = len(errors(runner, "ChildDied"))
    fault = probe.put(cmd, arg)
    reports = poll_for(lambda: errors(runner, "ChildDied")[before:], 5, f"{text!r} reported")
    [report] = reports
    assert text in report.error, report.error
    assert report.component == "shell" and "component: shell" in report.error and not report.fatal
    poll_for(lambda: probe.settled(fault), 5, "the faulty tuple")
    assert fault in probe.failed
    poll_for(lambda: bolt.restarts >= restarts and bolt.proc is not None, 10, "a restarted child")
    assert not pid_alive(pid)


@pytest.mark.parametrize("name", ["squall-json", "pystorm-msgpack"])
def test_ill_typed_anchors_restart_the_child_and_the_worker_carries_on(name: str) -> None:
    # Given a shell bolt whose child will emit with anchors that are not tuple ids
    probe = Probe()
    with running(bolt_topology(ADAPTERS[name], probe, FAST)) as runner:
        bolt = shell(runner)
        first = probe.put("split", "a b")
        poll_for(lambda: probe.settled(first), 5, "a first tuple")
        # When it anchors to a list in a list, an object, a float, a boolean
        faults = [("nested", "an anchor that is not a tuple id"),
                  ("dict", "'anchors' neither a tuple id nor a list of them"),
                  ("float", "'anchors' neither a tuple id nor a list of them: 1.5"),
                  ("bool", "an anchor that is not a tuple id (string or integer): True")]
        for n, (kind, text) in enumerate(faults, 1):
            fault_restarts(runner, probe, "badanchor", kind, text, n)
        # Then each was a protocol fault of the child's, never the worker's
        assert fatal(runner) == [] and bolt.restarts == len(faults)
        assert shell(runner) is bolt  # the same executor, the same component instance
        after = probe.put("split", "still working")
        poll_for(lambda: probe.settled(after), 5, "a tuple through the last child")
        assert after in probe.acked and ["working"] in probe.got("default")


@pytest.mark.parametrize(("message", "text"), [
    ({"command": "emit", "tuple": ["x"], "stream": ["echo"]}, "non-string stream"),
    ({"command": "emit", "tuple": "x", "stream": "echo"}, "without a 'tuple' list"),
    ({"command": "emit", "tuple": ["x"], "stream": "echo", "need_task_ids": "yes"},
     "non-boolean need_task_ids"),
    ({"command": "ack", "id": {"x": 1}}, "ack without a tuple id"),
    ({"command": "fail", "id": [1]}, "fail without a tuple id"),
    ({"command": "log", "msg": ["x"]}, "log with a non-string 'msg'"),
])
def test_ill_typed_fields_are_protocol_faults(message: dict[str, Any], text: str) -> None:
    probe = Probe()
    with running(bolt_topology(ADAPTERS["squall-json"], probe, FAST)) as runner:
        fault_restarts(runner, probe, "raw", message, text, 1)
        after = probe.put("echo", "after")
        poll_for(lambda: probe.settled(after), 5, "a tuple through the new child")
        assert after in probe.acked and fatal(runner) == []


@pytest.mark.parametrize("name", ["squall-json", "squall-msgpack", "pystorm-json"])
def test_a_message_over_the_cap_restarts_the_child(name: str) -> None:
    # Given a 64 KiB cap on a child's messages
    probe = Probe()
    conf = {**FAST, MAX_MESSAGE_KEY: CAP}
    with running(bolt_topology(ADAPTERS[name], probe, conf)) as runner:
        bolt = shell(runner)
        fits = probe.put("oversize", CAP - 1024)
        poll_for(lambda: probe.settled(fits), 5, "a message under the cap")
        assert fits in probe.acked and bolt.restarts == 0
        # When the child writes a message of 1 MiB and more
        text = f"over the limit of {CAP} bytes ({MAX_MESSAGE_KEY})"
        fault_restarts(runner, probe, "oversize", 1024 * 1024 + 7, text, 1)
        # Then it is replaced, the worker lives on, and the new child works
        after = probe.put("echo", "after")
        poll_for(lambda: probe.settled(after), 5, "a tuple through the new child")
        assert after in probe.acked and fatal(runner) == []


def test_a_spout_message_over_the_cap_restarts_the_child() -> None:
    probe = Probe()
    conf = {**FAST, MAX_MESSAGE_KEY: CAP}
    items = [["a", "one"], ["big", f"BIG {CAP + 1}"], ["b", "two"]]
    with running(spout_topology(ADAPTERS["squall-msgpack"], probe, items, conf)) as runner:
        spout = shell(runner, "spout")
        [report] = poll_for(lambda: errors(runner, MAX_MESSAGE_KEY)[:1], 5, "the oversize message reported")
        assert f"over the limit of {CAP} bytes" in report.error and report.component == "spout"
        poll_for(lambda: spout.restarts >= 1, 10, "a restarted child")
        # The new child starts its items over; it is faulted again on the big one, but gets "one" out.
        poll_for(lambda: probe.got("default").count(["one"]) >= 2, 5, "the new child's tuples")
        assert fatal(runner) == []
