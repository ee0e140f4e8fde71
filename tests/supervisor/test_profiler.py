"""The supervisor's profiler shell (squall.supervisor.profiler) with the real py-spy on a real
Python process in a slot: what each request writes beside the worker's log, and what a
failing or missing py-spy leaves.  ZooKeeper is a dict here (the cluster tests,
tests/security/test_hostile_api.py, run the whole path)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from squall.runtime.profiling import ProfileRequest
from squall.supervisor import logfiles
from squall.supervisor.launcher import PID_RECORD, Slot
from squall.supervisor.profiler import WorkerProfiler
from squall.supervisor.workers import write_json
from squall.testing import poll_for

TOPOLOGY = "wc-1-1800000000"
PORT = 6700
WORKER = """
import threading, time
threading.Thread(target=lambda: time.sleep(120), name="executor-split-3", daemon=True).start()
while True:
    sum(range(10000))
"""


class Requests:
    """This node's profile requests as ZooKeeper would hold them."""

    def __init__(self) -> None:
        self.pending: dict[str, Any] = {}

    def profile_requests(self, node: str) -> dict[str, Any]:
        return dict(self.pending)

    def remove_profile_request(self, node: str, request_id: str) -> None:
        self.pending.pop(request_id, None)


class Slots:
    def __init__(self, slot: Slot) -> None:
        self.slots = {slot.port: slot}

    def kill(self, slot: Slot, reason: str, detail: Any = None) -> None:
        slot.kill(reason, 1.0, detail)


@pytest.fixture
def worker(tmp_path: Path) -> Iterator[tuple[WorkerProfiler, Requests, Path, subprocess.Popen[bytes]]]:
    proc = subprocess.Popen([sys.executable, "-c", WORKER])
    # Its executor thread started before anything asks for its stacks (a loaded machine is slow to).
    poll_for(lambda: psutil.Process(proc.pid).num_threads() >= 2, timeout=30, message="the worker's thread")
    slot = Slot(PORT, tmp_path / "workers" / str(PORT))
    slot.dir.mkdir(parents=True)
    created = psutil.Process(proc.pid).create_time()
    write_json(slot.dir / PID_RECORD, {"pid": proc.pid, "create_time": created})
    write_json(slot.assignment_file, {"topology_id": TOPOLOGY})
    out = logfiles.worker_dir(tmp_path, TOPOLOGY, PORT)
    out.mkdir(parents=True)
    requests = Requests()
    conf = {"worker.profiler.keep.files": 20, "worker.profiler.dump.timeout.secs": 20}
    profiler = WorkerProfiler(conf, "n1", tmp_path, requests, Slots(slot))  # type: ignore[arg-type]
    try:
        yield profiler, requests, out, proc
    finally:
        proc.kill()
        proc.wait()
        profiler.stop()


def ask(requests: Requests, kind: str, n: int, seconds: float = 0.0, **kw: Any) -> str:
    request = ProfileRequest(id=f"{n:016x}", topology_id=TOPOLOGY, node="n1", port=PORT, kind=kind,
                             requested=time.time(), seconds=seconds, **kw)
    requests.pending[request.id] = request.to_record()
    return request.id


def written(out: Path, pattern: str) -> list[Path]:
    return sorted(p for p in out.glob(pattern) if p.stat().st_size > 0)


def test_a_stack_dump_names_the_threads_and_a_failure_says_why(worker: Any) -> None:
    profiler, requests, out, _proc = worker
    ask(requests, "jstack", 1)
    profiler.round()
    dump = written(out, "jstack-*-0000000000000001.txt")
    assert dump and '"executor-split-3"' in dump[0].read_text() and requests.pending == {}
    # py-spy failing or missing fails the request only, saying why
    profiler.py_spy = "/bin/false"
    ask(requests, "jstack", 2)
    profiler.round()
    assert "py-spy dump failed (exit 1)" in written(out, "jstack-*-0000000000000002.error.txt")[0].read_text()
    profiler.py_spy = None
    ask(requests, "jstack", 3)
    profiler.round()
    assert "py-spy is not installed" in written(out, "*-0000000000000003.error.txt")[0].read_text()


def test_a_record_stopped_early_and_one_dumped_and_recorded_on(worker: Any) -> None:
    profiler, requests, out, _proc = worker
    ask(requests, "record", 1, seconds=60, format="speedscope")
    profiler.round()
    ask(requests, "stop", 2)
    profiler.round()
    # Stopped: what it sampled is written at once, not after the minute
    poll_for(lambda: (profiler.round(), written(out, "record-*-0000000000000001.json"))[1], timeout=20,
             message="the stopped record written")
    assert not profiler._running
    ask(requests, "record", 3, seconds=60)
    profiler.round()
    ask(requests, "dumpprofile", 4)
    profiler.round()
    # dumpprofile: its file now, and the record goes on in a second part
    poll_for(lambda: (profiler.round(), written(out, "record-*-0000000000000003.svg"))[1], timeout=20,
             message="the dumped record written")
    assert PORT in profiler._running
    ask(requests, "stop", 5)
    profiler.round()
    poll_for(lambda: (profiler.round(), written(out, "record-*-0000000000000003-1.svg"))[1], timeout=20,
             message="its second part written on stop")
    assert b"<svg" in written(out, "record-*-0000000000000003-1.svg")[0].read_bytes()


def test_restart_kills_the_worker_and_old_outputs_are_pruned(worker: Any) -> None:
    profiler, requests, out, proc = worker
    profiler.conf["worker.profiler.keep.files"] = 2
    for n in range(1, 4):
        ask(requests, "stop", n)  # no record: each fails, each leaves its file
        profiler.round()
    assert len(list(out.iterdir())) == 2 and not list(out.glob("*-0000000000000001.*"))
    ask(requests, "restart", 9, user="alice")
    profiler.round()
    assert proc.wait(10) is not None
    assert "restarted as alice" in written(out, "restart-*-0000000000000009.txt")[0].read_text()
