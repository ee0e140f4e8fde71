"""Profiling a running worker (Storm's "JStack", "Profile", "Restart Worker" buttons), as
pure data and decisions: no I/O, time passed in.

Nimbus turns Storm's REST paths (``/api/v1/topology/:id/profiling/<action>/:host-port``)
into a :class:`ProfileRequest` and writes it to ZooKeeper under the worker's node
(squall.cluster.state); that node's supervisor reads its requests and asks a
:class:`ProfilerCore` what to do, which answers with instructions its shell
(squall.supervisor.profiler) carries out with py-spy, the sampling profiler that reads a
Python process's stacks from outside it:

* ``jstack`` (Storm's dumpjstack): ``py-spy dump``, every thread's stack, once;
* ``record`` (Storm's start): ``py-spy record`` for N seconds, a flame graph (SVG) or a
  speedscope profile (JSON);
* ``stop``: ends the record under way early (py-spy writes what it sampled so far);
* ``dumpprofile``: writes the record under way now, and records on in a new file until
  the start's time is up (py-spy cannot write a file and keep sampling);
* ``restart`` (Storm's restartworker): the worker is killed; its supervisor starts it again.

Storm's dumpheap has no analogue: a Python worker has no heap to dump (nimbus refuses it).

What a request produces lands in the worker's artifacts directory, beside its log, named
``<kind>-<UTC time>-<request id>.<txt|svg|json>`` (``.error.txt`` holding why, when it
could not be done), where the logviewer lists and serves it.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

KINDS = ("jstack", "record", "stop", "dumpprofile", "restart")
# Storm's action in the REST path -> the kind asked of the supervisor (dumpheap: none).
STORM_ACTIONS = {"start": "record", "stop": "stop", "dumpprofile": "dumpprofile",
                 "dumpjstack": "jstack", "restartworker": "restart", "dumpheap": None}
FORMATS = {"flamegraph": "svg", "speedscope": "json"}  # py-spy's format -> the file's extension
# A request not picked up this long after it was made is dropped (its worker moved, its
# supervisor was down): run late, it would profile something nobody is looking at any more.
PICKUP_SECS = 120.0
MIN_RECORD_SECS = 1.0
RESUME_MIN_SECS = 1.0  # a dumpprofile leaves less than this: no new record for the remainder

_ID = re.compile(r"[0-9a-f]{16}")
_OUTPUT = re.compile(r"(jstack|record|stop|dumpprofile|restart)-(\d{8}T\d{6}Z)-([0-9a-f]{16})"
                     r"(?:-(\d{1,3}))?\.(txt|svg|json|error\.txt)")


@dataclass(frozen=True)
class ProfileRequest:
    """One request for one worker (``node`` and ``port``) of one topology; ``seconds``:
    a record's length; ``requested``: when nimbus took it (wall seconds)."""

    id: str
    topology_id: str
    node: str
    port: int
    kind: str
    requested: float
    seconds: float = 0.0
    format: str = "flamegraph"
    locals: bool = False
    user: str | None = None

    def to_record(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def expires(self) -> float:
        return self.requested + PICKUP_SECS

    @property
    def worker(self) -> str:
        return f"{self.node}:{self.port}"


def request_from_record(raw: Any) -> ProfileRequest:
    """A request as ZooKeeper holds it; ValueError naming what is wrong (a supervisor skips it)."""
    if not isinstance(raw, Mapping):
        msg = f"a profile request is a JSON object, got {type(raw).__name__}"
        raise ValueError(msg)
    try:
        request = ProfileRequest(
            id=str(raw["id"]), topology_id=str(raw["topology_id"]), node=str(raw["node"]), port=raw["port"],
            kind=str(raw["kind"]), requested=raw["requested"], seconds=raw.get("seconds", 0.0),
            format=str(raw.get("format", "flamegraph")), locals=raw.get("locals") is True,
            user=None if raw.get("user") is None else str(raw["user"]))
    except KeyError as e:
        msg = f"a profile request without {e.args[0]!r}"
        raise ValueError(msg) from None
    check(request)
    return request


def check(request: ProfileRequest) -> None:
    """ValueError when a request is not one a supervisor could carry out as it stands."""
    if not _ID.fullmatch(request.id):
        msg = f"a profile request's id is 16 hex digits, got {request.id[:40]!r}"
        raise ValueError(msg)
    if request.kind not in KINDS:
        msg = f"no such profile request kind {request.kind[:40]!r} ({', '.join(KINDS)})"
        raise ValueError(msg)
    if not _whole(request.port) or not 0 < request.port < 65536:
        msg = f"not a port: {request.port!r}"
        raise ValueError(msg)
    if not _finite(request.requested):
        msg = f"not a time: {request.requested!r}"
        raise ValueError(msg)
    if request.format not in FORMATS:
        msg = f"no such profile format {request.format[:40]!r} ({', '.join(FORMATS)})"
        raise ValueError(msg)
    if request.kind == "record" and (not _finite(request.seconds) or request.seconds < MIN_RECORD_SECS):
        msg = f"a record lasts {MIN_RECORD_SECS:g} s or more, got {request.seconds!r}"
        raise ValueError(msg)


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def record_secs(text: str, max_secs: float) -> float:
    """Storm's ``:timeout`` path segment: minutes (``10``, Storm's unit), or seconds with an
    ``s`` (``30s``, what Squall's UI and CLI send); at most ``max_secs`` seconds
    (worker.profiler.max.secs).  ValueError saying what is wrong."""
    raw = text.strip().lower()
    seconds = raw.endswith("s")
    number = raw[:-1] if seconds else raw
    try:
        value = float(number) if re.fullmatch(r"[0-9]{1,6}(\.[0-9]{1,3})?", number) else math.nan
    except ValueError:
        value = math.nan
    if math.isnan(value):
        msg = f"the profiling timeout is minutes (10) or seconds (30s), got {text[:40]!r}"
        raise ValueError(msg)
    secs = value if seconds else value * 60
    if not MIN_RECORD_SECS <= secs <= max_secs:
        msg = (f"a profile lasts {MIN_RECORD_SECS:g} to {max_secs:g} seconds (worker.profiler.max.secs), "
               f"got {text[:40]!r}")
        raise ValueError(msg)
    return secs


def host_port(text: str) -> tuple[str, int]:
    """Storm's ``:host-port`` segment (``host:port``); ValueError when it is not one."""
    host, colon, port = text.rpartition(":")
    if not colon or not host or not port.isdigit() or len(port) > 5 or not 0 < int(port) < 65536:
        msg = f"a worker is named host:port, got {text[:200]!r}"
        raise ValueError(msg)
    return host, int(port)


# -- the files -----------------------------------------------------------------------------------


def stamp(when: float) -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(when))


