"""What users hand to a stream's operations besides plain callables: the
mappers from a spout's tuple to a value, the windows, and the two interfaces
with more than one method (Storm's ``CombinerAggregator`` and
``StateUpdater``).

Everything here is immutable once made and travels with the topology by value
(cloudpickle), so a task gets its own copy and never shares an accumulator.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from squall.errors import TopologyValidationError
from squall.windowing.policy import Count, Duration


def _fail(message: str) -> None:
    raise TopologyValidationError(message)


def check_callable(what: str, fn: Any) -> None:
    if not callable(fn):
        _fail(f"{what}: expected a function, got {fn!r}")


# -- mappers: a spout's Tuple to the stream's value ---------------------------------


class _Mapper:
    """A spout's ``Tuple`` to a value; fields by index or by name."""

    fields: tuple[Any, ...] = ()
    pair = False

    def check(self, what: str, declared: tuple[str, ...]) -> None:
        for f in self.fields:
            if isinstance(f, bool) or not isinstance(f, (int, str)):
                _fail(f"{what}: a mapper field is an index or a field name, got {f!r}")
            if isinstance(f, int) and not -len(declared) <= f < len(declared):
                _fail(f"{what}: mapper field {f} is out of range: the spout's default stream "
                      f"declares {list(declared)}")
            if isinstance(f, str) and f not in declared:
                _fail(f"{what}: mapper field {f!r} is not a field of the spout's default stream "
                      f"(it declares {list(declared)})")

    def indexes(self, declared: tuple[str, ...]) -> tuple[int, ...]:
        return tuple(declared.index(f) if isinstance(f, str) else f for f in self.fields)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(map(repr, self.fields))})"


class ValueMapper(_Mapper):
    """The value of one field (Storm's ``ValueMapper``)."""

    def __init__(self, field: Any) -> None:
        self.fields = (field,)


class ValuesMapper(_Mapper):
    """A list of one or more fields' values (Storm's ``ValuesMapper``)."""

    def __init__(self, *fields: Any) -> None:
        if not fields:
            _fail("ValuesMapper: name one field or more")
        self.fields = fields


class _TupleMapper(_Mapper):
    def __init__(self, fields: tuple[Any, ...]) -> None:
        self.fields = fields


class TupleValueMappers:
    """``TupleValueMappers.of(f1, f2, f3, ...)``: a Python tuple of 3 to 10 fields'
    values (Storm's ``TupleValueMappers.of`` giving ``Tuple3`` .. ``Tuple10``)."""

    @staticmethod
    def of(*fields: Any) -> _Mapper:
        if not 3 <= len(fields) <= 10:
            _fail(f"TupleValueMappers.of: takes 3 to 10 fields (Storm's Tuple3..Tuple10), got {len(fields)}")
        return _TupleMapper(fields)


class PairValueMapper(_Mapper):
    """``(key, value)`` from two fields: the stream is a ``PairStream``."""

    pair = True

    def __init__(self, key_field: Any, value_field: Any) -> None:
        self.fields = (key_field, value_field)


def mapping_function(mapper: Any, declared: tuple[str, ...]) -> Callable[[Any], Any]:
    """The function a spout's first bolt runs on each of its ``Tuple``s."""
    if not isinstance(mapper, _Mapper):
        return mapper  # a callable of the Tuple
    idx = mapper.indexes(declared)
    if isinstance(mapper, ValueMapper):
        (i,) = idx
        return lambda tup: tup.values[i]
    if isinstance(mapper, ValuesMapper):
        return lambda tup: [tup.values[i] for i in idx]
    return lambda tup: tuple(tup.values[i] for i in idx)  # pairs and typed tuples


# -- windows ---------------------------------------------------------------------------


def _length(what: str, value: Any) -> Any:
    if not isinstance(value, (Count, Duration)):
        _fail(f"{what}: a window length or interval is a Count(n) or a Duration, got {value!r}")
    return value


@dataclass(frozen=True)
class _Window:
    """A window as a stream applies it: immutable, equal and hashable by value."""

    length: Any
    interval: Any
    timestamp_field: str | None = None
    lag: Duration | None = None
    late_stream: str | None = None

    def with_timestamp_field(self, name: str) -> Any:
        if not isinstance(name, str) or not name.isidentifier() or name.startswith("_"):
            _fail(f"with_timestamp_field: a field name (an identifier not starting with '_'), got {name!r}")
        if name in ("key", "value"):
            _fail(f"with_timestamp_field: {name!r} is a field of the streams between generated bolts")
        return replace(self, timestamp_field=name)

    def with_lag(self, duration: Duration) -> Any:
        if not isinstance(duration, Duration):
            _fail(f"with_lag: expected a Duration, got {duration!r}")
        return replace(self, lag=duration)

    def with_late_tuple_stream(self, name: str) -> Any:
        if not isinstance(name, str) or not name or name.startswith(("$", "__")):
            _fail(f"with_late_tuple_stream: a stream name, got {name!r}")
        return replace(self, late_stream=name)

    def spec_kwargs(self) -> dict[str, Any]:
        """``WindowedBolt.spec``'s arguments for this window (watermarks every second)."""
        kwargs: dict[str, Any] = {"window": self.length, "slide": self.interval}
        if self.timestamp_field is not None:
            kwargs["timestamp_field"] = self.timestamp_field
        if self.lag is not None:
            kwargs["lag"] = self.lag
        if self.late_stream is not None:
            kwargs["late_stream"] = self.late_stream
        return kwargs

    def describe(self) -> str:
        kind = "tumbling" if self.length == self.interval else "sliding"
        text = f"{kind} {self.length!r}" + ("" if kind == "tumbling" else f" every {self.interval!r}")
        if self.timestamp_field:
            text += f" on {self.timestamp_field}"
        return text


