"""The operations of a stream as a bolt runs them: a pure core, no I/O.

Each operation is a template the topology carries by value; a task binds it
to the operations it feeds (``bind(outs)``, ``outs`` one list of callables per
output), which gives one callable per input port that takes a value.  The
operations of one bolt are so chained by plain calls.  A batch operation
keeps what it saw: unwindowed it emits its running result per value;
windowed, ``end()`` emits its result for the window that just ended and
clears.  ``reset()`` drops a window's contents that failed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from squall.streams.aggregators import Count
from squall.streams.functions import CombinerAggregator

Push = Callable[[Any], None]


def _fan(outs: list[Push]) -> Push:
    """One callable for every operation fed by an output."""
    if len(outs) == 1:
        return outs[0]
    if not outs:
        return _drop
    targets = tuple(outs)

    def fan(value: Any) -> None:
        for out in targets:
            out(value)

    return fan


def _drop(value: Any) -> None:
    pass


def as_pair(value: Any, what: str) -> tuple[Any, Any]:
    """A pair function's result: a 2-tuple, or a 2-item list handed on as one."""
    if type(value) is tuple and len(value) == 2:
        return value
    if type(value) is list and len(value) == 2:
        return (value[0], value[1])
    msg = f"{what} must return a pair (key, value), got {value!r}"
    raise TypeError(msg)


def label_of(obj: Any) -> str:
    """How the UI names an aggregator or updater: the function it was made of, else its class."""
    for attr in ("fn", "accumulator"):
        fn = getattr(obj, attr, None)
        if fn is not None:
            return getattr(fn, "__name__", None) or type(fn).__name__
    return type(obj).__name__


class Op:
    """A stateless per-value operation with one input and one output."""

    name = "op"
    key_keeping = False  # the key of each pair it passes is the key it got
    batch = False

    def __init__(self, fn: Any = None) -> None:
        self.fn = fn

    def describe(self) -> str:
        fn = self.fn
        label = getattr(fn, "__name__", None) or type(fn).__name__
        return f"{self.name}({label})" if fn is not None else self.name

    def bind(self, outs: list[list[Push]]) -> list[Push]:
        return [self.push_to(_fan(outs[0]))]

    def push_to(self, out: Push) -> Push:
        raise NotImplementedError

    def end(self) -> None:
        pass

    def reset(self) -> None:
        pass


class Pass(Op):
    name = "pass"
    key_keeping = True

    def push_to(self, out: Push) -> Push:
        return out


class MapTuple(Op):
    """A spout's first operation: its ``Tuple`` to the stream's value (a mapper)."""

    name = "map_tuple"

    def push_to(self, out: Push) -> Push:
        fn = self.fn
        return lambda tup: out(fn(tup))


class Map(Op):
    name = "map"

    def push_to(self, out: Push) -> Push:
        fn = self.fn
        return lambda v: out(fn(v))


class Filter(Op):
    name = "filter"
    key_keeping = True

    def push_to(self, out: Push) -> Push:
        fn = self.fn

        def push(v: Any) -> None:
            if fn(v):
                out(v)

        return push


class FlatMap(Op):
    name = "flat_map"

    def push_to(self, out: Push) -> Push:
        fn = self.fn
        then = getattr(out, "pair_step", None)
        if then is not None:
            # Feeding only a map_to_pair (the word count's flat_map(split).map_to_pair):
            # its step runs in this loop, a call less per item.
            pair_fn, pair_out, what = then

            def push_pairs(v: Any) -> None:
                for item in fn(v):
                    r = pair_fn(item)
                    pair_out(r if type(r) is tuple and len(r) == 2 else as_pair(r, what))

            return push_pairs

        def push(v: Any) -> None:
            for item in fn(v):
                out(item)

        return push


class MapToPair(Op):
    name = "map_to_pair"

    def push_to(self, out: Push) -> Push:
        fn, what = self.fn, f"map_to_pair's function {getattr(self.fn, '__name__', self.fn)!r}"

        def push(v: Any) -> None:
            r = fn(v)
            out(r if type(r) is tuple and len(r) == 2 else as_pair(r, what))

        push.pair_step = (fn, out, what)  # type: ignore[attr-defined] - what a flat_map before it runs itself
        return push


