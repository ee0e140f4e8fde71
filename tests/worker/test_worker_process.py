"""Real worker processes (``python -m squall.worker``) on real ZeroMQ sockets.

Each test writes the files a supervisor would (assignment.json, topology code
in a code_dir), launches workers with subprocess on free loopback ports and
watches the files they write back (heartbeat.json, errors.jsonl) and what
the topology's components record.  Every process started is killed at the
end, whatever happened.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from squall.runtime.ports import free_port
from squall.testing import poll_for
from squall.topology.component import ComponentSpec
from squall.topology.topology import Topology
from squall.worker.process.contract import (
    EXIT_BAD_ASSIGNMENT,
    EXIT_OK,
    EXIT_REASSIGNED,
    EXIT_WORKER_DIED,
    write_json_atomic,
)
from tests.helpers import stay

pytestmark = pytest.mark.timeout(30)

# The topology's code, as a supervisor would extract it into a code_dir.
CODE = '''
import os
import time

from squall import Bolt, Spout


def _out(conf, name):
    return open(os.path.join(conf["test.out"], name), "a")


class Numbers(Spout):
    """Emits 0..count-1 (or for ever with count -1) reliably, replays what fails,
    and records every ack."""

    outputs = ["n"]

    def initialize(self, conf, context):
        self.count = conf["test.count"]
        self.next = 0
        self.replay = []
        self.acks = _out(conf, "acked")
        self.out = conf["test.out"]

    def next_tuple(self):
        if self.replay:
            n = self.replay.pop()
        elif self.count < 0 or self.next < self.count:
            n = self.next
            self.next += 1
        else:
            return
        self.emit([n], tup_id=n)

    def ack(self, n):
        self.acks.write(f"{n}\\n")
        self.acks.flush()

    def fail(self, n):
        self.replay.append(n)

    def close(self):
        _out({"test.out": self.out}, "spout-closed").close()


class Sink(Bolt):
    """Records every number it sees; optionally slow."""

    def initialize(self, conf, context):
        self.seen = _out(conf, f"seen-{os.getpid()}")
        self.delay = conf.get("test.sink.delay", 0)

    def process(self, tup):
        if self.delay:
            time.sleep(self.delay)
        self.logger.debug("sink saw", n=tup.values[0])  # shown only when set_log_level says so
        self.seen.write(f"{tup.values[0]}\\n")
        self.seen.flush()


class Broken(Bolt):
    def initialize(self, conf, context):
        raise RuntimeError("cannot open the database")

    def process(self, tup):
        pass
'''


def topology_dict(sink_class: str = "xtopo:Sink") -> dict[str, Any]:
    source = ComponentSpec("xtopo:Numbers", "spout", outputs=["n"])
    sink = ComponentSpec(sink_class, "bolt", inputs=[source], outputs=[])
    return Topology.from_specs("numbers", {"source": source, "sink": sink}).definition().to_dict()


# Task ids (components sorted by name): 1 = __acker, 2 = sink, 3 = source.
ACKER, SINK, SOURCE = [1, 1], [2, 2], [3, 3]


class Workers:
    """Launches worker processes and kills whatever is left of them at the end."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.code = root / "code"
        self.out = root / "out"
        self.code.mkdir()
        self.out.mkdir()
        (self.code / "xtopo.py").write_text(CODE)
        self.procs: list[subprocess.Popen[bytes]] = []

    def assignment(self, name: str, address: str, executors: list[list[int]], task_address: dict[int, str],
                   conf: dict[str, Any] | None = None, topology: dict[str, Any] | None = None,
                   version: int = 1, active: bool = True) -> dict[str, Any]:
        return {
            "topology_id": "numbers-1",
            "topology": topology or topology_dict(),
            "conf": {"test.count": 200, "test.out": str(self.out), "topology.acker.executors": 1,
                     "topology.message.timeout.secs": 2, "topology.max.spout.pending": 50,
                     "worker.heartbeat.frequency.secs": 0.1, "worker.assignment.poll.secs": 0.05,
                     "worker.shutdown.timeout.secs": 2, **(conf or {})},
            "code_dir": str(self.code),
            "address": address,
            "executors": executors,
            "task_address": {str(t): a for t, a in task_address.items()},
            "active": active,
            "version": version,
        }

    def write(self, name: str, assignment: dict[str, Any]) -> Path:
        directory = self.root / name
        directory.mkdir(exist_ok=True)
        write_json_atomic(directory / "assignment.json", assignment)
        return directory

    def launch(self, directory: Path) -> subprocess.Popen[bytes]:
        with open(directory / "worker.log", "ab") as log:
            proc = subprocess.Popen([sys.executable, "-m", "squall.worker", "--dir", str(directory)],
                                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    # JSON lines (supervisor.worker.log.json), which these tests read
                                    env={**os.environ, "SQUALL_NODE": "test-node", "SQUALL_LOG_JSON": "1"})
        self.procs.append(proc)
        return proc

    def kill_all(self) -> None:
        for proc in self.procs:
            try:
                tree = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
            except psutil.NoSuchProcess:
                tree = []
            for p in tree:
                try:
                    p.kill()
                except psutil.NoSuchProcess:
                    pass
            proc.wait(5)

    def lines(self, name: str) -> list[str]:
        out = []
        for path in self.out.glob(f"{name}*"):
            out.extend(path.read_text().split())
        return out

    def acked(self) -> set[int]:
        return {int(n) for n in self.lines("acked")}


