"""Nimbus's profiling requests (squall.nimbus.profiling) over an in-memory cluster state: which
worker a request may name, what is written for its supervisor, and the cap per node.  The
whole path runs on a secure cluster in tests/security/test_hostile_api.py."""

from __future__ import annotations

from typing import Any

import pytest

from squall.errors import Conflict, InvalidRequest, NotFound, TooBusy, Unavailable
from squall.nimbus.profiling import MAX_PENDING_PER_NODE, WorkerProfiling
from squall.runtime import profiling


class State:
    def __init__(self) -> None:
        self.records = [{"id": "wc-1-1", "name": "wc", "status": "active"}]
        self.requests: dict[str, dict[str, Any]] = {}

    def topologies(self) -> list[dict[str, Any]]:
        return self.records

    def assignment(self, topology_id: str) -> dict[str, Any]:
        return {"workers": [{"node": "n1", "port": 6700}], "hosts": {"n1": "10.0.0.1"}}

    def supervisors(self) -> dict[str, Any]:
        return {"n1": {"logviewer": "https://10.0.0.1:8000"}}

    def profile_requests(self, node: str) -> dict[str, Any]:
        return dict(self.requests.get(node, {}))

    def put_profile_request(self, node: str, request_id: str, record: dict[str, Any]) -> None:
        self.requests.setdefault(node, {})[request_id] = record

    def remove_profile_request(self, node: str, request_id: str) -> None:
        self.requests.get(node, {}).pop(request_id, None)


NOW = 1_800_000_000.0


def service(conf: dict[str, Any] | None = None) -> tuple[WorkerProfiling, State]:
    state = State()
    return WorkerProfiling(state, conf or {}, now=lambda: NOW), state  # type: ignore[arg-type]


def test_a_request_names_the_worker_by_host_or_node_and_is_written_for_its_node() -> None:
    nimbus, state = service()
    answer = nimbus.ask("wc", "start", "10.0.0.1:6700", "30s", "speedscope", user="alice")
    assert answer["status"] == "ok" and answer["id"] == "10.0.0.1:6700" and answer["seconds"] == 30
    assert answer["dumplink"] == "https://10.0.0.1:8000/api/v1/dumps/wc-1-1/10.0.0.1%3A6700"
    written = profiling.request_from_record(state.requests["n1"][answer["request"]])
    assert (written.kind, written.port, written.format) == ("record", 6700, "speedscope")
    assert written.user == "alice"
    dump = nimbus.ask("wc-1-1", "dumpjstack", "n1:6700", locals_=True)
    assert state.requests["n1"][dump["request"]]["locals"] is True


@pytest.mark.parametrize(("args", "error", "words"), [
    (("wc", "dumpjstack", "10.0.0.2:6700"), NotFound, "has no worker"),
    (("wc", "dumpjstack", "10.0.0.1:6701"), NotFound, "has no worker"),
    (("wc", "dumpjstack", "6700"), InvalidRequest, "host:port"),
    (("other", "dumpjstack", "10.0.0.1:6700"), NotFound, "no topology"),
    (("wc", "start", "10.0.0.1:6700", "20"), InvalidRequest, r"worker\.profiler\.max\.secs"),
    (("wc", "start", "10.0.0.1:6700", "nan"), InvalidRequest, "minutes"),
    (("wc", "dumpheap", "10.0.0.1:6700"), NotFound, "no such profiling action"),
])
def test_what_is_refused(args: tuple[Any, ...], error: type[Exception], words: str) -> None:
    nimbus, state = service()
    with pytest.raises(error, match=words):
        nimbus.ask(*args)
    assert state.requests == {}


def test_a_topology_being_killed_or_profiling_off_is_refused() -> None:
    nimbus, state = service({"worker.profiler.enabled": False})
    with pytest.raises(Unavailable, match=r"worker\.profiler\.enabled"):
        nimbus.ask("wc", "dumpjstack", "n1:6700")
    nimbus, state = service()
    state.records[0]["status"] = "killing"
    with pytest.raises(Conflict, match="being killed"):
        nimbus.ask("wc", "dumpjstack", "n1:6700")


def test_a_node_holds_a_few_pending_requests_and_stale_ones_are_dropped() -> None:
    nimbus, state = service()
    for _ in range(MAX_PENDING_PER_NODE):
        nimbus.ask("wc", "dumpjstack", "n1:6700")
    with pytest.raises(TooBusy, match="wait for the supervisor of node n1"):
        nimbus.ask("wc", "dumpjstack", "n1:6700")
    # Its supervisor was down: once they are stale, they go and new ones are taken
    for record in state.requests["n1"].values():
        record["requested"] = NOW - 2 * profiling.PICKUP_SECS - 1
    nimbus.ask("wc", "dumpjstack", "n1:6700")
    assert len(state.requests["n1"]) == 1
