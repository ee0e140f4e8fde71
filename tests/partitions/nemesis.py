"""Seeded fault schedules in Jepsen's vocabulary, their grudges, and a runner.

A schedule is a list of :class:`Event` -- at ``at`` seconds from the start,
call the cluster's ``op`` with ``args`` -- where every fault that starts is
stopped again, no later than the schedule's length: the run ends healed.
One fault is in force at a time (a quiet gap, a fault, a quiet gap...), so
a checker's anomaly points at one cause.  The same seed gives the same
schedule.

Fault classes (``FAULTS``), each a start and its matching stop:

=============================  ==========================================  ===============
class                          start                                       stop
=============================  ==========================================  ===============
partition-random-node          ``isolate(node)``, any node                 ``heal()``
partition-halves               ``partition([half, other half])``           ``heal()``
partition-supervisor-from-zk   ``cut(supervisor, zk)`` for each zk node    ``heal()``
partition-leader-from-zk       ``cut(leader, zk)``: its standby still      ``heal()``
                               reaches ZooKeeper; the leader is asked of
                               the cluster when the fault starts
pause                          ``pause(node)`` (SIGSTOP) for longer than   ``resume(node)``
                               the heartbeat timeouts; any node or the
                               leader
kill                           ``kill(node)``, any node or the leader      ``restart(node)``
slow-net                       ``shape(node, rate_kbit=...)``: a link of   ``unshape(node)``
                               that bandwidth, latency growing with load
lossy-net                      ``shape(node, loss_pct=...)``: packets      ``unshape(node)``
                               dropped at random (a few let through
                               seconds late: reordered)
clock-skew                     ``skew(node, secs)``, either direction, a   ``skew(node, 0)``
                               supervisor or the leader (ZooKeeper's JVM
                               is not skewed; a standby's clock is idle)
=============================  ==========================================  ===============

A **grudge** is who refuses whom: node -> the nodes it cannot reach.  For
components (groups that reach each other and nothing else) it is Jepsen's
complete grudge; a bridge is two halves that cannot reach each other and one
node that reaches both.  :func:`grudge` gives an event's.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from tests.partitions.history import NEMESIS, History

FAULTS = ("partition-random-node", "partition-halves", "partition-supervisor-from-zk",
          "partition-leader-from-zk", "pause", "kill", "slow-net", "lossy-net", "clock-skew")
LEADER = "@leader"  # in an event's args: the nimbus leading when its fault starts


@dataclass(frozen=True)
class Nodes:
    zookeeper: tuple[str, ...]
    nimbuses: tuple[str, ...]
    supervisors: tuple[str, ...]

    def __post_init__(self) -> None:
        everyone = self.all
        if not (self.zookeeper and self.nimbuses and self.supervisors):
            msg = f"a cluster needs ZooKeeper, nimbus and supervisor nodes: {self}"
            raise ValueError(msg)
        if len(set(everyone)) != len(everyone):
            msg = f"a node is named twice: {everyone}"
            raise ValueError(msg)

    @property
    def all(self) -> tuple[str, ...]:
        return (*self.zookeeper, *self.nimbuses, *self.supervisors)


@dataclass(frozen=True)
class Timing:
    """Bounds (seconds) of the quiet gaps and of each fault; pauses outlast ``pause_min``
    (past the heartbeat timeouts, or a pause shows nothing)."""

    gap: tuple[float, float] = (5.0, 15.0)
    fault: tuple[float, float] = (10.0, 30.0)
    pause_min: float = 35.0
    rate_kbit: tuple[int, int] = (128, 1024)
    loss_pct: tuple[int, int] = (5, 30)
    skew_secs: tuple[float, float] = (5.0, 120.0)


@dataclass(frozen=True)
class Event:
    at: float
    op: str
    args: Mapping[str, Any] = field(default_factory=dict)
    fault: str = ""
    phase: str = "start"  # or "stop"


def schedule(seed: int, faults: Sequence[str], nodes: Nodes, length: float,
             timing: Timing = Timing()) -> list[Event]:
    """Faults drawn from ``faults`` one after another for ``length`` seconds, all stopped by then."""
    unknown = [f for f in faults if f not in FAULTS]
    if unknown or not faults:
        msg = f"unknown fault classes {unknown} (known: {', '.join(FAULTS)})" if unknown else "no fault class"
        raise ValueError(msg)
    rng = random.Random(seed)
    events: list[Event] = []
    now = 0.0
    while True:
        fault = rng.choice(list(faults))
        start = round(now + rng.uniform(*timing.gap), 3)  # milliseconds: schedules read well in a report
        lasts = round(rng.uniform(*timing.fault), 3)
        if fault == "pause":
            lasts = max(lasts, timing.pause_min)
        if start + lasts > length:
            return events
        begin, end = _fault(fault, rng, nodes, timing)
        events += [Event(start, begin[0], begin[1], fault, "start"),
                   Event(start + lasts, end[0], end[1], fault, "stop")]
        now = start + lasts


def _fault(fault: str, rng: random.Random, nodes: Nodes,
           timing: Timing) -> tuple[tuple[str, dict[str, Any]], tuple[str, dict[str, Any]]]:
    """The start and the stop of one fault of class ``fault``."""
    heal: tuple[str, dict[str, Any]] = ("heal", {})
    node = rng.choice(nodes.all)
    if fault == "partition-random-node":
        return ("isolate", {"node": node}), heal
    if fault == "partition-halves":
        shuffled = list(nodes.all)
        rng.shuffle(shuffled)
        return ("partition", {"groups": [sorted(g) for g in bisect(shuffled)]}), heal
    if fault == "partition-supervisor-from-zk":
        return ("cut", {"pairs": [[rng.choice(nodes.supervisors), z] for z in nodes.zookeeper]}), heal
    if fault == "partition-leader-from-zk":
        return ("cut", {"pairs": [[LEADER, z] for z in nodes.zookeeper]}), heal
    if fault in ("pause", "kill"):
        node = rng.choice((*nodes.all, LEADER))  # any node, or the nimbus leading when it starts
        return (("pause", {"node": node}), ("resume", {"node": node})) if fault == "pause" else \
            (("kill", {"node": node}), ("restart", {"node": node}))
    unshape: tuple[str, dict[str, Any]] = ("unshape", {"node": node})
    if fault == "slow-net":
        return ("shape", {"node": node, "rate_kbit": rng.randint(*timing.rate_kbit)}), unshape
    if fault == "lossy-net":
        return ("shape", {"node": node, "loss_pct": rng.randint(*timing.loss_pct)}), unshape
    node = rng.choice((LEADER, *nodes.supervisors))  # a standby's clock is idle: the leader's is not
    secs = round(rng.uniform(*timing.skew_secs), 3) * rng.choice((-1, 1))
    return ("skew", {"node": node, "secs": secs}), ("skew", {"node": node, "secs": 0})


# -- grudges -------------------------------------------------------------------

Grudge = dict[str, frozenset[str]]


def bisect(nodes: Sequence[str]) -> tuple[list[str], list[str]]:
    """Two halves, the second the larger when the count is odd (as Jepsen splits)."""
    half = len(nodes) // 2
    return list(nodes[:half]), list(nodes[half:])


def complete_grudge(components: Iterable[Iterable[str]]) -> Grudge:
    """Each node refuses every node outside its own component."""
    groups = [frozenset(c) for c in components]
    everyone = frozenset().union(*groups)
    return {node: everyone - group for group in groups for node in group}


def bridge(nodes: Sequence[str]) -> Grudge:
    """Two halves cut from each other, the middle node reaching both."""
    if len(nodes) < 3:
        msg = f"a bridge needs three nodes at least, got {list(nodes)}"
        raise ValueError(msg)
    first, second = bisect(nodes)
    middle = second[0]
    grudge = complete_grudge([first, second[1:]])
    grudge[middle] = frozenset()
    return grudge


def grudge(event: Event, nodes: Nodes, leader: str | None = None) -> Grudge:
    """Who cannot reach whom while ``event``'s partition holds (every node listed); {} for
    events that cut nothing.  ``leader`` stands for :data:`LEADER`."""
    out: dict[str, set[str]] = {n: set() for n in nodes.all}
    if event.op == "isolate":
        alone = event.args["node"]
        components = [[alone], [n for n in nodes.all if n != alone]]
        out.update({n: set(g) for n, g in complete_grudge(components).items()})
    elif event.op == "partition":
        out.update({n: set(g) for n, g in complete_grudge(event.args["groups"]).items()})
    elif event.op == "cut":
        for a, b in event.args["pairs"]:
            a, b = (leader if x == LEADER else x for x in (a, b))
            if a is None or b is None:
                msg = "the event cuts the leader: name it"
                raise ValueError(msg)
            out[a].add(b)
            out[b].add(a)
    else:
        return {}
    return {n: frozenset(g) for n, g in out.items()}


# -- the runner ----------------------------------------------------------------

class Cluster(Protocol):
    """What the runner drives (the network-namespace harness implements it)."""

    def partition(self, groups: list[list[str]]) -> Any: ...
    def heal(self) -> Any: ...
    def isolate(self, node: str) -> Any: ...
    def cut(self, a: str, b: str) -> Any: ...
    def shape(self, node: str, rate_kbit: int = 0, loss_pct: float = 0) -> Any: ...
    def unshape(self, node: str) -> Any: ...
    def pause(self, node: str) -> Any: ...
    def resume(self, node: str) -> Any: ...
    def kill(self, node: str) -> Any: ...
    def restart(self, node: str) -> Any: ...
    def skew(self, node: str, secs: float) -> Any: ...


class Clock(Protocol):
    def now(self) -> float: ...
    def sleep_until(self, deadline: float, stop: threading.Event) -> bool: ...


def play(events: Sequence[Event], cluster: Cluster, history: History, clock: Clock,
         leader: Callable[[], str] | None = None, stop: threading.Event | None = None) -> None:
    """Carry ``events`` out on ``cluster`` at their times, each an invocation and an
    ``info`` completion of process "nemesis" in ``history`` (its result, or the error
    it raised: a fault that could not be made is recorded and the run goes on).

    Stopped early (``stop`` set), or on an exception of the runner's own, the faults in
    force are stopped before it returns: a cluster is never left partitioned.
    """
    stop = stop or threading.Event()
    begun = clock.now()
    pending: list[Event] = []  # stops of the faults started and not yet stopped
    try:
        for i, event in enumerate(events):
            if not clock.sleep_until(begun + event.at, stop):
                break
            if event.phase == "start":
                # The leader is asked once, when a fault starts: its stop (a schedule's
                # stop follows its start) undoes it on that same node, whoever leads then.
                who = leader() if leader is not None and _names_leader(event) else None
                event = _resolve(event, who)
                pending = [_resolve(e, who) for e in events[i + 1:i + 2] if e.phase == "stop"]
                _apply(event, cluster, history)
            else:
                _apply(pending[0] if pending else event, cluster, history)
                pending = []
    finally:
        for event in pending:
            _apply(event, cluster, history)


def _names_leader(event: Event) -> bool:
    return event.args.get("node") == LEADER or any(LEADER in pair for pair in event.args.get("pairs", ()))


def _resolve(event: Event, who: str | None) -> Event:
    """``event`` with :data:`LEADER` replaced by ``who``."""
    if not _names_leader(event):
        return event
    if who is None:
        msg = f"{event.fault} names the leader, and the runner was given no way to ask who leads"
        raise ValueError(msg)
    args = dict(event.args)
    if args.get("node") == LEADER:
        args["node"] = who
    if "pairs" in args:
        args["pairs"] = [[who if x == LEADER else x for x in pair] for pair in args["pairs"]]
    return Event(event.at, event.op, args, event.fault, event.phase)


def _apply(event: Event, cluster: Cluster, history: History) -> None:
    value = {"fault": event.fault, "phase": event.phase, "op": event.op, **event.args}
    invocation = history.invoke(NEMESIS, event.op, value)
    try:
        if event.op == "cut":
            result: Any = [cluster.cut(a, b) for a, b in event.args["pairs"]]
        else:
            result = getattr(cluster, event.op)(**event.args)
    except Exception as e:  # noqa: BLE001 - the history says what the fault did, or that it failed
        history.info(invocation, {**value, "error": f"{type(e).__name__}: {e}"})
        return
    history.info(invocation, {**value, "result": result})