def heartbeat(directory: Path) -> dict[str, Any] | None:
    try:
        return json.loads((directory / "heartbeat.json").read_text())
    except (OSError, ValueError):
        return None


def exit_code(proc: subprocess.Popen[bytes], timeout: float) -> int:
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"worker {proc.pid} still running after {timeout}s") from None


def log_of(directory: Path) -> str:
    return (directory / "worker.log").read_text(errors="replace")


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    w = Workers(tmp_path)
    try:
        yield w
    finally:
        w.kill_all()


def two_workers(workers: Workers, conf: dict[str, Any] | None = None) -> tuple[Path, Path, str, str]:
    """Worker a: the spout and the acker; worker b: the sink."""
    a_addr, b_addr = f"zmq+tcp://127.0.0.1:{free_port()}", f"zmq+tcp://127.0.0.1:{free_port()}"
    routes = {1: a_addr, 3: a_addr, 2: b_addr}
    a = workers.write("a", workers.assignment("a", a_addr, [SOURCE, ACKER], routes, conf))
    b = workers.write("b", workers.assignment("b", b_addr, [SINK], routes, conf))
    return a, b, a_addr, b_addr


def one_worker(workers: Workers, conf: dict[str, Any] | None = None, **kw: Any) -> Path:
    address = f"zmq+tcp://127.0.0.1:{free_port()}"
    routes = {1: address, 2: address, 3: address}
    return workers.write("solo", workers.assignment("solo", address, [ACKER, SINK, SOURCE], routes, conf,
                                                    **kw))


def test_reliable_tuples_cross_two_worker_processes_and_all_are_acked(workers: Workers) -> None:
    # Given a spout and the acker in worker a, the sink in worker b
    a, b, _, _ = two_workers(workers, {"test.count": 500})
    # When both processes run
    for d in (a, b):
        workers.launch(d)
    # Then every tuple reached b and every ack came back to a's spout
    poll_for(lambda: len(workers.acked()) == 500, timeout=15, message="500 acks at the spout")
    assert set(map(int, workers.lines("seen"))) == set(range(500))
    # And both heartbeats show frames crossing the sockets both ways
    beat_a = poll_for(lambda: (h := heartbeat(a)) and h["stats"]["source"]["acked"] == 500 and h,
                      timeout=5, message="a's heartbeat to count the acks")
    beat_b = poll_for(lambda: (h := heartbeat(b)) and h["stats"]["sink"]["executed"] >= 500 and h,
                      timeout=5, message="b's heartbeat to count the tuples")
    for beat in (beat_a, beat_b):
        assert beat["transfer"]["frames_sent"] > 0 and beat["transfer"]["frames_received"] > 0
        assert beat["transfer"]["bytes_sent"] > beat["transfer"]["frames_sent"]  # frames are not empty
    assert beat_a["stats"]["source"]["complete_latency_ms"]["count"] == 500


