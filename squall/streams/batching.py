"""The batch operations of a stream (aggregations, reduce, count, groups by key, joins,
co-group) as a bolt runs them: a pure core, no I/O.

Each keeps what it saw.  Unwindowed it emits its running result per value; windowed,
``end()`` emits its result for the window that just ended and clears, and ``reset()``
drops a window that failed.  A global or by-key aggregation split over two bolts runs
a ``partial`` phase (each task's accumulator per window) and a ``merge`` phase.
"""

from __future__ import annotations

from typing import Any

from squall.streams.aggregators import Count
from squall.streams.functions import CombinerAggregator
from squall.streams.processors import Op, Push, _fan, label_of


class _Empty:
    """No accumulator yet (a reduce's before its first value).  One instance, which a
    pickled copy of an operation keeps meaning: it pickles as a reference to it."""

    def __reduce__(self) -> str:
        return "_EMPTY"

    def __repr__(self) -> str:
        return "<empty>"


_EMPTY = _Empty()


class Reducing:
    """``reduce(fn)`` as an aggregator: the first value, then ``fn(acc, value)``."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def init(self) -> Any:
        return _EMPTY

    def apply(self, acc: Any, value: Any) -> Any:
        return value if acc is _EMPTY else self.fn(acc, value)

    def merge(self, acc1: Any, acc2: Any) -> Any:
        if acc1 is _EMPTY:
            return acc2
        return acc1 if acc2 is _EMPTY else self.fn(acc1, acc2)

    def result(self, acc: Any) -> Any:
        return acc


class Grouping:
    """``group_by_key``'s aggregator: the values in arrival order."""

    def init(self) -> list[Any]:
        return []

    def apply(self, acc: list[Any], value: Any) -> list[Any]:
        acc.append(value)
        return acc

    def merge(self, acc1: list[Any], acc2: list[Any]) -> list[Any]:
        return acc1 + list(acc2)

    def result(self, acc: list[Any]) -> list[Any]:
        return acc


_KEEPS_ACC = (CombinerAggregator.result, Reducing.result, Grouping.result)


def _give(agg: Any, phase: str) -> Any:
    """What a batch operation hands on for an accumulator: None when it is the
    accumulator itself (a partial phase, or a ``result`` not overridden), so the hot
    path calls nothing."""
    if phase == "partial" or getattr(type(agg), "result", None) in _KEEPS_ACC:
        return None
    return agg.result


class Aggregate(Op):
    """``aggregate``/``reduce``/``count`` over the whole stream.

    ``phase``: "whole" applies and gives results; "partial" (a task's share of a
    window, before a global merge) applies and gives the accumulator; "merge"
    (the global task) merges accumulators and gives results."""

    name = "aggregate"
    batch = True

    def __init__(self, aggregator: Any, label: str, windowed: bool = False, phase: str = "whole") -> None:
        super().__init__()
        self.aggregator, self.label, self.windowed, self.phase = aggregator, label, windowed, phase
        self.acc: Any = _EMPTY

    def describe(self) -> str:
        inner = label_of(self.aggregator)
        suffix = "" if self.phase == "whole" else f", {self.phase}"
        return f"{self.label}({inner}{suffix})"

    def push_to(self, out: Push) -> Push:
        agg = self.aggregator
        fold = agg.merge if self.phase == "merge" else agg.apply
        give = _give(agg, self.phase)
        self._out, self._give = out, give

        if self.windowed:
            def push(v: Any) -> None:
                acc = self.acc
                self.acc = fold(agg.init() if acc is _EMPTY else acc, v)
        else:
            def push(v: Any) -> None:
                acc = self.acc
                acc = fold(agg.init() if acc is _EMPTY else acc, v)
                self.acc = acc
                out(acc if give is None else give(acc))

        return push

    def end(self) -> None:
        acc, self.acc = self.acc, _EMPTY
        if acc is not _EMPTY:  # no value since the last result: nothing
            give = self._give
            self._out(acc if give is None else give(acc))

    def reset(self) -> None:
        self.acc = _EMPTY


class AggregateByKey(Op):
    """The by-key aggregations: an accumulator per key, keys in order of first arrival."""

    name = "aggregate_by_key"
    key_keeping = True
    batch = True

    def __init__(self, aggregator: Any, label: str, windowed: bool = False, phase: str = "whole") -> None:
        super().__init__()
        self.aggregator, self.label, self.windowed, self.phase = aggregator, label, windowed, phase
        self.accs: dict[Any, Any] = {}

    describe = Aggregate.describe

    def push_to(self, out: Push) -> Push:
        agg = self.aggregator
        fold = agg.merge if self.phase == "merge" else agg.apply
        give = _give(agg, self.phase)
        self._out, self._give = out, give
        accs = self.accs

        if type(agg) is Count and self.phase != "merge":
            # count_by_key: init() is 0 and apply adds 1, with no call per value.
            if self.windowed:
                def push(kv: Any) -> None:
                    key = kv[0]
                    accs[key] = accs.get(key, 0) + 1
            else:
                def push(kv: Any) -> None:
                    key = kv[0]
                    n = accs[key] = accs.get(key, 0) + 1
                    out((key, n))
        elif self.windowed:
            def push(kv: Any) -> None:
                key = kv[0]
                acc = accs.get(key, _EMPTY)
                accs[key] = fold(agg.init() if acc is _EMPTY else acc, kv[1])
        elif give is None:
            def push(kv: Any) -> None:
                key = kv[0]
                acc = accs.get(key, _EMPTY)
                acc = fold(agg.init() if acc is _EMPTY else acc, kv[1])
                accs[key] = acc
                out((key, acc))
        else:
            def push(kv: Any) -> None:
                key = kv[0]
                acc = accs.get(key, _EMPTY)
                acc = fold(agg.init() if acc is _EMPTY else acc, kv[1])
                accs[key] = acc
                out((key, give(acc)))

        return push

    def end(self) -> None:
        items = list(self.accs.items())
        self.accs.clear()
        out, give = self._out, self._give
        for key, acc in items:
            out((key, acc if give is None else give(acc)))

    def reset(self) -> None:
        self.accs.clear()


