"""Seeded fault schedules, their grudges, and the runner against a recording cluster."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.partitions.history import INFO, INVOKE, NEMESIS, History
from tests.partitions.nemesis import (
    FAULTS,
    LEADER,
    Event,
    Nodes,
    Timing,
    bridge,
    complete_grudge,
    grudge,
    play,
    schedule,
)

NODES = Nodes(("zk",), ("nimbus-a", "nimbus-b"), ("sup-1", "sup-2", "sup-3"))
STOPS = {"isolate": "heal", "partition": "heal", "cut": "heal", "pause": "resume", "kill": "restart",
         "shape": "unshape", "skew": "skew"}


def test_a_seed_gives_one_schedule_bounded_and_ending_healed() -> None:
    first = schedule(42, FAULTS, NODES, length=600)
    assert first == schedule(42, FAULTS, NODES, length=600)
    assert first != schedule(43, FAULTS, NODES, length=600)
    assert len(first) >= 2 * 8 and first[-1].at <= 600
    assert [e.at for e in first] == sorted(e.at for e in first)
    # Every start is followed by its own stop before the next fault begins
    for start, stop in zip(first[::2], first[1::2], strict=True):
        assert (start.phase, stop.phase, start.fault) == ("start", "stop", stop.fault)
        assert STOPS[start.op] == stop.op and stop.at > start.at
        if start.fault == "pause":
            assert stop.at - start.at >= Timing().pause_min - 1e-9 and stop.args == start.args


@pytest.mark.parametrize("fault", FAULTS)
def test_each_fault_class_starts_and_stops_as_named(fault: str) -> None:
    events = schedule(1, [fault], NODES, length=300)
    assert events and {e.fault for e in events} == {fault}
    start, stop = events[0], events[1]
    if fault == "partition-random-node":
        assert start.op == "isolate" and start.args["node"] in NODES.all and stop.op == "heal"
    elif fault == "partition-halves":
        groups = start.args["groups"]
        assert sorted(n for g in groups for n in g) == sorted(NODES.all)
        assert [len(g) for g in groups] == [3, 3]
    elif fault == "partition-supervisor-from-zk":
        [[supervisor, zk]] = start.args["pairs"]
        assert supervisor in NODES.supervisors and zk == "zk"
    elif fault == "partition-leader-from-zk":
        assert start.args["pairs"] == [[LEADER, "zk"]]
    elif fault in ("slow-net", "lossy-net"):
        assert (start.op, stop.op) == ("shape", "unshape") and stop.args == {"node": start.args["node"]}
        assert ("loss_pct" in start.args) == (fault == "lossy-net") != ("rate_kbit" in start.args)
    elif fault == "clock-skew":
        assert 5 <= abs(start.args["secs"]) <= 120 and stop.args["secs"] == 0
        assert start.args["node"] in (LEADER, *NODES.supervisors)  # never the JVM's node, nor an idle standby
    else:
        assert (start.op, stop.op) == {"pause": ("pause", "resume"), "kill": ("kill", "restart")}[fault]
        assert start.args == stop.args and start.args["node"] in (*NODES.all, LEADER)


def test_unknown_fault_classes_are_named() -> None:
    with pytest.raises(ValueError, match=r"unknown fault classes \['partition-everything'\]"):
        schedule(1, ["partition-everything"], NODES, length=60)


def test_grudges_say_who_cannot_reach_whom() -> None:
    assert complete_grudge([["a", "b"], ["c"]]) == {"a": {"c"}, "b": {"c"}, "c": {"a", "b"}}
    assert bridge(["a", "b", "c", "d", "e"]) == {"a": {"d", "e"}, "b": {"d", "e"}, "c": set(),
                                                 "d": {"a", "b"}, "e": {"a", "b"}}
    isolated = grudge(Event(0, "isolate", {"node": "sup-2"}), NODES)
    assert isolated["sup-2"] == set(NODES.all) - {"sup-2"} and isolated["zk"] == {"sup-2"}
    # The leader cut from ZooKeeper: nobody else loses anyone, its standby keeps ZooKeeper
    cut = grudge(Event(0, "cut", {"pairs": [[LEADER, "zk"]]}), NODES, leader="nimbus-a")
    assert cut == {**{n: set() for n in NODES.all}, "nimbus-a": {"zk"}, "zk": {"nimbus-a"}}
    assert grudge(Event(0, "pause", {"node": "zk"}), NODES) == {}


class SteppingClock:
    """Time moves to each deadline asked for: a schedule plays in no real time."""

    def __init__(self) -> None:
        self.t = 100.0

    def now(self) -> float:
        return self.t

    def sleep_until(self, deadline: float, stop: threading.Event) -> bool:
        if stop.is_set():
            return False
        self.t = max(self.t, deadline)
        return True


class Recording:
    def __init__(self, clock: SteppingClock, stop_after: int | None = None, stop: Any = None) -> None:
        self.calls: list[tuple[float, str, Any]] = []
        self.clock, self.stop_after, self.stop = clock, stop_after, stop

    def __getattr__(self, op: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> str:
            self.calls.append((self.clock.now(), op, kwargs or args))
            if op == "restart" and kwargs["node"] == "zk":
                msg = "zk did not come back"
                raise RuntimeError(msg)
            if self.stop_after is not None and len(self.calls) == self.stop_after:
                self.stop.set()
            return "done"
        return call


def test_the_runner_plays_a_schedule_on_time_into_the_history() -> None:
    events = [Event(5, "cut", {"pairs": [[LEADER, "zk"]]}, "partition-leader-from-zk", "start"),
              Event(20, "heal", {}, "partition-leader-from-zk", "stop"),
              Event(30, "kill", {"node": "zk"}, "kill", "start"),
              Event(40, "restart", {"node": "zk"}, "kill", "stop")]
    clock = SteppingClock()
    cluster, history = Recording(clock), History(clock.now)
    play(events, cluster, history, clock, leader=lambda: "nimbus-b")  # type: ignore[arg-type]
    assert cluster.calls == [(105, "cut", ("nimbus-b", "zk")), (120, "heal", ()),
                             (130, "kill", {"node": "zk"}), (140, "restart", {"node": "zk"})]
    ops = history.ops
    assert [(op.process, op.type, op.f) for op in ops[:2]] == [(NEMESIS, INVOKE, "cut"),
                                                               (NEMESIS, INFO, "cut")]
    assert ops[0].value == {"fault": "partition-leader-from-zk", "phase": "start", "op": "cut",
                            "pairs": [["nimbus-b", "zk"]]} and ops[0].time == 105
    # A fault that failed is in the history, and the run went on to its end
    assert ops[-1].value["error"] == "RuntimeError: zk did not come back"


def test_a_runner_stopped_mid_fault_stops_it() -> None:
    events = schedule(3, ["partition-halves"], NODES, length=120)
    clock, stop = SteppingClock(), threading.Event()
    cluster = Recording(clock, stop_after=1, stop=stop)
    play(events, cluster, History(clock.now), clock, stop=stop)  # type: ignore[arg-type]
    assert [op for _t, op, _a in cluster.calls] == ["partition", "heal"]


def test_a_fault_of_the_leader_is_undone_on_the_node_it_was_done_to() -> None:
    # Given a pause of the leader, which hands leadership to the standby while it holds
    events = [Event(5, "pause", {"node": LEADER}, "pause", "start"),
              Event(25, "resume", {"node": LEADER}, "pause", "stop")]
    leaders = iter(["nimbus-a", "nimbus-b"])
    clock = SteppingClock()
    cluster = Recording(clock)
    play(events, cluster, History(clock.now), clock, leader=lambda: next(leaders))  # type: ignore[arg-type]
    # Then the leader was asked once, and the node paused is the node resumed
    assert cluster.calls == [(105, "pause", {"node": "nimbus-a"}), (125, "resume", {"node": "nimbus-a"})]