def test_heartbeat_appears_and_refreshes_with_stats(workers: Workers) -> None:
    # Given one worker running the whole topology
    d = one_worker(workers, {"test.count": -1})
    proc = workers.launch(d)
    # Then heartbeat.json appears, describes this worker, and keeps being refreshed
    first = poll_for(lambda: heartbeat(d), timeout=10, message="a first heartbeat")
    assert first["pid"] == proc.pid and first["topology_id"] == "numbers-1" and first["version"] == 1
    assert first["executors"] == [ACKER, SINK, SOURCE]
    later = poll_for(lambda: (h := heartbeat(d)) and h["time"] > first["time"] + 0.2
                     and h["stats"]["source"]["acked"] > 0 and h,
                     timeout=10, message="a later heartbeat with acks")
    assert later["ready"] and later["status"] == "running"
    latency = later["stats"]["source"]["complete_latency_ms"]
    assert latency["count"] > 0 and 0 <= latency["p50"] <= latency["p99"] <= latency["max"]
    assert "latencies" not in later["stats"]["source"]  # summarised, no raw samples
    # and it carries the process's own costs and every executor's cumulative statistics
    system = later["system"]
    assert system["rss_bytes"] > 10_000_000 and system["cpu_secs"] > 0 and system["threads"] > 3
    assert len(system["gc_collections"]) == 3 and system["gc_secs"] >= 0
    by_component = {e["component"]: e for e in later["executor_stats"]}
    assert by_component["source"]["acked"] > 0 and by_component["source"]["emitted"]["default"] > 0
    assert by_component["sink"]["executed"] > 0 and "backpressure_secs" in by_component["sink"]


def test_deactivating_through_the_assignment_stops_emission_and_activating_resumes(workers: Workers) -> None:
    # Given a worker with an endless spout, emitting
    conf = {"test.count": -1}
    d = one_worker(workers, conf)
    workers.launch(d)
    poll_for(lambda: (h := heartbeat(d)) and h["stats"]["source"]["emitted"] > 0, timeout=10,
             message="emission to start")
    assignment = json.loads((d / "assignment.json").read_text())

    # When the supervisor rewrites the assignment inactive
    write_json_atomic(d / "assignment.json", {**assignment, "active": False, "version": 2})

    # Then the worker applies it and, once what was under way settled, emits nothing more
    poll_for(lambda: heartbeat(d)["version"] == 2, timeout=5, message="version 2 to be applied")  # type: ignore[index]

    def emitted() -> int:
        return heartbeat(d)["stats"]["source"]["emitted"]  # type: ignore[index]

    def settled() -> int | None:
        count = emitted()
        return count if stay(lambda: emitted() == count, 0.3) else None

    before = poll_for(settled, timeout=5, message="emission to stop")
    assert stay(lambda: emitted() == before, 0.5)

    # When it is activated again, emission resumes
    write_json_atomic(d / "assignment.json", {**assignment, "active": True, "version": 3})
    poll_for(lambda: heartbeat(d)["version"] == 3 and emitted() > before,  # type: ignore[index]
             timeout=5, message="emission to resume")


def test_a_killed_worker_relaunched_on_its_port_gets_the_lost_tuples_replayed(workers: Workers) -> None:
    # Given two workers and a slow sink, so that tuples are in flight in b
    a, b, _, _ = two_workers(workers, {"test.count": 300, "test.sink.delay": 0.002,
                                       "topology.max.spout.pending": 20})
    workers.launch(a)
    b_proc = workers.launch(b)
    poll_for(lambda: len(workers.acked()) >= 50, timeout=10, message="50 acks before the kill")

    # When b is killed with SIGKILL and relaunched in the same directory (same port)
    b_proc.kill()
    b_proc.wait(5)
    killed_at = len(workers.acked())
    assert killed_at < 300, "everything was acked before the kill: slow the sink down"
    workers.launch(b)

    # Then the tuples lost with b time out and replay, and every one is acked
    poll_for(lambda: len(workers.acked()) == 300, timeout=15, message="all 300 acked after the restart")
    beat = poll_for(lambda: (h := heartbeat(a)) and h["stats"]["source"]["acked"] >= 300 and h, timeout=5,
                    message="a's heartbeat to catch up")
    assert beat["stats"]["source"]["failed"] > 0, "nothing was replayed: the kill lost no tuple"


