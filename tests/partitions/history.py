"""A history of operations, as Jepsen keeps one.

Every client operation is two entries: an ``invoke`` when the client starts
it, and its completion when the client knows how it ended -- ``ok`` (it
happened), ``fail`` (it certainly did not) or ``info`` (the client cannot
tell: a timeout, a connection cut mid-request; it may or may not have
happened, and may even take effect later).  An invocation with no
completion by the end of the run counts as ``info``.  A process has one
operation in flight at a time, as in Jepsen, so an invocation and its
completion pair up by process.

The nemesis writes its faults into the same history as process
``"nemesis"``, each an invocation and an ``info`` completion (Jepsen's
convention: what a fault did to the cluster is not something a client
saw), so a checker's excerpt shows the faults around an anomaly.

Entries are appended from many client threads under one lock, each stamped
with the time of the clock passed in and an index: the index is the real
order in which the recorder saw them, which checkers use for "before" and
"after" (a clock under test may be skewed; the recorder's is not).

The history is written as JSON lines, one entry a line, and read back the
same.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

INVOKE, OK, FAIL, INFO = "invoke", "ok", "fail", "info"
TYPES = (INVOKE, OK, FAIL, INFO)
NEMESIS = "nemesis"

Process = int | str


@dataclass(frozen=True)
class Op:
    index: int
    process: Process
    type: str
    f: str
    value: Any
    time: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class HistoryError(ValueError):
    """An entry that breaks the history's rules (names what and where)."""


class History:
    """Appended from any thread; :attr:`ops` is a snapshot in recording order."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._ops: list[Op] = []
        self._open: dict[Process, Op] = {}  # process -> its invocation in flight

    @property
    def ops(self) -> list[Op]:
        with self._lock:
            return list(self._ops)

    def invoke(self, process: Process, f: str, value: Any = None) -> Op:
        with self._lock:
            if process in self._open:
                pending = self._open[process]
                msg = (f"process {process!r} invoked {f!r} while its {pending.f!r} "
                       f"(index {pending.index}) is still in flight")
                raise HistoryError(msg)
            op = self._append(process, INVOKE, f, value)
            self._open[process] = op
            return op

    def complete(self, invocation: Op, type: str, value: Any = None) -> Op:
        """``invocation``'s completion: ``ok``, ``fail`` or ``info``, with the value it ended with."""
        if type not in (OK, FAIL, INFO):
            msg = f"a completion is ok, fail or info, not {type!r}"
            raise HistoryError(msg)
        with self._lock:
            if self._open.get(invocation.process) != invocation:
                msg = (f"{invocation.f!r} of process {invocation.process!r} (index {invocation.index}) "
                       "is not in flight")
                raise HistoryError(msg)
            del self._open[invocation.process]
            return self._append(invocation.process, type, invocation.f, value)

    def ok(self, invocation: Op, value: Any = None) -> Op:
        return self.complete(invocation, OK, value)

    def fail(self, invocation: Op, value: Any = None) -> Op:
        return self.complete(invocation, FAIL, value)

    def info(self, invocation: Op, value: Any = None) -> Op:
        return self.complete(invocation, INFO, value)

    def _append(self, process: Process, type: str, f: str, value: Any) -> Op:
        op = Op(len(self._ops), process, type, f, value, self._clock())
        self._ops.append(op)
        return op

    def write(self, path: Path) -> None:
        write_ops(self.ops, path)


def write_ops(ops: Iterable[Op], path: Path) -> None:
    with path.open("w") as out:
        for op in ops:
            out.write(json.dumps(op.to_dict(), separators=(",", ":")) + "\n")


def read_ops(path: Path) -> list[Op]:
    """A history written by :func:`write_ops`; a line that is not an entry is named."""
    ops = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        try:
            entry = json.loads(line)
            op = Op(**entry)
        except (ValueError, TypeError) as e:
            msg = f"{path}:{number}: not a history entry ({e}): {line[:120]!r}"
            raise HistoryError(msg) from e
        if op.type not in TYPES:
            msg = f"{path}:{number}: type {op.type!r} is none of {', '.join(TYPES)}"
            raise HistoryError(msg)
        ops.append(op)
    return ops


@dataclass(frozen=True)
class Pair:
    """An invocation and its completion (None: none by the end, which counts as info)."""

    invoke: Op
    completion: Op | None

    @property
    def type(self) -> str:
        return self.completion.type if self.completion is not None else INFO

    @property
    def end(self) -> int:
        """The index by which the operation's outcome was known (the history's end if never)."""
        return self.completion.index if self.completion is not None else 1 << 62


def pairs(ops: Iterable[Op]) -> Iterator[Pair]:
    """Each invocation with its completion, in the order of the invocations."""
    open_: dict[Process, Op] = {}
    found: dict[int, Op | None] = {}
    invocations: list[Op] = []
    for op in ops:
        if op.type == INVOKE:
            invocations.append(op)
            found[op.index] = None
            open_[op.process] = op
        elif op.process in open_:
            found[open_.pop(op.process).index] = op
    for invocation in invocations:
        yield Pair(invocation, found[invocation.index])