class SlidingWindows:
    """``SlidingWindows.of(length, interval)``: a window of ``length`` every ``interval``."""

    @staticmethod
    def of(length: Any, interval: Any) -> _Window:
        return _Window(_length("SlidingWindows.of", length), _length("SlidingWindows.of", interval))


class TumblingWindows:
    """``TumblingWindows.of(length)``: back-to-back windows of ``length``."""

    @staticmethod
    def of(length: Any) -> _Window:
        length = _length("TumblingWindows.of", length)
        return _Window(length, length)


def is_window(value: Any) -> bool:
    return isinstance(value, _Window)


# -- the two interfaces of more than one method ----------------------------------------


class CombinerAggregator:
    """Storm's ``CombinerAggregator``: ``init()``, ``apply(acc, value)``, ``merge(acc1,
    acc2)`` and ``result(acc)`` (by default the accumulator itself)."""

    def __init__(self) -> None:
        pass

    def init(self) -> Any:
        raise NotImplementedError

    def apply(self, acc: Any, value: Any) -> Any:
        raise NotImplementedError

    def merge(self, acc1: Any, acc2: Any) -> Any:
        raise NotImplementedError

    def result(self, acc: Any) -> Any:
        return acc

    @staticmethod
    def of(initial: Any, accumulator: Callable[[Any, Any], Any],
           combiner: Callable[[Any, Any], Any]) -> CombinerAggregator:
        check_callable("CombinerAggregator.of: the accumulator", accumulator)
        check_callable("CombinerAggregator.of: the combiner", combiner)
        return _CombinerOf(initial, accumulator, combiner)


class _CombinerOf(CombinerAggregator):
    def __init__(self, initial: Any, accumulator: Any, combiner: Any) -> None:
        super().__init__()
        self.initial, self.accumulator, self.combiner = initial, accumulator, combiner

    def init(self) -> Any:
        return copy.deepcopy(self.initial)  # [] never shared between windows or keys

    def apply(self, acc: Any, value: Any) -> Any:
        return self.accumulator(acc, value)

    def merge(self, acc1: Any, acc2: Any) -> Any:
        return self.combiner(acc1, acc2)


class StateUpdater:
    """Storm's ``StateUpdater``: ``init()`` and ``apply(state, value)``."""

    def __init__(self) -> None:
        pass

    def init(self) -> Any:
        raise NotImplementedError

    def apply(self, state: Any, value: Any) -> Any:
        raise NotImplementedError

    @staticmethod
    def of(initial: Any, fn: Callable[[Any, Any], Any]) -> StateUpdater:
        check_callable("StateUpdater.of: the update function", fn)
        return _UpdaterOf(initial, fn)


class _UpdaterOf(StateUpdater):
    def __init__(self, initial: Any, fn: Any) -> None:
        super().__init__()
        self.initial, self.fn = initial, fn

    def init(self) -> Any:
        return copy.deepcopy(self.initial)

    def apply(self, state: Any, value: Any) -> Any:
        return self.fn(state, value)


def aggregator_of(what: str, args: tuple[Any, ...]) -> CombinerAggregator:
    """``aggregate(aggregator)`` or ``aggregate(initial, accumulator, combiner)``."""
    if len(args) == 1 and isinstance(args[0], CombinerAggregator):
        return args[0]
    if len(args) == 3 and callable(args[1]) and callable(args[2]):
        return CombinerAggregator.of(*args)
    shown = ", ".join(map(repr, args))
    _fail(f"{what}: takes a CombinerAggregator or (initial, accumulator, combiner), got ({shown})")
    raise AssertionError  # unreachable


def updater_of(what: str, args: tuple[Any, ...]) -> StateUpdater:
    """``update_state_by_key(updater)`` or ``update_state_by_key(initial, fn)``."""
    if len(args) == 1 and isinstance(args[0], StateUpdater):
        return args[0]
    if len(args) == 2 and callable(args[1]):
        return StateUpdater.of(*args)
    shown = ", ".join(map(repr, args))
    _fail(f"{what}: takes a StateUpdater or (initial, fn), got ({shown})")
    raise AssertionError  # unreachable
