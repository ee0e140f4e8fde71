"""The supervisor's worker profiler: the profile requests nimbus wrote for this node's workers
(squall.runtime.profiling says what each asks and decides what to do), carried out with
py-spy on the worker's pid as this supervisor knows it.

py-spy reads a process's stacks from outside it (ptrace and /proc), so the supervisor, root
where workers run sandboxed as their topology's user, reaches them in their own pid namespace
through the host pid the launcher recorded.  What it writes goes beside the worker's log
(workers-artifacts/<topology id>/<port>/), where the logviewer lists and serves it; the
``worker.profiler.keep.files`` newest are kept.

Everything runs on a thread of its own, woken by a ZooKeeper watch on this node's requests:
a dump takes a moment, a record minutes, a restart the worker's shutdown grace; none of
them holds the supervisor's timers.  A py-spy that fails, hangs or is missing fails the
request only (its reason in the request's ``.error.txt``).
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from squall.cluster.state import ClusterState
from squall.cluster.watches import ChildrenWatch
from squall.runtime import profiling
from squall.runtime.profiling import (
    Dump,
    Fail,
    Forget,
    Instruction,
    Interrupt,
    ProfileRequest,
    Record,
    Restart,
)
from squall.security.files import write_private
from squall.supervisor import logfiles
from squall.supervisor.launcher import Launcher
from squall.supervisor.workers import read_json

log = structlog.get_logger("squall.supervisor.profiler")

ERROR_CHARS = 4000  # of py-spy's own output, kept in an error file
RECORD_GRACE_SECS = 30.0  # a record past its length by this much is killed
# py-spy takes ^C as "write what you have" only once it is sampling; before, ^C just kills
# it (and the record is lost): an interrupt asked sooner waits until the record is this old.
INTERRUPTIBLE_AFTER_SECS = 1.0
IDLE_WAKE_SECS = 5.0  # looks again this often without a watch firing (a request missed)
BUSY_WAKE_SECS = 0.5  # while records run: how soon one that ended is noticed


def find_py_spy(executable: str = sys.executable) -> str | None:
    """py-spy beside the running Python (its virtualenv's bin), else on PATH."""
    beside = Path(executable).parent / "py-spy"
    if beside.is_file():
        return str(beside)
    return shutil.which("py-spy")


NO_PY_SPY = ("py-spy is not installed beside this supervisor's Python ({}) nor on its PATH: "
             "`pip install py-spy` in the supervisor's environment (a dependency of squall)")


@dataclass
class _Running:
    proc: subprocess.Popen[bytes]
    record: Record
    partial: Path  # where py-spy writes; renamed to the record's name once whole
    deadline: float  # local clock: killed past it
    started: float  # local clock
    interrupt_at: float | None = None  # local clock: when to send it ^C (an interrupt asked)


class WorkerProfiler:
    """This node's profile requests, carried out (see the module's docstring)."""

    def __init__(self, conf: dict[str, Any], node: str, local_dir: Path, state: ClusterState,
                 launcher: Launcher, now: Callable[[], float] = time.time,
                 local: Callable[[], float] = time.monotonic) -> None:
        self.conf = conf
        self.node = node
        self.local_dir = local_dir
        self.state = state
        self.launcher = launcher
        self.now = now
        self.local = local
        self.core = profiling.ProfilerCore()
        self.py_spy = find_py_spy()
        self._running: dict[int, _Running] = {}
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._watch: ChildrenWatch | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._watch = self.state.watch_profile_requests(self.node, lambda _ids: self._wake.set())
        self._thread = threading.Thread(target=self._loop, name="supervisor-profiler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop looking; records under way are interrupted (they write what they sampled)."""
        self._stop.set()
        self._wake.set()
        if self._watch is not None:
            self._watch.stop()
        if self._thread is not None:
            self._thread.join(10)
        for running in self._running.values():
            _interrupt(running.proc)
        for running in list(self._running.values()):
            try:
                running.proc.wait(5)
            except subprocess.TimeoutExpired:
                running.proc.kill()
                running.proc.wait()
        self._running.clear()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.round()
            except Exception:  # noqa: BLE001 - ZooKeeper or disk trouble: next round
                log.exception("profile requests round failed")
            self._wake.wait(BUSY_WAKE_SECS if self._running else IDLE_WAKE_SECS)
            self._wake.clear()

    # -- one round --------------------------------------------------------------------------

    def round(self) -> None:
        """Notice the records that ended, then act on the requests pending."""
        self._reap()
        requests = []
        for name, raw in self.state.profile_requests(self.node).items():
            try:
                request = profiling.request_from_record(raw)
                if request.node != self.node or request.id != name:
                    msg = f"written under node {self.node}/{name}, names {request.node}/{request.id}"
                    raise ValueError(msg)
            except ValueError as e:
                log.warning("malformed profile request dropped", request=name[:40], reason=str(e))
                self.state.remove_profile_request(self.node, name)
                continue
            requests.append(request)
        for instruction in self.core.requests(requests, self._workers(), self.now()):
            self._execute(instruction)

    def _workers(self) -> dict[int, str]:
        """port -> the topology its live worker runs (as this supervisor assigned it)."""
        out = {}
        for port, slot in self.launcher.slots.items():
            topology_id = (read_json(slot.assignment_file) or {}).get("topology_id")
            if isinstance(topology_id, str) and slot.process() is not None:
                out[port] = topology_id
        return out

    def _execute(self, instruction: Instruction) -> None:
        if isinstance(instruction, Forget):
            self.state.remove_profile_request(self.node, instruction.request.id)
        elif isinstance(instruction, Fail):
            request = instruction.request
            self._write(request, instruction.name, instruction.reason + "\n")
            log.warning("profile request failed", request=request.id, kind=request.kind, port=request.port,
                        reason=instruction.reason)
        elif isinstance(instruction, Dump):
            self._dump(instruction)
        elif isinstance(instruction, Record):
            self._record(instruction)
        elif isinstance(instruction, Interrupt):
            running = self._running.get(instruction.port)
            if running is not None:
                running.interrupt_at = running.started + INTERRUPTIBLE_AFTER_SECS
                self._reap()
        elif isinstance(instruction, Restart):
            self._restart(instruction.request)

    # -- the actions ------------------------------------------------------------------------

    def _pid(self, request: ProfileRequest) -> int | None:
        slot = self.launcher.slots.get(request.port)
        proc = slot.process() if slot is not None else None
        return proc.pid if proc is not None else None

    def _failed(self, request: ProfileRequest, reason: str) -> None:
        self._execute(Fail(request, reason, profiling.output_name(request, self.now(), error=True)))

    def _dump(self, dump: Dump) -> None:
        request = dump.request
        pid = self._pid(request)
        if self.py_spy is None or pid is None:
            self._failed(request, NO_PY_SPY.format(sys.executable) if pid else "the worker has exited")
            return
        command = [self.py_spy, "dump", "--pid", str(pid), *(["--locals"] if request.locals else [])]
        limit = self.conf["worker.profiler.dump.timeout.secs"]
        try:
            done = subprocess.run(command, capture_output=True, timeout=limit, stdin=subprocess.DEVNULL,
                                  check=False)
        except subprocess.TimeoutExpired:
            self._failed(request, f"py-spy dump took over {limit} s: stopped")
            return
        if done.returncode != 0:
            why = _tail(done.stdout + done.stderr)
            self._failed(request, f"py-spy dump failed (exit {done.returncode}): {why}")
            return
        self._write(request, dump.name, done.stdout.decode(errors="replace"))
        log.info("worker stacks dumped", port=request.port, pid=pid, request=request.id, file=dump.name)

    def _record(self, record: Record) -> None:
        request = record.request
        pid = self._pid(request)
        if self.py_spy is None or pid is None:
            self._failed(request, NO_PY_SPY.format(sys.executable) if pid else "the worker has exited")
            self._execute_all(self.core.ended(request.port, self.now()))
            return
        partial = self._dir(request) / f".{record.name}.part"
        seconds = max(1, round(record.seconds))
        # --idle: a worker waiting on its queues still shows where (and a record never comes
        # out empty); --nonblocking: the worker is not paused a hundred times a second.
        command = [self.py_spy, "record", "--pid", str(pid), "--duration", str(seconds), "--format",
                   request.format, "--output", str(partial), "--idle", "--nonblocking"]
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        started = self.local()
        self._running[request.port] = _Running(proc, record, partial, started + seconds + RECORD_GRACE_SECS,
                                               started)
        log.info("worker profile recording", port=request.port, pid=pid, seconds=seconds, request=request.id)

    def _reap(self) -> None:
        for port, running in list(self._running.items()):
            if running.proc.poll() is None:
                if self.local() > running.deadline:
                    running.proc.kill()
                elif running.interrupt_at is not None and self.local() >= running.interrupt_at:
                    running.interrupt_at = None
                    _interrupt(running.proc)
                continue
            del self._running[port]
            _, err = running.proc.communicate()
            request, name = running.record.request, running.record.name
            try:
                whole = running.partial.stat().st_size > 0
            except OSError:
                whole = False
            if running.proc.returncode == 0 and whole:
                running.partial.rename(running.partial.parent / name)
                self._prune(running.partial.parent)
                log.info("worker profile written", port=port, request=request.id, file=name)
            else:
                running.partial.unlink(missing_ok=True)
                self._failed(request, f"py-spy record failed (exit {running.proc.returncode}): {_tail(err)}")
            self._execute_all(self.core.ended(port, self.now()))

    def _restart(self, request: ProfileRequest) -> None:
        slot = self.launcher.slots.get(request.port)
        if slot is None:
            return
        pid = self._pid(request)
        self.launcher.kill(slot, "profiler-restart", {"request": request.id, "user": request.user})
        self._write(request, profiling.output_name(request, self.now()),
                    f"worker {request.worker} (pid {pid}) restarted as {request.user or 'asked'}; its "
                    "supervisor launches it again\n")

    def _execute_all(self, instructions: list[Instruction]) -> None:
        for instruction in instructions:
            self._execute(instruction)

    # -- the files ---------------------------------------------------------------------------

    def _dir(self, request: ProfileRequest) -> Path:
        return logfiles.worker_dir(self.local_dir, request.topology_id, request.port)

    def _write(self, request: ProfileRequest, name: str, text: str) -> None:
        directory = self._dir(request)
        if not directory.is_dir():  # never launched here: nobody could read it anyway
            return
        write_private(directory / name, text)
        self._prune(directory)

    def _prune(self, directory: Path) -> None:
        try:
            names = [p.name for p in directory.iterdir()]
        except OSError:
            return
        for name in profiling.to_prune(names, self.conf["worker.profiler.keep.files"]):
            (directory / name).unlink(missing_ok=True)


def _interrupt(proc: subprocess.Popen[bytes]) -> None:
    """^C to py-spy record: it stops sampling and writes what it has."""
    if proc.poll() is None:
        try:
            proc.send_signal(signal.SIGINT)
        except ProcessLookupError:
            pass


def _tail(output: bytes) -> str:
    text = output.decode(errors="replace").strip()
    return text[-ERROR_CHARS:] or "(no output)"

