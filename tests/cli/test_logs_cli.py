"""`squall logs`: which workers' logs it reads, which lines a component's are, and following
a log across a rotation.  (Against a real dev cluster: tests/cluster/test_error_traces.py.)"""

from __future__ import annotations

import io
from typing import Any

import pytest

from squall.cli import logs
from squall.errors import SquallError

PAGE = {"name": "wc", "workers": [
    {"host": "10.0.0.1", "port": 6700, "componentNumTasks": {"split": 2, "__acker": 1},
     "workerLogLink": "https://n1:8000/api/v1/log?file=wc-1%2F6700%2Fworker.log"},
    {"host": "10.0.0.2", "port": 6701, "componentNumTasks": {"count": 2},
     "workerLogLink": "https://n2:8000/api/v1/log?file=wc-1%2F6701%2Fworker.log"}]}


def test_the_workers_of_a_component_and_their_links() -> None:
    assert [w.worker for w in logs.worker_logs(PAGE, None)] == ["10.0.0.1:6700", "10.0.0.2:6701"]
    link = PAGE["workers"][1]["workerLogLink"]
    assert logs.worker_logs(PAGE, "count") == [logs.WorkerLog("10.0.0.2:6701", link)]
    with pytest.raises(SquallError, match="no worker runs component 'nope' of topology 'wc'"):
        logs.worker_logs(PAGE, "nope")
    bare = {"name": "wc", "workers": [{**PAGE["workers"][0], "workerLogLink": ""}]}
    with pytest.raises(SquallError, match="serves no logs"):
        logs.worker_logs(bare, None)


LINES = [
    b"2026-11-26T10:00:00.1Z [info     ] hello                component=split n=1",
    b"2026-11-26T10:00:00.2Z [info     ] hello                component=splitter n=2",
    b"2026-11-26T10:00:00.3Z [warning  ] component error      component=split error='ValueError: x'",
    b"Traceback (most recent call last):",
    b'  File "bolts.py", line 12, in process',
    b"ValueError: x",
    b"2026-11-26T10:00:00.4Z [info     ] worker pinned to a core cpu=0",
    b'{"component": "split", "event": "json line"}',
]


def test_a_components_lines_are_its_own_and_what_continues_them() -> None:
    kept = list(logs.component_lines(LINES, "split"))
    assert kept == [LINES[0], *LINES[2:6], LINES[7]]  # not "splitter", not the worker's own line
    assert list(logs.component_lines(LINES, None)) == LINES


class FakeReader:
    """A log that grows, then rotates, between reads."""

    def __init__(self) -> None:
        self.files = {"10.0.0.1:6700": b"x" * 10 + b"\nold line component=split\n"}
        self.asked: list[tuple[int | None, int]] = []

    def page(self, log: logs.WorkerLog, start: int | None, length: int) -> tuple[bytes, int, int]:
        data = self.files[log.worker]
        self.asked.append((start, length))
        lo = max(0, len(data) - length) if start is None else min(start, len(data))
        return data[lo:lo + length], lo, len(data)


def test_following_prints_what_a_log_gains_whole_lines_only_and_after_a_rotation() -> None:
    reader = FakeReader()
    out = io.StringIO()
    log = logs.WorkerLog("10.0.0.1:6700", "link")
    grows = [b"new line one\nnew line two (half", b") done\n", None]

    def sleep(_secs: float) -> None:
        more = grows.pop(0)
        if more is None:  # rotated: the file starts again
            reader.files[log.worker] = b"after rotation\n"
        else:
            reader.files[log.worker] += more

    logs.show(reader, [log], None, None, follow=True, out=out, sleep=sleep, rounds=3)  # type: ignore[arg-type]
    assert out.getvalue().splitlines() == [
        "10.0.0.1:6700  " + "x" * 10, "10.0.0.1:6700  old line component=split",
        "10.0.0.1:6700  new line one", "10.0.0.1:6700  new line two (half) done",
        "10.0.0.1:6700  after rotation"]


def test_grep_keeps_the_lines_holding_the_text() -> None:
    reader = FakeReader()
    out = io.StringIO()
    any_log: Any = logs.WorkerLog("10.0.0.1:6700", "link")
    logs.show(reader, [any_log], None, "old", follow=False, out=out)  # type: ignore[arg-type]
    assert out.getvalue() == "10.0.0.1:6700  old line component=split\n"
    assert reader.asked == [(None, logs.GREP_BYTES)]
