"""`squall logs`: which workers' logs it reads, which lines a component's are, following a
log across a rotation, and the token nimbus mints for each logviewer.  (Against a real dev
cluster: tests/cluster/test_error_traces.py and tests/security/test_logviewer_tokens.py.)"""

from __future__ import annotations

import io
from typing import Any

import httpx
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


def test_events_are_read_beside_each_workers_log_and_kept_by_component() -> None:
    (first, _second) = logs.worker_logs(PAGE, None, events=True)
    assert first.link == "https://n1:8000/api/v1/log?file=wc-1%2F6700%2Fevents.log"
    lines = [b"2026-12-07T22:10:01.123Z,split,3,default,,['a']",
             b"2026-12-07T22:10:01.124Z,splitter,4,default,,[1]",
             b"2026-12-07T22:10:01.125Z,sentences,1,default,'m,1',['split']"]
    assert list(logs.event_lines(lines, "split")) == lines[:1]
    assert list(logs.event_lines(lines, None)) == lines


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


def test_a_component_with_no_line_says_so_instead_of_printing_nothing(capsys: Any) -> None:
    reader = FakeReader()
    out = io.StringIO()
    any_log: Any = logs.WorkerLog("10.0.0.1:6700", "link")
    logs.show(reader, [any_log], "count", None, follow=False, out=out)  # type: ignore[arg-type]
    assert out.getvalue() == ""
    said = capsys.readouterr().err
    assert "no line logged by component 'count' in the last part of 1 worker log(s)" in said
    assert "set_log_level" in said


class FakeLogviewers:
    """Logviewers that take a token minted for them only, and a nimbus that mints them."""

    def __init__(self) -> None:
        self.minted: list[str] = []
        self.revoked: set[str] = set()

    def mint(self, logviewer: str) -> dict[str, Any]:
        self.minted.append(logviewer)
        return {"token": f"for {logviewer} #{len(self.minted)}", "expires_in_secs": 300}

    def get(self, url: str, headers: dict[str, str]) -> httpx.Response:
        token = headers.get("Authorization", "").removeprefix("Bearer ")
        if not token.startswith("for " + logs.logviewer_of(url)) or token in self.revoked:
            return httpx.Response(401, json={"error": "invalid token"})
        return httpx.Response(200, content=b"a line\n", headers={"X-Log-Start": "0", "X-Log-Size": "7"})


def test_each_logviewer_is_read_with_a_token_minted_for_it_renewed_before_it_expires() -> None:
    viewers, now = FakeLogviewers(), [0.0]
    reader = logs.LogReader({"squall.secure": False}, get=viewers.get, mint=viewers.mint,
                            clock=lambda: now[0])
    first, second = (logs.WorkerLog(w.worker, w.link) for w in logs.worker_logs(PAGE, None))
    for _ in range(3):
        assert reader.page(first, None, 100) == (b"a line\n", 0, 7)
        assert reader.page(second, None, 100)[0] == b"a line\n"
    assert viewers.minted == ["https://n1:8000", "https://n2:8000"]  # one each, kept
    now[0] += 150  # half its life: a new one, before a skewed clock could call it expired
    reader.page(first, None, 100)
    assert viewers.minted[-1] == "https://n1:8000" and len(viewers.minted) == 3
    # Refused anyway (nimbus's key changed): one new token, then the answer
    viewers.revoked.add(f"for https://n1:8000 #{len(viewers.minted)}")
    assert reader.page(first, None, 100)[0] == b"a line\n" and len(viewers.minted) == 4
    reader.close()
