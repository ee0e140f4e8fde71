"""The operations of a stream as a bolt runs them: a pure core, no I/O.

Each operation is a template the topology carries by value; a task binds it
to the operations it feeds (``bind(outs)``, ``outs`` one list of callables per
output), which gives one callable per input port that takes a value.  The
operations of one bolt are so chained by plain calls.  A batch operation
keeps what it saw: unwindowed it emits its running result per value;
windowed, ``end()`` emits its result for the window that just ended and
clears.  ``reset()`` drops a window's contents that failed.  Here: the base and the
per-value operations; squall.streams.batching has the batch operations and
squall.streams.keyed_state the state by key.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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