class FlatMapToPair(Op):
    name = "flat_map_to_pair"

    def push_to(self, out: Push) -> Push:
        fn, what = self.fn, f"flat_map_to_pair's function {getattr(self.fn, '__name__', self.fn)!r}"

        def push(v: Any) -> None:
            for r in fn(v):
                out(r if type(r) is tuple and len(r) == 2 else as_pair(r, what))

        return push


class Peek(Op):
    name = "peek"
    key_keeping = True

    def push_to(self, out: Push) -> Push:
        fn = self.fn

        def push(v: Any) -> None:
            fn(v)
            out(v)

        return push


class MapValues(Op):
    name = "map_values"
    key_keeping = True

    def push_to(self, out: Push) -> Push:
        fn = self.fn
        return lambda kv: out((kv[0], fn(kv[1])))


class FlatMapValues(Op):
    name = "flat_map_values"
    key_keeping = True

    def push_to(self, out: Push) -> Push:
        fn = self.fn

        def push(kv: Any) -> None:
            key = kv[0]
            for item in fn(kv[1]):
                out((key, item))

        return push


class ForEach(Op):
    name = "for_each"

    def bind(self, outs: list[list[Push]]) -> list[Push]:
        return [self.fn]


def print_value(value: Any) -> None:
    print(value, flush=True)  # noqa: T201 - print() is the operation: the worker's stdout


class Print(ForEach):
    name = "print"

    def __init__(self) -> None:
        super().__init__(print_value)

    def describe(self) -> str:
        return "print"


class Branch(Op):
    """Each value to the first output whose predicate holds; none: dropped."""

    name = "branch"
    key_keeping = True

    def __init__(self, predicates: tuple[Any, ...]) -> None:
        super().__init__()
        self.predicates = predicates

    def describe(self) -> str:
        return f"branch({len(self.predicates)})"

    def bind(self, outs: list[list[Push]]) -> list[Push]:
        routes = tuple(zip(self.predicates, [_fan(o) for o in outs], strict=True))

        def push(v: Any) -> None:
            for pred, out in routes:
                if pred(v):
                    out(v)
                    return

        return [push]


# -- batch operations --------------------------------------------------------------------

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
            if key not in groups or not groups[key][0]:
                out((key, groups[key]))

    def reset(self) -> None:
        self.groups.clear()
        for first in self.firsts:
            first.clear()


# -- state -------------------------------------------------------------------------------


def as_json(value: Any, what: str) -> Any:
    """What a state holds: the value as JSON gives it back (tuples become lists)."""
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError) as e:
        msg = f"{what}: {value!r} cannot be stored as JSON ({e})"
        raise TypeError(msg) from e


def state_key(key: Any) -> str:
    try:
        return json.dumps(key)
    except (TypeError, ValueError) as e:
        msg = f"update_state_by_key: the key {key!r} cannot be stored as JSON ({e})"
        raise TypeError(msg) from e


class UpdateState(Op):
    """``update_state_by_key``: the key's state from ``apply(state, value)``, stored in
    the task's checkpointed state, emitted as ``(key, new state)``."""

    name = "update_state_by_key"
    key_keeping = True

    def __init__(self, updater: Any) -> None:
        super().__init__()
        self.updater = updater
        self.state: Any = None  # the task's KeyValueState, given by the stateful bolt

    def describe(self) -> str:
        return f"update_state_by_key({label_of(self.updater)})"

    def push_to(self, out: Push) -> Push:
        updater = self.updater

        def push(kv: Any) -> None:
            key, value = kv
            skey = state_key(key)
            state = self.state
            current = state.get(skey)
            if current is None:
                current = as_json(updater.init(), "update_state_by_key's initial state")
            new = as_json(updater.apply(current, value), f"update_state_by_key's state of {key!r}")
            state.put(skey, new)
            out((key, new))

        return push


class StateQuery(Op):
    """``state_query``: each value looked up in a ``StreamState``; ``(value, state)``."""

    name = "state_query"

    def __init__(self, update: UpdateState) -> None:
        super().__init__()
        self.update = update  # the operation whose state it reads (the same bolt's)

    def describe(self) -> str:
        return "state_query"

    def push_to(self, out: Push) -> Push:
        update = self.update

        def push(value: Any) -> None:
            state = update.state
            skey = state_key(value)
            if skey in state:
                out((value, state.get(skey)))

        return push
