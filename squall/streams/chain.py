"""One bolt's operations bound into a chain of plain calls: a pure core, no I/O.

:class:`BoltPlan` is what squall.streams.compile puts in a processor bolt's
options: the operations, who feeds whom, which inputs enter where and which
values leave on which stream.  :class:`Chain` binds a task's copy of it: each
input ``(component, stream)`` gets the callables its tuples' values go to,
each exit an emitter the shell gives.  Values cross to another bolt as Squall
values (tuples as lists); the next generated bolt makes keys, pairs, joined
and co-grouped values tuples again from the shape the stream is declared with.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from squall.streams.processors import Push

SCALARS = frozenset({str, int, float, bool, type(None), bytes})


def to_wire(value: Any) -> Any:
    """A value as it crosses to another bolt: tuples become lists, at any depth."""
    t = type(value)
    if t in SCALARS:
        return value
    if t is tuple or t is list:
        return [to_wire(v) for v in value]
    if t is dict:
        return {k: to_wire(v) for k, v in value.items()}
    return value


def as_key(value: Any) -> Any:
    """A key as it arrived (lists, at any depth) made hashable again (tuples)."""
    if type(value) is list:
        return tuple(as_key(v) for v in value)
    return value


def _decoder(shape: str) -> Callable[[Any], Any]:
    """How a tuple of a stream of this shape becomes the value its operations take."""
    if shape == "raw":
        return lambda tup: tup  # a spout's own Tuple: its mapper reads it
    if shape == "value":
        return lambda tup: tup.values[0]
    if shape == "tuple":
        return lambda tup: tuple(tup.values[0])
    if shape == "pair":
        return lambda tup: (as_key(tup.values[0]), tup.values[1])
    if shape == "join":
        return lambda tup: (as_key(tup.values[0]), tuple(tup.values[1]))
    if shape == "cogroup":
        return lambda tup: (as_key(tup.values[0]), (tup.values[1][0], tup.values[1][1]))
    msg = f"unknown stream shape {shape!r}"
    raise ValueError(msg)


def _decoding(shape: str, push: Push) -> Callable[[Any], None]:
    """A tuple of this shape decoded and pushed, in one call: the hot path of a bolt with
    one entry, so the common shapes skip the decoder's call (and as_key's on a scalar key)."""
    if shape == "raw":
        return push
    if shape == "value":
        return lambda tup: push(tup.values[0])
    if shape == "pair":
        def push_pair(tup: Any) -> None:
            values = tup.values
            key = values[0]
            push((as_key(key) if type(key) is list else key, values[1]))

        return push_pair
    decode = _decoder(shape)
    return lambda tup: push(decode(tup))


def _late_decoder(shape: str) -> Callable[[Any], Any]:
    """A late tuple (windowing's detached record) to the value it carried."""
    inner = _decoder(shape)

    class _Values:
        __slots__ = ("values",)

        def __init__(self, values: Any) -> None:
            self.values = values

    return lambda tup: inner(_Values(tup.values[0]["values"]))


@dataclass
class Exit:
    stream: str
    pair: bool
    ts: bool  # the stream carries the timestamp field too


@dataclass
class EntryPlan:
    node: int
    port: int
    shape: str
    late: bool = False


@dataclass
class BoltPlan:
    ops: dict[int, Any]
    order: list[int]  # node ids, each after the nodes feeding it
    children: dict[int, list[list[tuple[int, int]]]]  # per output port: (node, port) fed
    exits: dict[int, Exit]
    entries: dict[tuple[str, str], list[EntryPlan]]
    ts_index: dict[tuple[str, str], int | None] = field(default_factory=dict)
    markers_in: list[str] = field(default_factory=list)
    markers_out: bool = False
    hold: bool = False
    operations: list[str] = field(default_factory=list)  # what the UI shows


class Chain:
    """A task's bound chain.  ``make_exit(exit)`` gives the emitter of one exit."""

    def __init__(self, plan: BoltPlan, make_exit: Callable[[Exit], Push]) -> None:
        self.ops = plan.ops
        self.order = plan.order
        bound: dict[int, list[Push]] = {}
        self._bound = bound
        for nid in reversed(plan.order):
            outs: list[list[Push]] = [[bound[c][p] for c, p in port] for port in plan.children.get(nid, [[]])]
            if nid in plan.exits:
                outs[0].append(make_exit(plan.exits[nid]))
            bound[nid] = plan.ops[nid].bind(outs)
        self.dispatch: dict[tuple[str, str], Callable[[Any], None]] = {}
        for key, entries in plan.entries.items():
            self.dispatch[key] = self._entry(entries)

    def _entry(self, entries: list[EntryPlan]) -> Callable[[Any], None]:
        if len(entries) == 1 and not entries[0].late:
            return _decoding(entries[0].shape, self._push_of(entries[0]))
        pushes = []
        for e in entries:
            decode = _late_decoder(e.shape) if e.late else _decoder(e.shape)
            pushes.append((self._push_of(e), decode))
        if len(pushes) == 1:
            push, decode = pushes[0]
            return lambda tup: push(decode(tup))
        targets = tuple(pushes)

        def enter(tup: Any) -> None:
            for push, decode in targets:
                push(decode(tup))

        return enter

    def _push_of(self, entry: EntryPlan) -> Push:
        return self._bound[entry.node][entry.port]

    def end(self) -> None:
        """The window ended: each batch operation gives its result, in chain order."""
        for nid in self.order:
            self.ops[nid].end()

    def reset(self) -> None:
        for nid in self.order:
            self.ops[nid].reset()


class MarkerGate:
    """Window ends from upstream tasks: complete once each has sent one since the last."""

    def __init__(self, tasks: list[int]) -> None:
        self.tasks = frozenset(tasks)
        self.seen: set[int] = set()

    def arrive(self, task: int) -> bool:
        self.seen.add(task)
        if self.tasks <= self.seen:
            self.seen.clear()
            return True
        return False
