"""What a Trident user subclasses (Storm's operation interfaces in Python shapes), the tuple
they see, and Storm's built-in operations.

Every operation may define ``prepare(conf, context)`` and ``cleanup()``; ``collector.emit(values)``
emits, ``collector.report_error(exc)`` reports without failing the batch, and raising
``squall.FailedException`` fails the whole batch (replayed under the same txid).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from squall.errors import TopologyValidationError


class TridentTuple:
    """One tuple of a Trident stream: ``tup[0]``, ``tup["word"]``, ``tup.values`` (a list),
    and Storm's getters (``get_value(i)``, ``get_value_by_field(name)``, ``get_string(i)``...)."""

    __slots__ = ("_index", "values")

    def __init__(self, values: Sequence[Any], index: dict[str, int]) -> None:
        self.values = list(values)
        self._index = index

    @property
    def fields(self) -> list[str]:
        return list(self._index)

    def __getitem__(self, key: int | str) -> Any:
        if isinstance(key, str):
            try:
                return self.values[self._index[key]]
            except KeyError:
                msg = f"no field {key!r} in this tuple (fields: {self.fields})"
                raise KeyError(msg) from None
        return self.values[key]

    def __len__(self) -> int:
        return len(self.values)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.values)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TridentTuple):
            return self.values == other.values
        return isinstance(other, (list, tuple)) and self.values == list(other)

    def __hash__(self) -> int:
        return hash(tuple(self.values))

    def __repr__(self) -> str:
        return f"TridentTuple({dict(zip(self.fields, self.values, strict=False))!r})"

    # Storm's getters, for code ported from Java.
    def get_value(self, i: int) -> Any:
        return self.values[i]

    def get_value_by_field(self, name: str) -> Any:
        return self[name]

    get_string = get_integer = get_long = get_double = get_boolean = get_value

    def select(self, fields: Sequence[str]) -> list[Any]:
        return [self[f] for f in fields]


class Operation:
    """Storm's Operation: ``prepare`` once per task before the first batch, ``cleanup`` at the end."""

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        pass

    def cleanup(self) -> None:
        pass


class Function(Operation):
    """``execute(tup, collector)``: each ``collector.emit(values)`` makes one output tuple, the
    input's fields followed by these values; emitting nothing drops the tuple."""

    def execute(self, tup: TridentTuple, collector: Any) -> None:
        raise NotImplementedError


class Filter(Operation):
    """``is_keep(tup)``: the tuple goes on when it answers true."""

    def is_keep(self, tup: TridentTuple) -> bool:
        raise NotImplementedError


class CombinerAggregator(Operation):
    """``init(tup)`` a value per tuple, ``combine(a, b)`` two values into one, ``zero()`` for no
    tuple at all: combined within each partition before values cross the network."""

    def init(self, tup: TridentTuple) -> Any:
        raise NotImplementedError

    def combine(self, val1: Any, val2: Any) -> Any:
        raise NotImplementedError

    def zero(self) -> Any:
        raise NotImplementedError


class ReducerAggregator(Operation):
    """``init()`` the start, ``reduce(curr, tup)`` each tuple into it."""

    def init(self) -> Any:
        raise NotImplementedError

    def reduce(self, curr: Any, tup: TridentTuple) -> Any:
        raise NotImplementedError


class Aggregator(Operation):
    """The general form: ``init(batch_id, collector)`` a state per batch (and group),
    ``aggregate(state, tup, collector)`` per tuple, ``complete(state, collector)`` at the end."""

    def init(self, batch_id: Any, collector: Any) -> Any:
        raise NotImplementedError

    def aggregate(self, state: Any, tup: TridentTuple, collector: Any) -> None:
        raise NotImplementedError

    def complete(self, state: Any, collector: Any) -> None:
        raise NotImplementedError


class QueryFunction(Operation):
    """``batch_retrieve(state, tuples)`` one result per tuple, then ``execute(tup, result,
    collector)`` for each tuple with its result (emits append to the tuple, as a Function's)."""

    def batch_retrieve(self, state: Any, tuples: list[TridentTuple]) -> list[Any]:
        raise NotImplementedError

    def execute(self, tup: TridentTuple, result: Any, collector: Any) -> None:
        raise NotImplementedError


class StateUpdater(Operation):
    """``update_state(state, tuples, collector)``: a batch's tuples of one partition into the state."""

    def update_state(self, state: Any, tuples: list[TridentTuple], collector: Any) -> None:
        raise NotImplementedError


# -- built-ins ---------------------------------------------------------------------------------


class Count(CombinerAggregator):
    def init(self, tup: TridentTuple) -> int:
        return 1

    def combine(self, val1: int, val2: int) -> int:
        return val1 + val2

    def zero(self) -> int:
        return 0


class Sum(CombinerAggregator):
    def init(self, tup: TridentTuple) -> Any:
        return tup[0]

    def combine(self, val1: Any, val2: Any) -> Any:
        return val1 + val2

    def zero(self) -> Any:
        return 0


class Assembly:
    """Several operations applied as one: ``stream.apply_assembly(assembly)`` is
    ``assembly.apply(stream)`` (Storm's Assembly)."""

    def apply(self, stream: Any) -> Any:
        raise NotImplementedError


