"""One node's worker slots on disk: launching, inspecting and killing workers.

Each slot (port) has a directory ``<local dir>/workers/<port>/`` holding the
files the worker contract defines (see ``squall.worker.main``):
``assignment.json`` (ours), ``heartbeat.json`` and ``errors.jsonl`` (the
worker's), ``worker.log`` (its stdout and stderr) and ``pid`` (ours: pid,
process start time and launch time, so that a restarted supervisor can find
and adopt the workers it left running).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import structlog

from squall import config
from squall.ops.processes import kill_tree

log = structlog.get_logger("squall.supervisor.workers")


def write_json(path: Path, obj: Any) -> None:
    """Atomically, and readable by this user only: an assignment may carry
    the Spark Connect token."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(obj))
    os.replace(tmp, path)


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


@dataclass
class Slot:
    port: int
    dir: Path

    @property
    def assignment_file(self) -> Path:
        return self.dir / "assignment.json"

    def heartbeat(self) -> dict[str, Any] | None:
        return read_json(self.dir / "heartbeat.json")

    def pid_record(self) -> dict[str, Any] | None:
        return read_json(self.dir / "pid")

    def process(self) -> psutil.Process | None:
        """The slot's worker process if it is alive (and really ours)."""
        record = self.pid_record()
        if not record:
            return None
        try:
            proc = psutil.Process(record["pid"])
            # A recycled pid is not our worker: the start time must match.
            if abs(proc.create_time() - record["create_time"]) > 1.0:
                return None
            if proc.status() == psutil.STATUS_ZOMBIE:
                proc.wait(0)
                return None
        except (psutil.Error, KeyError, TypeError):
            return None
        return proc

    def launch(self, node: str, assignment: dict[str, Any],
               children: dict[int, subprocess.Popen[bytes]]) -> int:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.kill_left_children(grace=0.0)  # a dead predecessor's; must go before its pid record
        for stale in ("heartbeat.json",):
            (self.dir / stale).unlink(missing_ok=True)
        write_json(self.assignment_file, assignment)
        env = {**os.environ, "SQUALL_NODE": node}
        with open(self.dir / "worker.log", "ab") as out:
            # A session of its own: the worker outlives a supervisor restart.
            proc = subprocess.Popen([sys.executable, "-m", "squall.worker", "--dir", str(self.dir)],
                                    stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env=env, start_new_session=True, cwd=assignment.get("code_dir") or None)
        children[self.port] = proc
        write_json(self.dir / "pid", {"pid": proc.pid, "create_time": psutil.Process(proc.pid).create_time(),
                                      "launched": time.time()})
        log.info("worker launched", port=self.port, pid=proc.pid, topology=assignment["topology_id"])
        return proc.pid

    def kill(self, reason: str, grace: float) -> None:
        """Ask, wait, then SIGKILL the worker and every process under it."""
        proc = self.process()
        if proc is not None and kill_tree(proc.pid, grace):
            log.info("worker killed", port=self.port, pid=proc.pid, reason=reason)
        self.kill_left_children(grace)

    def kill_left_children(self, grace: float) -> None:
        """Kill the multilang children a worker left behind (``<slot>/pids``).

        The worker's children die with it when it is stopped, but one that
        was SIGKILLed orphans them, and a child that neither reads its stdin
        nor exits (hung, stopped) would live on.  Only processes started
        since the worker's launch are taken for its children: a pid file
        whose pid was reused by another process is just removed.
        """
        pids_dir = self.dir / config.WORKER_PIDS
        try:
            entries = list(pids_dir.iterdir())
        except OSError:
            return
        launched = (self.pid_record() or {}).get("launched", 0.0)
        for entry in entries:
            if entry.name.isdigit():
                pid = int(entry.name)
                try:
                    started = psutil.Process(pid).create_time()
                except psutil.Error:
                    started = None
                if started is not None and started >= launched - 1.0 and kill_tree(pid, grace):
                    log.warning("orphaned multilang child killed", port=self.port, pid=pid)
            entry.unlink(missing_ok=True)

    def new_errors(self, offset: int) -> tuple[list[dict[str, Any]], int]:
        path = self.dir / "errors.jsonl"
        try:
            with open(path, "rb") as f:
                if os.fstat(f.fileno()).st_size < offset:
                    offset = 0  # a new file since we last looked
                f.seek(offset)
                data = f.read()
        except OSError:
            return [], 0
        if not data.endswith(b"\n"):
            data = data[: data.rfind(b"\n") + 1]
        errors = []
        for line in data.splitlines():
            try:
                errors.append(json.loads(line))
            except ValueError:
                continue
        return errors, offset + len(data)