def test_moving_a_peer_re_routes_its_tasks_without_a_restart(workers: Workers) -> None:
    # Given worker a whose sink task points to a port nobody listens on
    a_addr, nowhere, b_addr = (f"zmq+tcp://127.0.0.1:{free_port()}" for _ in range(3))
    conf = {"test.count": 100, "topology.message.timeout.secs": 1}
    a = workers.write("a", workers.assignment("a", a_addr, [SOURCE, ACKER],
                                              {1: a_addr, 3: a_addr, 2: nowhere}, conf))
    a_proc = workers.launch(a)
    poll_for(lambda: heartbeat(a), timeout=10, message="a to start")
    assert not workers.acked()
    # When the sink starts elsewhere and a's assignment says so
    routes = {1: a_addr, 3: a_addr, 2: b_addr}
    workers.launch(workers.write("b", workers.assignment("b", b_addr, [SINK], routes, conf)))
    write_json_atomic(a / "assignment.json", workers.assignment("a", a_addr, [SOURCE, ACKER], routes, conf,
                                                                version=2))
    # Then a, still the same process, routes to it and every tuple is acked
    poll_for(lambda: len(workers.acked()) == 100, timeout=15, message="all 100 acked via the new route")
    assert a_proc.poll() is None


def test_a_component_raising_in_initialize_kills_the_worker_with_the_error_recorded(workers: Workers) -> None:
    # Given a topology whose bolt cannot initialize
    d = one_worker(workers, topology=topology_dict("xtopo:Broken"))
    started = time.monotonic()
    proc = workers.launch(d)
    # Then the process exits non-zero, quickly
    assert exit_code(proc, 10) == EXIT_WORKER_DIED, log_of(d)
    assert time.monotonic() - started < 8
    # And the error is in errors.jsonl for the supervisor to report
    errors = [json.loads(line) for line in (d / "errors.jsonl").read_text().splitlines()]
    fatal = [e for e in errors if e["fatal"]]
    assert len(fatal) == 1
    assert fatal[0]["component"] == "sink" and fatal[0]["topology_id"] == "numbers-1"
    assert "cannot open the database" in fatal[0]["error"] and "initialize" in fatal[0]["trace"]


def test_sigterm_stops_the_worker_in_order_and_exits_zero(workers: Workers) -> None:
    # Given a running worker
    d = one_worker(workers, {"test.count": -1})
    proc = workers.launch(d)
    poll_for(lambda: (h := heartbeat(d)) and h["ready"], timeout=10, message="the worker to be ready")
    # When it gets SIGTERM
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    # Then it exits 0 within the shutdown timeout, having closed its spout (an orderly stop)
    assert exit_code(proc, 5) == EXIT_OK, log_of(d)
    assert time.monotonic() - started < 3
    assert (workers.out / "spout-closed").exists()
    assert '"reason": "sigterm"' in log_of(d)


def test_a_change_of_its_own_executors_makes_the_worker_exit_to_be_relaunched(workers: Workers) -> None:
    d = one_worker(workers, {"test.count": -1})
    proc = workers.launch(d)
    poll_for(lambda: heartbeat(d), timeout=10, message="the worker to start")
    assignment = json.loads((d / "assignment.json").read_text())
    write_json_atomic(d / "assignment.json", {**assignment, "executors": [ACKER, SOURCE], "version": 2})
    assert exit_code(proc, 5) == EXIT_REASSIGNED, log_of(d)


def unknown_executor(workers: Workers) -> str:
    return json.dumps(workers.assignment("x", "zmq+tcp://127.0.0.1:1", [[7, 9]], {},
                                         conf={"topology.name": "counted"}))


@pytest.mark.parametrize("content", [None, lambda w: "{not json", lambda w: json.dumps({"topology_id": "x"}),
                                     unknown_executor],
                         ids=["missing", "not-json", "incomplete", "unknown-executor"])
def test_a_missing_or_invalid_assignment_exits_with_its_own_code(workers: Workers, content: Any) -> None:
    d = workers.root / "bad"
    d.mkdir()
    if content is not None:
        (d / "assignment.json").write_text(content(workers))
    proc = workers.launch(d)
    assert exit_code(proc, 10) == EXIT_BAD_ASSIGNMENT, log_of(d)
    record = json.loads((d / "errors.jsonl").read_text().splitlines()[0])
    assert record["component"] == "__worker"
    if content is unknown_executor:  # the assignment was read: named as it was submitted
        assert record["topology"] == "counted"


