"""multilang.md conformance cases for shell spouts, against real children.

One run per adapter emits reliable, unreliable, typed-id, task-id-asking and
failing tuples, then is deactivated; the tests check the child's own
reports (its ``events`` stream) and the exact bytes on its pipes.
"""

from __future__ import annotations

import json
import tempfile
import time
from typing import Any

import pytest

from squall.testing import poll_for
from tests.multilang.harness import (
    ADAPTERS,
    NODE,
    Probe,
    events,
    pid_alive,
    running,
    shell,
    spout_topology,
    transcript,
)

ITEMS = [["msg-1", "sentence 1"], [7, "sentence 2"], [None, "unreliable"], ["ask-1", "ASK"], [8, "FAIL me"],
         ["e", "EMPTY"]]


class Run:
    def __init__(self, adapter: Any) -> None:
        self.adapter = adapter
        self.probe = Probe()


def _scenario(adapter: Any, tmp: str) -> Run:
    run = Run(adapter)
    probe = run.probe
    # Ticks are on: the spout executor takes them; a spout child never sees one (case 12).
    topo = spout_topology(adapter, probe, ITEMS, {"topology.multilang.tap.dir": tmp,
                                                  "topology.tick.tuple.freq.secs": 0.05})
    with running(topo) as runner:
        spout = shell(runner, "spout")
        run.pid = spout.proc.pid
        run.sink_tasks = runner.plan.component_tasks["sink"]

        def settled() -> bool:
            seen = events(probe)
            return all(e in seen for e in (["ack", "msg-1"], ["ack", 7], ["ack", "ask-1"], ["fail", 8]))

        poll_for(settled, 10, "the spout's tuples acked and failed")
        started = time.monotonic()
        # Idle now: the child is asked for more at most about once per millisecond.
        idle_from = len(transcript(tmp, adapter.codec))
        time.sleep(0.3)  # a measurement window, not synchronisation
        run.idle_window = time.monotonic() - started
        run.idle_nexts = sum(1 for d, _t, m in transcript(tmp, adapter.codec)[idle_from:]
                             if d == "P" and isinstance(m, dict) and m.get("command") == "next")
        runner.set_active(False)
        poll_for(lambda: ["deactivate"] in events(probe), 5, "deactivate to reach the child")
        run.errors = list(runner.errors)
        run.restarts = spout.restarts
    run.transcript = transcript(tmp, adapter.codec)
    return run


@pytest.fixture(scope="module", params=list(ADAPTERS))
def run(request: pytest.FixtureRequest) -> Run:
    adapter = ADAPTERS[request.param]
    if adapter.node and NODE is None:
        pytest.fail("node is required for the Node.js multilang tests")
    with tempfile.TemporaryDirectory() as tmp:
        return _scenario(adapter, tmp)


def parent(run: Run) -> list[Any]:
    return [m for d, _t, m in run.transcript if d == "P"]


def test_02_spout_handshake(run: Run) -> None:
    first = parent(run)[0]
    assert set(first) == {"conf", "pidDir", "context"}
    context = first["context"]
    assert context["componentid"] == "spout" and context["source->stream->fields"] == {}
    assert context["stream->outputfields"] == {"default": ["sentence"], "events": ["event"]}
    assert next(m for d, _t, m in run.transcript if d == "C") == {"pid": run.pid}


def test_15_activate_first_then_one_command_at_a_time(run: Run) -> None:
    commands = [m for m in parent(run)[1:] if isinstance(m, dict)]
    assert commands[0] == {"command": "activate", "id": ""}
    assert commands[1] == {"command": "next", "id": ""}
    assert all(set(c) == {"command", "id"} for c in commands)
    assert commands[-1] == {"command": "deactivate", "id": ""}
    # Between a command and its sync the parent writes nothing but task-id arrays.
    waiting = False
    for direction, _t, m in run.transcript[1:]:
        if direction == "P" and isinstance(m, dict):
            assert not waiting, f"command {m} sent before the previous sync"
            waiting = True
        elif direction == "C" and m == {"command": "sync"}:
            waiting = False
    # What the child said before its first command (its start-up emit) was taken in.
    assert any(e[0] == "started" for e in events(run.probe))
    assert not [m for m in parent(run)
                if isinstance(m, dict) and m.get("stream") in ("__heartbeat", "__tick")]


def test_15_an_idle_spout_is_not_asked_in_a_busy_loop(run: Run) -> None:
    assert run.idle_nexts <= run.idle_window * 1500, (run.idle_nexts, run.idle_window)


def test_16_message_ids_come_back_with_their_json_type(run: Run) -> None:
    acks = [m["id"] for m in parent(run) if isinstance(m, dict) and m.get("command") == "ack"]
    fails = [m["id"] for m in parent(run) if isinstance(m, dict) and m.get("command") == "fail"]
    assert sorted(map(json.dumps, acks)) == sorted(map(json.dumps, ["msg-1", 7, "ask-1"]))
    assert fails == [8] and type(fails[0]) is int
    assert ["ack", 7] in events(run.probe) and ["fail", 8] in events(run.probe)
    # The unreliable tuple went out and is never acked or failed.
    assert ["unreliable"] in run.probe.got("default")
    assert None not in acks + fails


def test_17_spout_task_ids_are_answered_at_once(run: Run) -> None:
    [ids] = [e[1] for e in events(run.probe) if e[0] == "ids"]
    [(task, _values)] = [(t, v) for t, v in run.probe.got_with_task("default") if v == ["ASK"]]
    assert ids == [task]
    order = run.transcript
    at = next(i for i, (d, _t, m) in enumerate(order) if d == "C" and isinstance(m, dict)
              and m.get("tuple") == ["ASK"])
    reply = next(i for i, (d, _t, m) in enumerate(order) if i > at and d == "P")
    assert order[reply][2] == [task]
    assert all(order[i][0] != "C" or order[i][2] != {"command": "sync"} for i in range(at, reply))


def test_spout_ran_clean_and_left_no_orphan(run: Run) -> None:
    assert run.errors == [] and run.restarts == 0
    assert not pid_alive(run.pid)
