"""``squall profile``'s own decisions (squall.cli.profile): which workers, which threads, and
waiting for an outcome on a logviewer (answers given here; the real path runs on a secure
cluster in tests/security/test_hostile_api.py)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from squall.cli.profile import Outputs, executor_threads, workers_of
from squall.errors import SquallError

PAGE = {"name": "wc", "spouts": [{"spoutId": "sentences"}],
        "bolts": [{"boltId": "split"}, {"boltId": "count"}],
        "workers": [{"host": "h1", "port": 6700, "componentNumTasks": {"split": 2, "sentences": 1}},
                    {"host": "h2", "port": 6701, "componentNumTasks": {"count": 2}}]}


def test_the_workers_running_a_component_and_why_none() -> None:
    assert [w.name for w in workers_of(PAGE, "split")] == ["h1:6700"]
    known = r"has no component 'nope' \(its components: count, sentences, split\)"
    with pytest.raises(SquallError, match=known):
        workers_of(PAGE, "nope")
    with pytest.raises(SquallError, match="no worker runs component 'count' of topology 'wc' now"):
        workers_of({**PAGE, "workers": PAGE["workers"][:1]}, "count")


def test_the_components_executor_threads_in_a_dump() -> None:
    dump = ('Thread 6 (idle): "executor-split-5"\n    run (x.py:1)\nThread 7 (idle): "executor-split-6"\n'
            'Thread 8 (idle): "executor-splitter-9"\nThread 2 (idle): "MainThread"\n')
    assert executor_threads(dump, "split") == ["executor-split-5", "executor-split-6"]


class Logviewer:
    """A logviewer's answers: the listing after ``after`` polls, then the file."""

    def __init__(self, files: list[dict[str, Any]], body: bytes, after: int = 1) -> None:
        self.files, self.body, self.after, self.polls = files, body, after, 0

    def get(self, url: str, headers: dict[str, str]) -> httpx.Response:
        request = httpx.Request("GET", url)
        if url.endswith("/h1%3A6700"):
            self.polls += 1
            return httpx.Response(200, json={"files": self.files if self.polls > self.after else []},
                                  request=request)
        return httpx.Response(200, content=self.body, request=request)


class Reader:
    mint = None  # an insecure cluster: no token

    def __init__(self, viewer: Logviewer) -> None:
        self.get = viewer.get

    def token(self, link: str, fresh: bool = False) -> None:
        return None


LINK = "https://h1:8000/api/v1/dumps/wc-1-1/h1%3A6700"


def outputs(viewer: Logviewer) -> Outputs:
    now = [0.0]

    def sleep(secs: float) -> None:
        now[0] += secs

    return Outputs(Reader(viewer), clock=lambda: now[0], sleep=sleep)  # type: ignore[arg-type]


def test_waiting_for_an_outcome_its_failure_and_its_absence() -> None:
    mine = {"request": "ab" * 8, "part": 0, "failed": False, "name": "jstack-x.txt",
            "link": "/api/v1/dumps/wc-1-1/h1%3A6700/jstack-x.txt"}
    viewer = Logviewer([{**mine, "request": "cd" * 8}, mine], b"Thread 1", after=3)
    entry, data = outputs(viewer).wait(LINK, "ab" * 8, "h1:6700", 60)
    assert (entry["name"], data, viewer.polls) == ("jstack-x.txt", b"Thread 1", 4)
    failed = Logviewer([{**mine, "failed": True}], b"py-spy dump failed (exit 1): denied\n")
    with pytest.raises(SquallError, match=r"worker h1:6700: py-spy dump failed \(exit 1\): denied$"):
        outputs(failed).wait(LINK, "ab" * 8, "h1:6700", 60)
    with pytest.raises(SquallError, match="nothing written for request"):
        outputs(Logviewer([], b"", after=10**6)).wait(LINK, "ab" * 8, "h1:6700", 5)