def _pair_joined(v1: Any, v2: Any) -> tuple[Any, Any]:
    return (v1, v2)


class Join(Op):
    """``join`` and the outer joins: every value of one side with every value of the
    other under the same key.  Port 0 is the stream ``join`` was called on."""

    name = "join"
    key_keeping = True
    batch = True

    def __init__(self, kind: str, joiner: Any = None, windowed: bool = False) -> None:
        super().__init__()
        self.kind, self.windowed = kind, windowed
        self.joiner = joiner if joiner is not None else _pair_joined
        self.left_outer = kind in ("left_outer_join", "full_outer_join")
        self.right_outer = kind in ("right_outer_join", "full_outer_join")
        self.sides: tuple[list[Any], list[Any]] = ([], [])  # windowed: the pairs, in arrival order
        self.seen: tuple[dict[Any, list[Any]], dict[Any, list[Any]]] = ({}, {})  # unwindowed: by key

    def describe(self) -> str:
        return self.kind

    def bind(self, outs: list[list[Push]]) -> list[Push]:
        out = self._out = _fan(outs[0])
        if self.windowed:
            a, b = self.sides
            return [a.append, b.append]
        joiner, seen_a, seen_b = self.joiner, *self.seen
        left_outer, right_outer = self.left_outer, self.right_outer

        def push_a(kv: Any) -> None:
            key, v1 = kv
            matches = seen_b.get(key)
            if matches:
                for v2 in matches:
                    out((key, joiner(v1, v2)))
            elif left_outer:
                out((key, joiner(v1, None)))
            seen_a.setdefault(key, []).append(v1)

        def push_b(kv: Any) -> None:
            key, v2 = kv
            matches = seen_a.get(key)
            if matches:
                for v1 in matches:
                    out((key, joiner(v1, v2)))
            elif right_outer:
                out((key, joiner(None, v2)))
            seen_b.setdefault(key, []).append(v2)

        return [push_a, push_b]

    def end(self) -> None:
        a, b = self.sides
        if not (a or b):
            return
        pairs_a, pairs_b = list(a), list(b)
        self.reset()
        out, joiner = self._out, self.joiner
        by_key: dict[Any, list[Any]] = {}
        for key, v2 in pairs_b:
            by_key.setdefault(key, []).append(v2)
        keys_a = set()
        for key, v1 in pairs_a:
            keys_a.add(key)
            matches = by_key.get(key)
            if matches:
                for v2 in matches:
                    out((key, joiner(v1, v2)))
            elif self.left_outer:
                out((key, joiner(v1, None)))
        if self.right_outer:
            for key, v2 in pairs_b:
                if key not in keys_a:
                    out((key, joiner(None, v2)))

    def reset(self) -> None:
        for side in self.sides:
            side.clear()


class CoGroup(Op):
    """``co_group_by_key``: per key, ``(all first values, all second values)``."""

    name = "co_group_by_key"
    key_keeping = True
    batch = True

    def __init__(self, windowed: bool = False) -> None:
        super().__init__()
        self.windowed = windowed
        self.groups: dict[Any, tuple[list[Any], list[Any]]] = {}
        self.firsts: tuple[dict[Any, None], dict[Any, None]] = ({}, {})  # each side's keys, in order

    def describe(self) -> str:
        return "co_group_by_key"

    def bind(self, outs: list[list[Push]]) -> list[Push]:
        out = self._out = _fan(outs[0])
        groups, windowed = self.groups, self.windowed

        def side(i: int) -> Push:
            first = self.firsts[i]

            def push(kv: Any) -> None:
                key = kv[0]
                group = groups.get(key)
                if group is None:
                    group = groups[key] = ([], [])
                group[i].append(kv[1])
                first[key] = None
                if not windowed:
                    out((key, (list(group[0]), list(group[1]))))

            return push

        return [side(0), side(1)]

    def end(self) -> None:
        groups = dict(self.groups)
        keys_a, keys_b = (list(f) for f in self.firsts)
        self.reset()
        out = self._out
        # a's keys by first appearance, then the keys only b has.
        for key in keys_a:
            out((key, groups[key]))
        for key in keys_b:
            if not groups[key][0]:
                out((key, groups[key]))

    def reset(self) -> None:
        self.groups.clear()
        for first in self.firsts:
            first.clear()


