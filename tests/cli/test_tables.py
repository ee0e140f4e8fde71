"""The tables `squall info`, `monitor` and `errors` print: pure functions of the REST API's JSON."""

from __future__ import annotations

from typing import Any

from squall.cli.tables import errors_report, monitor_line, table, topology_report

PAGE = {
    "id": "wc-1-abc", "name": "wc", "status": "ACTIVE", "uptime": "1m 40s", "uptimeSeconds": 100,
    "workersTotal": 2, "executorsTotal": 7, "tasksTotal": 7, "window": "600", "windowHint": "10m 0s",
    "spouts": [{"spoutId": "sentences", "executors": 1, "emitted": 5000, "acked": 4000, "failed": 2,
                "completeLatency": "12.500", "lastError": ""}],
    "bolts": [{"boltId": "split", "executors": 2, "executed": 4000, "emitted": 32000, "acked": 4000,
               "failed": 0, "executeLatency": "0.021", "processLatency": "0.021", "capacity": "0.084",
               "lastError": "ValueError: bad sentence\\nTraceback..."}],
    "workers": [{"host": "127.0.0.1", "port": 6700, "executorsTotal": 4, "uptime": "1m 39s",
                 "componentNumTasks": {"split": 1, "sentences": 1}}],
}


def test_the_topology_report_shows_rates_latencies_capacity_and_workers() -> None:
    text = topology_report(PAGE)
    assert "topology wc (wc-1-abc): ACTIVE" in text and "window 10m 0s" in text
    spout_row = next(line for line in text.splitlines() if line.startswith("sentences"))
    assert "5,000" in spout_row and "50.0" in spout_row and "40.0" in spout_row and "12.500" in spout_row
    split_row = next(line for line in text.splitlines() if line.startswith("split"))
    assert "4,000" in split_row and "0.084" in split_row and "ValueError: bad sentence" in split_row
    assert "sentences:1, split:1" in text and "6700" in text


def test_errors_and_monitor_lines() -> None:
    errors = [{"time": 990.0, "component": "split", "task": 5, "error": "ValueError: bad", "fatal": False,
               "worker": "zmq+tcp://127.0.0.1:6700"},
              {"time": 995.0, "component": "count", "task": 7, "error": "KeyError: x", "fatal": True,
               "node": "n1", "port": 6701}]
    text = errors_report(errors, now=1000.0)
    assert "10s ago" in text and "zmq+tcp://127.0.0.1:6700" in text and "FATAL KeyError: x" in text
    assert "n1:6701" in text
    assert errors_report([]) == "no errors reported"
    # (issue 30: the trace, once per distinct one, with where it came from)
    trace = 'Traceback (most recent call last):\n  File "wc.py", line 12, in process\nValueError: bad'
    traced = [{**errors[0], "trace": trace}, {**errors[0], "time": 998.0, "trace": trace}, errors[1]]
    text = errors_report(traced, now=1000.0)
    assert text.count('File "wc.py", line 12, in process') == 1
    assert "split, task 5, zmq+tcp://127.0.0.1:6700, 2s ago (and 1 more like it):" in text
    assert "wc.py" not in errors_report(traced, now=1000.0, traces=False)
    later = {**PAGE, "spouts": [{**PAGE["spouts"][0], "emitted": 5400, "acked": 4200}]}
    line = monitor_line(PAGE, later, 2.0, "sentences")
    assert "sentences 200/s acked 100/s failed 0/s" in line
    assert "unknown" in monitor_line(PAGE, later, 2.0, "nope")


def test_columns_line_up() -> None:
    lines = table(["a", "count"], [["x", 1], ["longer", 12345]]).splitlines()
    assert len({len(line) for line in lines}) == 1


def test_monitor_rates_follow_the_heartbeats_not_the_wall_clock() -> None:
    # (issue 30: `squall monitor -i 2` alternated 0/s with doubled rates: nimbus's counters
    # move every 3 s here, when heartbeats arrive, at 100 tuples a second)
    from squall.cli.tables import paced_snapshots

    clock = [0.0]

    def snapshot() -> dict[str, Any]:
        beat = int(clock[0] // 3) * 3  # the counters as of the last heartbeat
        return {"spouts": [{"spoutId": "s", "emitted": beat * 100, "acked": beat * 100, "failed": 0}]}

    def sleep(secs: float) -> None:
        clock[0] += secs

    lines = paced_snapshots(snapshot, 2.0, lambda: clock[0], sleep, poll=0.25)
    rates = [(after["spouts"][0]["emitted"] - before["spouts"][0]["emitted"]) / secs
             for before, after, secs in (next(lines) for _ in range(6))]
    assert all(abs(rate - 100) < 1 for rate in rates), rates


def test_monitor_says_0_per_second_for_a_topology_that_does_nothing() -> None:
    from squall.cli.tables import paced_snapshots

    clock = [0.0]
    idle = {"spouts": [{"spoutId": "s", "emitted": 7, "acked": 7, "failed": 0}]}
    lines = paced_snapshots(lambda: idle, 2.0, lambda: clock[0],
                            lambda secs: clock.__setitem__(0, clock[0] + secs), poll=0.25)
    before, after, secs = next(lines)
    assert after == before and secs >= 2.0
