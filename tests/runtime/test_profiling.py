"""Worker profile requests and the supervisor's decisions about them (squall.runtime.profiling):
pure, time passed in."""

from __future__ import annotations

import dataclasses

import pytest

from squall.runtime import profiling
from squall.runtime.profiling import (
    Dump,
    Fail,
    Forget,
    Interrupt,
    ProfilerCore,
    ProfileRequest,
    Record,
    Restart,
)

T0 = 1_800_000_000.0
TOPOLOGY = "wc-1-1800000000"


def request(kind: str = "jstack", port: int = 6700, requested: float = T0, seconds: float = 0.0,
            n: int = 1, **kw: object) -> ProfileRequest:
    return ProfileRequest(id=f"{n:016x}", topology_id=TOPOLOGY, node="n1", port=port, kind=kind,
                          requested=requested, seconds=seconds, **kw)  # type: ignore[arg-type]


RUNNING = {6700: TOPOLOGY}


def test_a_stack_dump_is_taken_once_and_the_request_forgotten() -> None:
    core = ProfilerCore()
    r = request()
    first = core.requests([r], RUNNING, T0 + 1)
    assert first == [Dump(r, f"jstack-20270115T080001Z-{r.id}.txt"), Forget(r)]
    # Still listed (the delete has not landed): forgotten again, never dumped twice.
    assert core.requests([r], RUNNING, T0 + 2) == [Forget(r)]
    # Gone from ZooKeeper: gone from memory too.
    assert core.requests([], RUNNING, T0 + 3) == []
    assert core.handled == set()


def test_a_request_not_picked_up_in_time_fails_saying_so() -> None:
    r = request()
    out = ProfilerCore().requests([r], RUNNING, T0 + profiling.PICKUP_SECS + 1)
    assert isinstance(out[0], Fail) and "within 120 s" in out[0].reason and out[0].name.endswith(".error.txt")
    assert out[1] == Forget(r)


def test_a_request_for_a_worker_not_running_that_topology_fails() -> None:
    for running in ({}, {6700: "other-2-1"}):
        out = ProfilerCore().requests([request()], running, T0)
        assert isinstance(out[0], Fail)
        assert f"no worker of topology {TOPOLOGY} runs on n1:6700" in out[0].reason


def test_a_record_runs_its_seconds_and_a_second_one_is_refused_meanwhile() -> None:
    core = ProfilerCore()
    r = request("record", seconds=30, format="speedscope")
    assert core.requests([r], RUNNING, T0)[0] == Record(r, 30, f"record-20270115T080000Z-{r.id}.json")
    again = request("record", seconds=5, n=2)
    out = core.requests([again], RUNNING, T0 + 1)
    assert isinstance(out[0], Fail) and "being recorded already" in out[0].reason
    assert core.ended(6700, T0 + 30) == []  # its time was up: nothing more
    assert core.requests([request("record", seconds=5, n=3)], RUNNING, T0 + 31)[0].seconds == 5  # type: ignore[union-attr]


def test_stop_interrupts_the_record_and_dumpprofile_records_on_in_a_new_part() -> None:
    core = ProfilerCore()
    r = request("record", seconds=60)
    core.requests([r], RUNNING, T0)
    assert core.requests([request("dumpprofile", n=2)], RUNNING, T0 + 20)[0] == Interrupt(6700)
    resumed = core.ended(6700, T0 + 21)
    assert resumed == [Record(r, 39, f"record-20270115T080021Z-{r.id}-1.svg")]
    assert core.requests([request("stop", n=3)], RUNNING, T0 + 30)[0] == Interrupt(6700)
    assert core.ended(6700, T0 + 30.5) == []  # stopped: not resumed


def test_stop_or_dumpprofile_without_a_record_fails() -> None:
    for kind in ("stop", "dumpprofile"):
        out = ProfilerCore().requests([request(kind)], RUNNING, T0)
        assert isinstance(out[0], Fail) and "start one first" in out[0].reason


def test_a_dumpprofile_near_the_end_does_not_start_a_sliver() -> None:
    core = ProfilerCore()
    core.requests([request("record", seconds=10)], RUNNING, T0)
    core.requests([request("dumpprofile", n=2)], RUNNING, T0 + 9.5)
    assert core.ended(6700, T0 + 9.6) == []


def test_restart_and_requests_in_the_order_they_were_made() -> None:
    core = ProfilerCore()
    later, earlier = request("jstack", requested=T0 + 5, n=1), request("restart", n=2)
    out = core.requests([later, earlier], RUNNING, T0 + 6)
    assert out[0] == Restart(earlier) and isinstance(out[2], Dump)


def test_requests_from_zookeeper_are_checked() -> None:
    good = request("record", seconds=3).to_record()
    assert profiling.request_from_record(good) == request("record", seconds=3)
    for bad, why in [({**good, "id": "../x"}, "16 hex digits"), ({**good, "kind": "rm"}, "no such profile"),
                     ({**good, "port": True}, "not a port"), ({**good, "port": 70000}, "not a port"),
                     ({**good, "requested": float("nan")}, "not a time"),
                     ({**good, "seconds": 0}, "1 s or more"),
                     ({**good, "format": "x"}, "no such profile format"),
                     ({k: v for k, v in good.items() if k != "node"}, "without 'node'"),
                     ([1], "JSON object")]:
        with pytest.raises(ValueError, match=why):
            profiling.request_from_record(bad)


@pytest.mark.parametrize(("text", "secs"), [("10", 600.0), ("1", 60.0), ("30s", 30.0), ("2.5S", 2.5),
                                            (" 5s ", 5.0)])
def test_storms_timeout_is_minutes_and_an_s_makes_it_seconds(text: str, secs: float) -> None:
    assert profiling.record_secs(text, 600) == secs


@pytest.mark.parametrize("text", ["0", "0s", "11", "601s", "nan", "inf", "-1", "1e3", "", "s", "1" * 20])
def test_a_timeout_out_of_bounds_or_not_a_number_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="profil"):
        profiling.record_secs(text, 600)


def test_host_port() -> None:
    assert profiling.host_port("node-1:6700") == ("node-1", 6700)
    assert profiling.host_port("::1:6700") == ("::1", 6700)
    for bad in ("6700", ":6700", "h:", "h:0", "h:99999", "h:12a", "h:+1"):
        with pytest.raises(ValueError, match="host:port"):
            profiling.host_port(bad)


def test_output_names_are_recognized_and_the_oldest_pruned() -> None:
    r = request("record", seconds=5)
    names = [profiling.output_name(r, T0 + i) for i in range(5)]
    names += [profiling.output_name(dataclasses.replace(r, kind="jstack"), T0 + 10, error=True)]
    assert profiling.output_file(names[-1]) is not None and profiling.output_file(names[-1]).failed  # type: ignore[union-attr]
    for other in ("worker.log", "readers.json", "../jstack-20270115T080000Z-0000000000000001.txt",
                  ".record-20270115T080000Z-0000000000000001.svg.part", "jstack-x-0000000000000001.txt"):
        assert profiling.output_file(other) is None
    assert profiling.to_prune([*names, "worker.log"], keep=3) == names[:3]
    assert profiling.to_prune(names, keep=10) == []
