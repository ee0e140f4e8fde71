"""The workers' log files on a node: where they are, who may read them, and the decisions
about them (which name a request may ask for, which page of a file it gets, what a search
finds, when a file rotates, which old logs go) apart from the files themselves.

Storm's layout, under the supervisor's local dir::

    workers-artifacts/<topology id>/<port>/worker.log      the worker's stdout and stderr
                                          /worker.log.1    rotated (newest first)
                                          /events.log      its event logger's sampled tuples
                                                           (squall.worker.event_log), rotated
                                                           as worker.log is: events.log.1, ...
                                          /readers.json    who may read them (see below)

A directory per topology and port, not per slot: a slot that runs another topology
later starts another directory, so one topology's reader never sees another's lines.
The supervisor opens ``worker.log`` (its stdout) and ``events.log`` for the worker (O_APPEND) and owns the
directory; the worker, sandboxed, sees none of it.  ``readers.json`` is written at the
worker's launch: the topology's owner and readers (``topology.users`` and its
``logs.users``), so that its logs can be authorized after the topology is gone.
A request names a file as Storm's logviewer does: ``<topology id>/<port>/worker.log`` (or
``events.log``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from squall.errors import ApiError

ARTIFACTS = "workers-artifacts"
WORKER_LOG = "worker.log"
EVENTS_LOG = "events.log"
LOGS = (WORKER_LOG, EVENTS_LOG)  # what a worker's directory holds that rotates and may be read
READERS = "readers.json"
PAGE_BYTES = 51200  # Storm's logviewer's default page
MAX_PAGE_BYTES = 8 * 1024 * 1024  # one answer's most
SEARCH_CONTEXT = 128  # bytes shown each side of a match (Storm's grep context)
MAX_SEARCH_BYTES = 1024  # the longest search string
DEFAULT_MATCHES = 10

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
_WORKER_FILE = re.compile(r"(worker|events)\.log(\.[1-9][0-9]{0,3})?")
_DAEMON_FILE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}\.log(\.[1-9][0-9]{0,3})?")


class BadLogRequest(ApiError):
    """A request for a log that names no log this node could have (400)."""

    def __init__(self, message: str) -> None:
        super().__init__(400, message)


@dataclass(frozen=True)
class WorkerFile:
    """A worker's log file, as a request names it."""

    topology_id: str
    port: int
    name: str

    @property
    def relative(self) -> str:
        return f"{self.topology_id}/{self.port}/{self.name}"

    def path(self, local_dir: Path) -> Path:
        return worker_dir(local_dir, self.topology_id, self.port) / self.name


def worker_dir(local_dir: Path, topology_id: str, port: int) -> Path:
    return local_dir / ARTIFACTS / topology_id / str(port)


def worker_file(text: str | None) -> WorkerFile:
    """``<topology id>/<port>/worker.log[.N]``; BadLogRequest saying what is wrong with
    anything else (a path of its own, ``..``, another file)."""
    if not text:
        msg = "name a worker's log: file=<topology id>/<port>/worker.log (or events.log)"
        raise BadLogRequest(msg)
    parts = text.split("/")
    if len(parts) != 3 or not _ID.fullmatch(parts[0]) or not parts[1].isdigit() or \
            not _WORKER_FILE.fullmatch(parts[2]):
        msg = (f"not a worker's log: {text[:200]!r} (file=<topology id>/<port>/worker.log or events.log, "
               f"or worker.log.N, events.log.N)")
        raise BadLogRequest(msg)
    return WorkerFile(parts[0], int(parts[1]), parts[2])


def daemon_file(text: str | None) -> str:
    """A daemon's log file's name in storm.log.dir (``supervisor-0.log``): one name, no path."""
    if not text or not _DAEMON_FILE.fullmatch(text):
        msg = f"not a daemon's log file name: {(text or '')[:200]!r} (a name like supervisor.log, no path)"
        raise BadLogRequest(msg)
    return text