def test_log_levels_in_the_assignment_apply_without_a_restart_and_expire(workers: Workers) -> None:
    # Given a running worker whose sink logs every tuple at debug, hidden by default
    d = one_worker(workers, {"test.count": -1, "topology.max.spout.pending": 5, "test.sink.delay": 0.01})
    proc = workers.launch(d)
    poll_for(lambda: len(workers.lines("seen")) > 20, timeout=10, message="tuples to flow")
    assert '"sink saw"' not in log_of(d)
    assignment = json.loads((d / "assignment.json").read_text())

    # When the supervisor rewrites its assignment with the sink at DEBUG for a moment (and the
    # worker's own lines at ERROR: the notices about the levels are shown all the same)
    levels = {"sink": {"level": "DEBUG", "timeout_secs": 2, "expires_at": time.time() + 2},
              "squall.worker": {"level": "ERROR", "timeout_secs": 60, "expires_at": time.time() + 60}}
    write_json_atomic(d / "assignment.json", {**assignment, "log_levels": levels, "version": 2})

    # Then the same process shows the sink's debug lines, naming its component and logger...
    line = poll_for(lambda: next((json.loads(text) for text in log_of(d).splitlines()
                                  if '"sink saw"' in text), None), timeout=5, message="a debug line")
    assert line["component"] == "sink" and line["logger"] == "squall.component.Sink"
    # ...until its time has come, when the worker says so and shows no more
    poll_for(lambda: "log level expired" in log_of(d), timeout=10, message="the level to expire")
    settled = len(log_of(d))  # a line under way as the level went may land just after the notice
    seen = len(workers.lines("seen"))
    poll_for(lambda: len(workers.lines("seen")) > seen + 20, timeout=10, message="more tuples")
    assert '"sink saw"' not in log_of(d)[settled:]
    assert proc.poll() is None


# A bolt as a streamparse project writes it: `streamparse` exists only in code Squall runs.
STREAMPARSE_SINK = '''
import os

from streamparse import Bolt


class Sink(Bolt):
    def initialize(self, conf, ctx):
        self.seen = open(os.path.join(conf["test.out"], f"sp-seen-{ctx['taskid']}"), "a")
        self.logger.info("streamparse sink %s ready", self.component_name)

    def process(self, tup):
        self.seen.write(f"{tup.values.n}\\n")
        self.seen.flush()
'''


def test_a_streamparse_bolt_runs_in_a_worker_process(workers: Workers) -> None:
    # Given a topology whose sink is a streamparse Bolt, in the topology's code
    (workers.code / "spbolts.py").write_text(STREAMPARSE_SINK)
    d = one_worker(workers, topology=topology_dict("spbolts:Sink"))
    # When a worker runs it
    workers.launch(d)
    # Then the bolt imported streamparse, saw every number and (auto_ack) had each tree acked
    poll_for(lambda: len(workers.acked()) == 200, timeout=20, message="200 numbers acked")
    assert sorted(int(n) for n in workers.lines("sp-seen-")) == list(range(200))
    # and its self.logger line is in the worker's log, under pystorm's logger name
    line = next(json.loads(s) for s in log_of(d).splitlines() if "streamparse sink" in s)
    assert line["event"] == "streamparse sink sink ready" and line["logger"] == "pystorm.component.sink"
    assert line["component"] == "sink" and line["level"] == "info"


def test_a_heartbeat_summarises_the_latency_samples_from_an_even_subsample() -> None:
    from collections import deque

    from squall.worker.executors.spout import SUMMARY_SAMPLES
    from squall.worker.process.lifecycle import summarise_stats

    # Given two spout tasks' deques: latencies of 0 to 199,999 µs, odd and even between them
    a = deque((i * 1e-6 for i in range(0, 200_000, 2)), maxlen=200_000)
    b = deque((i * 1e-6 for i in range(1, 200_000, 2)), maxlen=200_000)
    stats = {"words": {"acked": 7, "latencies": [a, b]}, "count": {"executed": 3}}
    # When a heartbeat summarises them
    summary = summarise_stats(stats)
    # Then the count is every sample kept, and the rest comes from an even subsample: close
    # to the whole's (within a step of the subsample, in ms), no sample copied into the beat
    latency = summary["words"]["complete_latency_ms"]
    assert latency["count"] == 200_000 and summary["words"]["acked"] == 7
    step_ms = 2 * 200_000 / SUMMARY_SAMPLES * 1e-3  # a deque's step, between its every other µs
    for key, whole in (("mean", 99.9995), ("p50", 100.0), ("p99", 198.0), ("max", 199.999)):
        assert abs(latency[key] - whole) <= step_ms, (key, latency[key])
    assert "latencies" not in summary["words"] and summary["count"] == {"executed": 3}
    # And the deques are left as they were, for the next beat and the spout's tuner
    assert len(a) == len(b) == 100_000