def output_name(request: ProfileRequest, when: float, error: bool = False, part: int = 0) -> str:
    """The file a request's outcome is written to; ``part``: the record's nth file (a dumpprofile
    cut it and it recorded on)."""
    ext = "error.txt" if error else FORMATS[request.format] if request.kind == "record" else "txt"
    suffix = f"-{part}" if part else ""
    return f"{request.kind}-{stamp(when)}-{request.id}{suffix}.{ext}"


@dataclass(frozen=True, order=True)
class OutputFile:
    """A file :func:`output_name` named, as a request to the logviewer names it."""

    stamp: str
    request_id: str
    part: int
    kind: str
    ext: str
    name: str = field(compare=False)

    @property
    def failed(self) -> bool:
        return self.ext == "error.txt"


def output_file(name: str) -> OutputFile | None:
    """The output file ``name`` is, or None when it is none (no path, nothing else)."""
    match = _OUTPUT.fullmatch(name)
    if match is None:
        return None
    kind, when, request_id, part, ext = match.groups()
    return OutputFile(when, request_id, int(part or 0), kind, ext, name)


def to_prune(names: Iterable[str], keep: int) -> list[str]:
    """The output files of one worker to delete so that the ``keep`` newest stay."""
    outputs = sorted(o for o in (output_file(n) for n in names) if o is not None)
    return [o.name for o in outputs[:max(0, len(outputs) - keep)]]


