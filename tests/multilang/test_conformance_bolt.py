"""multilang.md conformance cases for shell bolts, against real children.

One run per adapter (pystorm from PyPI in JSON and msgpack mode, Squall's
own adapter in both, and a Node.js bolt) exercises everything a healthy
child does; each test then checks one case against that run: what the
child saw (it reports on its own streams), what crossed the pipes (a tap
records the exact bytes), the logs, errors and metrics.  Numbers in test
names are the case numbers of multilang.md section 4.
"""

from __future__ import annotations

import itertools
import json
import os
import tempfile
from typing import Any

import pytest

from squall.multilang.tap import read_tap
from squall.testing import poll_for
from tests.multilang.harness import (
    ADAPTERS,
    NODE,
    Probe,
    bolt_topology,
    captured_logs,
    pid_alive,
    running,
    shell,
    transcript,
)

ECHO_VALUES = [1.5, None, [1, [2, {"k": "v"}]], {"nested": {"list": [True, False]}}, "naïve ☃ \u2028 / \\",
               -(2 ** 63), 2 ** 63 - 1, ""]


def echo_values(adapter: Any) -> list[Any]:
    if adapter.node:
        # JavaScript numbers are doubles: 64-bit integers do not survive a JS child
        # (the reason Storm's wire ids are strings).
        return [v for v in ECHO_VALUES if not (type(v) is int and abs(v) > 2 ** 53)]
    return ECHO_VALUES


class Run:
    """Everything one scenario left behind."""

    def __init__(self, adapter: Any) -> None:
        self.adapter = adapter
        self.probe = Probe()
        self.ids: dict[str, int] = {}


def _scenario(adapter: Any, tmp: str) -> Run:
    run = Run(adapter)
    probe = run.probe
    conf = {"topology.multilang.tap.dir": tmp, "topology.tick.tuple.freq.secs": 1}
    topo = bolt_topology(adapter, probe, conf, env={"SQUALL_TEST_ENV": "from-spec"})
    with captured_logs() as logs, running(topo) as runner:
        bolt = shell(runner)
        run.pid = bolt.proc.pid
        run.pid_file_seen = poll_for(lambda: os.path.exists(os.path.join(bolt.pid_dir, str(run.pid))),
                                     5, "the child's pid file")
        sink_tasks = runner.plan.component_tasks["sink"]
        run.sink_tasks = sink_tasks
        run.shell_task = runner.plan.component_tasks["shell"][0]
        put = probe.put
        run.ids["info"] = put("info", "hello")
        run.ids["split"] = put("split", "a b c")
        run.ids["ids"] = put("ids", [1, 2, 3, 4])
        run.ids["direct"] = put("direct", sink_tasks[1])
        run.ids["echo"] = [put("echo", v) for v in echo_values(adapter)]
        run.ids["log"] = put("log")
        run.ids["error"] = put("error", "boom")
        run.ids["metrics"] = put("metrics", [["m", 5], ["m", None], ["g", {"x": 1}]])
        run.ids["failme"] = put("failme", "f")
        if not adapter.node:
            run.ids["failme-string"] = put("failme-string-anchor", "g")
        every = [i for v in run.ids.values() for i in (v if isinstance(v, list) else [v])]
        poll_for(lambda: probe.settled(*every), 10, "every command settled")
        # Heartbeats come every second and ticks every second: wait for two of each.
        poll_for(lambda: len([v for v in probe.got("echo") if isinstance(v[0], list)]) >= 2, 5, "two ticks")
        poll_for(lambda: sum(1 for d, _t, m in transcript(tmp, adapter.codec)
                             if d == "P" and isinstance(m, dict) and m.get("stream") == "__heartbeat") >= 2,
                 5, "two heartbeats")
        run.after_error_pid = bolt.proc.pid
        run.metrics = dict(bolt.child_metrics)
        run.registry = bolt.metrics.snapshot()
        run.pid_dir = bolt.pid_dir
        run.errors = list(runner.errors)
        run.restarts = bolt.restarts
    run.logs = list(logs)
    run.transcript = transcript(tmp, adapter.codec)
    run.records = read_tap(os.path.join(tmp, min(os.listdir(tmp))))
    return run


@pytest.fixture(scope="module", params=list(ADAPTERS))
def run(request: pytest.FixtureRequest) -> Run:
    adapter = ADAPTERS[request.param]
    if adapter.node and NODE is None:
        pytest.fail("node is required for the Node.js multilang tests")
    with tempfile.TemporaryDirectory() as tmp:
        return _scenario(adapter, tmp)


def parent_messages(run: Run) -> list[Any]:
    return [m for d, _t, m in run.transcript if d == "P"]


def child_messages(run: Run) -> list[Any]:
    return [m for d, _t, m in run.transcript if d == "C"]