class FirstNAgg(Aggregator):
    """The first ``n`` tuples of a partition, as they come."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n

    def init(self, batch_id: Any, collector: Any) -> list[int]:
        return [0]

    def aggregate(self, state: list[int], tup: TridentTuple, collector: Any) -> None:
        if state[0] < self.n:
            collector.emit(list(tup.values))
            state[0] += 1

    def complete(self, state: list[int], collector: Any) -> None:
        pass


class FirstNSortedAgg(Aggregator):
    """The ``n`` least tuples of a partition by ``sort_field`` (``reverse``: the greatest)."""

    def __init__(self, n: int, sort_field: str, reverse: bool = False) -> None:
        super().__init__()
        self.n, self.sort_field, self.reverse = n, sort_field, reverse

    def init(self, batch_id: Any, collector: Any) -> list[TridentTuple]:
        return []

    def aggregate(self, state: list[TridentTuple], tup: TridentTuple, collector: Any) -> None:
        state.append(tup)

    def complete(self, state: list[TridentTuple], collector: Any) -> None:
        field = self.sort_field
        for tup in sorted(state, key=lambda t: t[field], reverse=self.reverse)[:self.n]:
            collector.emit(list(tup.values))


class FirstN(Assembly):
    """Storm's FirstN: the first ``n`` tuples of each batch, or with ``sort_field`` the ``n``
    least by it (``reverse=True``: the greatest), chosen per partition then once globally:
    ``stream.apply_assembly(FirstN(10, "count", reverse=True))``."""

    def __init__(self, n: int, sort_field: str | None = None, reverse: bool = False) -> None:
        self.n, self.sort_field, self.reverse = n, sort_field, reverse

    def apply(self, stream: Any) -> Any:
        fields = stream.get_output_fields()
        agg: Aggregator = (FirstNAgg(self.n) if self.sort_field is None
                           else FirstNSortedAgg(self.n, self.sort_field, self.reverse))
        first = stream.partition_aggregate(fields, agg, fields)
        return first.global_().partition_aggregate(fields, agg, fields)


class Debug(Filter):
    """Prints every tuple (with ``name`` before it) and keeps it."""

    def __init__(self, name: str = "DEBUG") -> None:
        super().__init__()
        self.name = name

    def is_keep(self, tup: TridentTuple) -> bool:
        print(f"{self.name}: {tup!r}", flush=True)
        return True


class Equals(Filter):
    """Keeps a tuple whose selected fields are all equal."""

    def is_keep(self, tup: TridentTuple) -> bool:
        return all(v == tup.values[0] for v in tup.values)


class FilterNull(Filter):
    """Drops a tuple with a None among its selected fields."""

    def is_keep(self, tup: TridentTuple) -> bool:
        return all(v is not None for v in tup.values)


class Negate(Filter):
    """Keeps what ``inner`` drops."""

    def __init__(self, inner: Filter) -> None:
        super().__init__()
        self.inner = inner

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.inner.prepare(conf, context)

    def cleanup(self) -> None:
        self.inner.cleanup()

    def is_keep(self, tup: TridentTuple) -> bool:
        return not self.inner.is_keep(tup)


class MapGet(QueryFunction):
    """The state's value of each tuple's key (its selected fields): ``state.multi_get``."""

    def batch_retrieve(self, state: Any, tuples: list[TridentTuple]) -> list[Any]:
        return list(state.multi_get([list(t.values) for t in tuples]))

    def execute(self, tup: TridentTuple, result: Any, collector: Any) -> None:
        collector.emit([result])


class SnapshotGet(QueryFunction):
    """A snapshottable state's one value (``state.get()``), for every tuple."""

    def batch_retrieve(self, state: Any, tuples: list[TridentTuple]) -> list[Any]:
        value = state.get()
        return [value] * len(tuples)

    def execute(self, tup: TridentTuple, result: Any, collector: Any) -> None:
        collector.emit([result])


class TupleCollectionGet(QueryFunction):
    """Every tuple the state holds (``state.get_tuples()``: Storm's ITupleCollection), once
    per input tuple."""

    def batch_retrieve(self, state: Any, tuples: list[TridentTuple]) -> list[Any]:
        held = [list(t) for t in state.get_tuples()]
        return [held] * len(tuples)

    def execute(self, tup: TridentTuple, result: Any, collector: Any) -> None:
        for values in result:
            collector.emit(values)


# -- what map, flat_map, peek and a plain callable become ------------------------------------------


class MapFunction(Function):
    """``map(fn)``: one output per input, ``fn(tup)`` the new values (a value or a list)."""

    def __init__(self, fn: Callable[[TridentTuple], Any]) -> None:
        super().__init__()
        self.fn = fn

    def execute(self, tup: TridentTuple, collector: Any) -> None:
        collector.emit(_as_values(self.fn(tup)))


class FlatMapFunction(Function):
    """``flat_map(fn)``: ``fn(tup)`` an iterable of outputs."""

    def __init__(self, fn: Callable[[TridentTuple], Any]) -> None:
        super().__init__()
        self.fn = fn

    def execute(self, tup: TridentTuple, collector: Any) -> None:
        for out in self.fn(tup):
            collector.emit(_as_values(out))


class PeekFilter(Filter):
    """``peek(fn)``: ``fn(tup)`` called, the tuple kept."""

    def __init__(self, fn: Callable[[TridentTuple], Any]) -> None:
        super().__init__()
        self.fn = fn

    def is_keep(self, tup: TridentTuple) -> bool:
        self.fn(tup)
        return True


def _as_values(out: Any) -> list[Any]:
    if isinstance(out, TridentTuple):
        return list(out.values)
    return list(out) if isinstance(out, (list, tuple)) else [out]


def check_operation(op: Any, kinds: tuple[type, ...], where: str) -> None:
    if not isinstance(op, kinds):
        names = " or ".join(k.__name__ for k in kinds)
        msg = f"{where}: expected a {names} instance, got {op!r}"
        raise TopologyValidationError(msg)