# -- the supervisor's decisions ------------------------------------------------------------------


@dataclass(frozen=True)
class Dump:
    """Write every thread's stack of the worker (``py-spy dump``) to ``name``."""

    request: ProfileRequest
    name: str


@dataclass(frozen=True)
class Record:
    """Sample the worker for ``seconds`` into ``name``."""

    request: ProfileRequest
    seconds: float
    name: str


@dataclass(frozen=True)
class Interrupt:
    """End the record under way on ``port`` now (it writes what it sampled)."""

    port: int


@dataclass(frozen=True)
class Restart:
    request: ProfileRequest


@dataclass(frozen=True)
class Fail:
    """The request cannot be done: ``reason`` goes to ``name``, for whoever waits on it."""

    request: ProfileRequest
    reason: str
    name: str


@dataclass(frozen=True)
class Forget:
    """Remove the request from ZooKeeper: it is done, or never will be."""

    request: ProfileRequest


Instruction = Dump | Record | Interrupt | Restart | Fail | Forget


@dataclass
class _Recording:
    request: ProfileRequest
    until: float  # when the whole record (all its parts) ends
    part: int = 0
    resume: bool = False  # a dumpprofile cut it: record on once it has written


class ProfilerCore:
    """One supervisor's decisions about the profile requests for its workers.

    :meth:`requests` is told the requests for this node and the workers running now
    (port -> topology id) and returns what to do; :meth:`ended` is told a record has
    ended.  Each request is acted on once: its id is remembered until it has left
    ZooKeeper."""

    def __init__(self) -> None:
        self.recording: dict[int, _Recording] = {}
        self.handled: set[str] = set()

    def requests(self, pending: Iterable[ProfileRequest], running: Mapping[int, str],
                 now: float) -> list[Instruction]:
        pending = list(pending)
        self.handled &= {r.id for r in pending}  # gone from ZooKeeper: forgotten here too
        out: list[Instruction] = []
        for request in sorted(pending, key=lambda r: (r.requested, r.id)):
            if request.id not in self.handled:
                out += self._decide(request, running, now)
            out.append(Forget(request))
            self.handled.add(request.id)
        return out

    def _decide(self, request: ProfileRequest, running: Mapping[int, str], now: float) -> list[Instruction]:
        def fail(reason: str) -> list[Instruction]:
            return [Fail(request, reason, output_name(request, now, error=True))]

        if now > request.expires:
            return fail(f"not carried out within {PICKUP_SECS:g} s of being asked (the supervisor was busy "
                        "or down); ask again")
        if running.get(request.port) != request.topology_id:
            return fail(f"no worker of topology {request.topology_id} runs on {request.worker} now")
        under_way = self.recording.get(request.port)
        if request.kind == "jstack":
            return [Dump(request, output_name(request, now))]
        if request.kind == "restart":
            return [Restart(request)]
        if request.kind == "record":
            if under_way is not None:
                return fail(f"a profile of this worker is being recorded already (until "
                            f"{stamp(under_way.until)}); stop it first")
            self.recording[request.port] = _Recording(request, now + request.seconds)
            return [Record(request, request.seconds, output_name(request, now))]
        if under_way is None:
            return fail(f"no profile of {request.worker} is being recorded: start one first")
        under_way.resume = request.kind == "dumpprofile"
        return [Interrupt(request.port)]

    def ended(self, port: int, now: float) -> list[Instruction]:
        """The record on ``port`` ended (its time was up, or it was interrupted): after a
        dumpprofile, record on until the start's time is up."""
        done = self.recording.pop(port, None)
        if done is None or not done.resume or done.until - now < RESUME_MIN_SECS:
            return []
        part = done.part + 1
        self.recording[port] = _Recording(done.request, done.until, part)
        return [Record(done.request, done.until - now, output_name(done.request, now, part=part))]