def info(run: Run) -> dict[str, Any]:
    [[text]] = run.probe.got("info")
    return json.loads(text)


def test_01_framing_every_parent_message_ends_with_newline_end(run: Run) -> None:
    if run.adapter.serializer != "json":
        pytest.skip("msgpack has no end lines (case 25)")
    # Every write the parent made is whole messages, each "<json>\nend\n", no \r anywhere.
    data = b"".join(chunk for d, _t, chunk in _records(run) if d == "P")
    assert b"\r" not in data
    assert data.endswith(b"\nend\n")
    body = data.split(b"\nend\n")
    assert body[-1] == b"" and all(b"\n" not in part for part in body[:-1])  # one line per message
    assert len(body) - 1 == len(parent_messages(run))


def _records(run: Run) -> list[tuple[str, float, bytes]]:
    return run.records


def test_02_handshake_first_message_and_pid(run: Run) -> None:
    first = parent_messages(run)[0]
    assert set(first) == {"conf", "pidDir", "context"}
    assert first["pidDir"] == run.pid_dir
    assert child_messages(run)[0] == {"pid": run.pid}
    assert info(run)["pid"] == run.pid  # the OS pid of the child itself
    assert run.pid_file_seen
    # Nothing but the handshake went out before the pid came back.
    order = [(d, m) for d, _t, m in run.transcript]
    pid_at = order.index(("C", {"pid": run.pid}))
    assert [d for d, _m in order[:pid_at]] == ["P"]
    assert first["conf"]["topology.name"] == "ml"
    assert first["conf"]["topology.tick.tuple.freq.secs"] == 1


def test_03_context_is_complete(run: Run) -> None:
    context = info(run)["context"]
    assert context["taskid"] == run.shell_task and type(context["taskid"]) is int
    assert context["componentid"] == "shell"
    assert info(run)["component_name"] == "shell"
    t2c = context["task->component"]
    assert all(isinstance(k, str) for k in t2c) and t2c[str(run.shell_task)] == "shell"
    assert t2c[str(run.sink_tasks[0])] == "sink" and "__acker" in t2c.values()
    assert context["streams"] == ["default", "counts", "nowhere", "ids", "direct", "echo", "failme", "info"]
    assert context["stream->outputfields"]["counts"] == ["n"]
    assert context["stream->target->grouping"]["counts"] == {"sink": {"type": "FIELDS", "fields": ["n"]}}
    assert context["stream->target->grouping"]["direct"] == {"sink": {"type": "DIRECT"}}
    assert "nowhere" not in context["stream->target->grouping"]
    assert context["source->stream->grouping"] == {"feed": {"default": {"type": "SHUFFLE"}}}
    assert context["source->stream->fields"] == {"feed": {"default": ["cmd", "arg"]}}
    assert info(run)["topology_name"] == "ml"
    assert info(run)["env"] == "from-spec"
    assert info(run)["serializer"] == run.adapter.serializer


def test_04_tuples_arrive_as_records_of_the_declared_fields(run: Run) -> None:
    if run.adapter.node:
        pytest.skip("the Node adapter hands values over as an array")
    assert info(run)["fields"] == ["cmd", "arg"]
    assert info(run)["arg_via_field"] == "hello"


def test_05_bolt_tuple_shape_and_ack(run: Run) -> None:
    tuples = [m for m in parent_messages(run) if isinstance(m, dict) and m.get("comp") == "feed"]
    assert len(tuples) >= 10
    for m in tuples:
        assert set(m) == {"id", "comp", "stream", "task", "tuple"}
        assert isinstance(m["id"], str) and -(2 ** 63) <= int(m["id"]) < 2 ** 63
        assert m["stream"] == "default" and type(m["task"]) is int and isinstance(m["tuple"], list)
    acked = {m["id"] for m in child_messages(run) if m.get("command") == "ack"}
    assert {m["id"] for m in tuples} <= acked
    assert run.ids["split"] in run.probe.acked and run.ids["info"] in run.probe.acked


def test_06_task_ids_are_the_real_targets_and_empty_when_unsubscribed(run: Run) -> None:
    [[reported]] = run.probe.got("ids")
    *per_count, nowhere = reported
    assert nowhere == []
    received = {v[0]: t for t, v in run.probe.got_with_task("counts")}
    assert per_count == [[received[n]] for n in (1, 2, 3, 4)]  # case 9: replies in emit order


def test_07_no_task_ids_when_not_asked(run: Run) -> None:
    needing = [m for m in child_messages(run) if m.get("command") == "emit" and "task" not in m
               and m.get("need_task_ids", True) is not False]
    arrays = [m for m in parent_messages(run) if isinstance(m, list)]
    assert len(arrays) == len(needing)
    if run.adapter.pystorm or run.adapter.name.startswith("squall"):
        assert len(needing) == 5  # only the ids command asked