def readers_record(topology_id: str, name: str, owner: str | None, conf: Mapping[str, Any]) -> dict[str, Any]:
    """What readers.json holds: who besides admins may read the topology's logs."""
    users = [*(conf.get("topology.users") or ()), *(conf.get("logs.users") or ())]
    return {"topology_id": topology_id, "topology": name, "owner": owner,
            "users": sorted({str(u) for u in users})}


def rotated_name(n: int, name: str = WORKER_LOG) -> str:
    return f"{name}.{n}"


# -- pages and searches --------------------------------------------------------------------------


def page_bounds(size: int, start: int | None, length: int | None) -> tuple[int, int]:
    """(start, end) of the bytes a page request gets of a file of ``size``: Storm's
    defaults (the last PAGE_BYTES), clamped to the file and to MAX_PAGE_BYTES."""
    if length is None:
        length = PAGE_BYTES
    if length < 0 or (start is not None and start < 0):
        msg = f"start and length are byte counts, not negative (start={start}, length={length})"
        raise BadLogRequest(msg)
    length = min(length, MAX_PAGE_BYTES)
    if start is None:
        start = max(0, size - length)
    start = min(start, size)
    return start, min(size, start + length)


def grep_lines(data: bytes, needle: bytes) -> bytes:
    """The lines of ``data`` holding ``needle`` (Storm's ``grep`` parameter of /log)."""
    return b"".join(line for line in data.splitlines(keepends=True) if needle in line)


def needle_of(text: str | None) -> bytes:
    if not text:
        msg = "search-string is missing"
        raise BadLogRequest(msg)
    needle = text.encode()
    if len(needle) > MAX_SEARCH_BYTES:
        msg = f"search-string over {MAX_SEARCH_BYTES} bytes"
        raise BadLogRequest(msg)
    return needle


def find_matches(data: bytes, base: int, needle: bytes, limit: int, lo: int, hi: int) -> list[dict[str, Any]]:
    """Up to ``limit`` matches of ``needle`` starting in ``data[lo:hi]`` (``data`` holds up to
    SEARCH_CONTEXT bytes more each side; ``base`` is the file offset of ``data[0]``), each in
    Storm's shape: its byte offset in the file and the text around it."""
    out: list[dict[str, Any]] = []
    at = data.find(needle, lo)
    while at != -1 and at < hi and len(out) < limit:
        before = data[max(0, at - SEARCH_CONTEXT):at]
        after = data[at + len(needle):at + len(needle) + SEARCH_CONTEXT]
        out.append({"byteOffset": base + at, "beforeString": before.decode(errors="replace"),
                    "afterString": after.decode(errors="replace"),
                    "matchString": needle.decode(errors="replace")})
        at = data.find(needle, at + 1)
    return out


# -- rotation and clean-up -----------------------------------------------------------------------


def to_drop(rotated: Mapping[int, int], current_size: int, cap_bytes: int) -> list[int]:
    """Which rotated files (number -> size; 1 the newest) to delete so that a worker's logs
    stay within ``cap_bytes``: the oldest first, never the file being written."""
    total = current_size + sum(rotated.values())
    drop = []
    for n in sorted(rotated, reverse=True):
        if total <= cap_bytes:
            break
        drop.append(n)
        total -= rotated[n]
    return drop


@dataclass(frozen=True)
class LogDir:
    """One worker's log directory as the clean-up sees it."""

    path: Path
    modified: float  # its newest file's mtime
    size: int
    live: bool  # a worker of this node runs that topology on that port now


def to_remove(dirs: Iterable[LogDir], now: float, age_secs: float, sum_cap_bytes: int) -> list[Path]:
    """Stopped workers' log directories to delete: those untouched for ``age_secs``, then the
    oldest others while all logs together exceed ``sum_cap_bytes`` (Storm's
    logviewer.cleanup.age.mins and logviewer.max.sum.worker.logs.size.mb).  A live
    worker's directory is never removed (its rotation keeps it within its own cap)."""
    dirs = sorted(dirs, key=lambda d: d.modified)
    total = sum(d.size for d in dirs)
    out = []
    for d in dirs:
        if d.live:
            continue
        if now - d.modified > age_secs or total > sum_cap_bytes:
            out.append(d.path)
            total -= d.size
    return out