def test_08_direct_emit_reaches_only_that_task(run: Run) -> None:
    got = run.probe.got_with_task("direct")
    assert got == [(run.sink_tasks[1], [str(run.sink_tasks[1])])]
    direct = [m for m in child_messages(run) if m.get("command") == "emit" and m.get("stream") == "direct"]
    assert direct and all(type(m["task"]) is int for m in direct)


def test_10_heartbeats_every_second_answered_by_sync(run: Run) -> None:
    beats = [(t, m) for d, t, m in run.transcript if d == "P" and isinstance(m, dict)
             and m.get("stream") == "__heartbeat"]
    assert len(beats) >= 2
    for _t, m in beats:
        assert m["comp"] is None and m["task"] == -1 and m["tuple"] == [] and isinstance(m["id"], str)
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(beats)]
    assert all(0.8 < g < 1.6 for g in gaps), gaps
    syncs = [m for m in child_messages(run) if m.get("command") == "sync"]
    assert len(syncs) >= len(beats) - 1
    beat_ids = {m["id"] for _t, m in beats}
    assert not [m for m in child_messages(run)
                if m.get("command") in ("ack", "fail") and m.get("id") in beat_ids]


def test_12_ticks_reach_the_child_and_its_acks_are_accepted(run: Run) -> None:
    ticks = [v[0] for v in run.probe.got("echo") if isinstance(v[0], list) and v[0][:1] == ["tick"]]
    assert ticks and ticks[0] == ["tick", [1], "__system", "__tick", -1]
    sent = [m for m in parent_messages(run) if isinstance(m, dict) and m.get("stream") == "__tick"]
    assert sent[0]["comp"] == "__system" and sent[0]["task"] == -1 and sent[0]["tuple"] == [1]
    acked = {m["id"] for m in child_messages(run) if m.get("command") == "ack"}
    assert sent[0]["id"] in acked
    assert not [e for e in run.errors if "non-existent" in e.error]


def test_13_anchors_as_list_or_single_string_join_the_tree(run: Run) -> None:
    # The failer fails what it gets: the input fails only if the emit was anchored to it.
    assert run.ids["failme"] in run.probe.failed
    if "failme-string" in run.ids:
        assert run.ids["failme-string"] in run.probe.failed
    assert run.ids["split"] in run.probe.acked  # and a tree whose children all acked completes


def test_20_log_levels_and_attribution(run: Run) -> None:
    shell_logs = {e["event"]: e for e in run.logs if e.get("component") == "shell"
                  and str(e.get("event", "")).startswith("level ")}
    expect = {"level trace": "debug", "level debug": "debug", "level info": "info", "level warn": "warning",
              "level error": "error", "level missing": "info", "level odd": "info", "level high": "info"}
    for event, level in expect.items():
        assert shell_logs[event]["log_level"] == level, (event, shell_logs[event])
        assert shell_logs[event]["pid"] == run.pid
        assert shell_logs[event]["task"] == run.shell_task
    assert shell_logs["level trace"]["shell_level"] == "trace"


def test_21_error_is_a_component_error_and_the_child_keeps_running(run: Run) -> None:
    reported = [e for e in run.errors if "boom" in e.error]
    assert len(reported) == 1
    assert reported[0].component == "shell" and not reported[0].fatal
    assert "Shell Process Exception: boom" in reported[0].error
    assert run.after_error_pid == run.pid and run.restarts == 0
    assert run.ids["error"] in run.probe.acked


def test_22_metrics_count_like_storms_shell_metric(run: Run) -> None:
    assert run.metrics == {"m": 6, "g": {"x": 1}}
    # and they join the task's own metrics, where nimbus and Prometheus read them
    assert run.registry["counters"] == {"m": 6}
    assert run.registry["gauges"] == {"g": {"x": 1}}


def test_24_values_cross_unchanged(run: Run) -> None:
    echoed = [v[0] for v in run.probe.got("echo") if not (isinstance(v[0], list) and v[0][:1] == ["tick"])]
    sent = echo_values(run.adapter)
    assert sorted(map(json.dumps, echoed)) == sorted(map(json.dumps, sent))


def test_25_msgpack_mode_uses_raw_msgpack(run: Run) -> None:
    if run.adapter.serializer != "msgpack":
        pytest.skip("JSON adapter")
    import msgpack

    data = b"".join(chunk for d, _t, chunk in _records(run) if d == "P")
    assert b"\nend\n" not in data
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
    unpacker.feed(data)
    assert len(list(unpacker)) == len(parent_messages(run))


def test_no_errors_but_the_asked_one_and_no_orphan(run: Run) -> None:
    assert [e.error for e in run.errors if "boom" not in e.error] == []
    assert not pid_alive(run.pid)
