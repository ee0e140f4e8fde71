"""Trident's aggregations spelled out as Storm spells them, as nodes of the graph:

* ``partition_aggregate``: one ``aggregate`` node, per partition (per group when grouped);
* ``aggregate`` with combiners only: a ``partial`` node per partition, a repartition
  (global, or by the group fields), a ``final`` node combining the partials (``zero()``
  when the batch had no tuple at all); with any other aggregator: the repartition, then
  the node;
* ``persistent_aggregate``: the same partials, then a ``partition_persist`` whose updater
  folds them into the state (a map state per group, a snapshottable one without groups).

An ``aggregate`` node's ``op`` is a list of :class:`AggSpec` (several for ``chained_agg``);
its outputs are the group fields, then each aggregator's fields in order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from squall.errors import TopologyValidationError
from squall.trident.graph import AggSpec, Node, StateSpec, check_inputs
from squall.trident.operations import (
    Aggregator,
    CombinerAggregator,
    ReducerAggregator,
    StateUpdater,
    TridentTuple,
    check_operation,
)

AGGREGATORS = (CombinerAggregator, ReducerAggregator, Aggregator)
PARTIAL = "trident_partial"  # the field names a combiner's partial values travel in


def _fail(message: str) -> None:
    raise TopologyValidationError(message)


def _specs(stream: Any, group: list[str] | None, aggs: Sequence[tuple[list[str] | None, Any, list[str]]],
           where: str) -> tuple[list[AggSpec], list[str]]:
    fields = stream.node.fields
    specs = []
    out = list(group or [])
    for in_fields, agg, out_fields in aggs:
        check_operation(agg, AGGREGATORS, where)
        chosen = list(fields) if in_fields is None else in_fields
        check_inputs(fields, chosen, where)
        for f in out_fields:
            if f in out:
                _fail(f"{where}: output field {f!r} is named twice (the group fields and the aggregators' "
                      f"outputs must differ: {out + out_fields})")
        out += out_fields
        specs.append(AggSpec(chosen, agg, list(out_fields)))
    return specs, out


def _node(stream: Any, parent: Node, kind: str, fields: list[str], **attrs: Any) -> Any:
    return stream.wrap(Node(kind, fields, parents=[parent], **attrs))


def partition_aggregate(stream: Any, group: list[str] | None,
                        aggs: Sequence[tuple[list[str] | None, Any, list[str]]]) -> Any:
    specs, out = _specs(stream, group, aggs, "partition_aggregate")
    return _node(stream, stream.node, "aggregate", out, op=specs, group_fields=group,
                 options={"phase": "all"})


def aggregate(stream: Any, group: list[str] | None,
              aggs: Sequence[tuple[list[str] | None, Any, list[str]]]) -> Any:
    specs, out = _specs(stream, group, aggs, "aggregate")
    if all(isinstance(s.agg, CombinerAggregator) for s in specs):
        partials = [f"{PARTIAL}{i}" for i in range(len(specs))]
        partial = _node(stream, stream.node, "aggregate", [*(group or []), *partials], op=specs,
                        group_fields=group, options={"phase": "partial"})
        moved = partial.partition_by(group) if group else partial.global_()
        return _node(stream, moved.node, "aggregate", out, op=specs, group_fields=group,
                     options={"phase": "final", "partials": partials, "single_emit": "global"})
    moved = stream.partition_by(group) if group else stream.global_()
    return _node(stream, moved.node, "aggregate", out, op=specs, group_fields=group,
                 options={"phase": "all", "single_emit": "global"})


def compare_by(stream: Any, field: str, least: bool) -> Any:
    where = "min_by" if least else "max_by"
    if not isinstance(field, str):
        _fail(f"{where}: one field name, got {field!r}")
    check_inputs(stream.node.fields, [field], where)
    fields = list(stream.node.fields)
    # Storm's minBy/maxBy are partitionAggregates: one answer per partition of a batch.
    return stream.partition_aggregate(fields, Best(field, least), fields)


class Best(Aggregator):
    """The tuple with the least (or greatest) value of ``field`` in each partition."""

    def __init__(self, field: str, least: bool) -> None:
        super().__init__()
        self.field, self.least = field, least

    def init(self, batch_id: Any, collector: Any) -> list[Any]:
        return [None]

    def aggregate(self, state: list[Any], tup: TridentTuple, collector: Any) -> None:
        best = state[0]
        value = tup[self.field]
        if best is None or (value < best[self.field] if self.least else value > best[self.field]):
            state[0] = tup

    def complete(self, state: list[Any], collector: Any) -> None:
        if state[0] is not None:
            collector.emit(list(state[0].values))


def persistent_aggregate(stream: Any, group: list[str] | None, factory: Any, in_fields: list[str] | None,
                         agg: Any, out_fields: list[str]) -> Any:
    where = "persistent_aggregate"
    check_operation(agg, (CombinerAggregator, ReducerAggregator), where)
    specs, out = _specs(stream, group, [(in_fields, agg, out_fields)], where)
    if len(out_fields) != 1:
        _fail(f"{where}: one output field (the state's value), got {out_fields}")
    spec = specs[0]
    if isinstance(agg, CombinerAggregator):
        partial = _node(stream, stream.node, "aggregate", [*(group or []), f"{PARTIAL}0"], op=specs,
                        group_fields=group, options={"phase": "partial"})
        source = partial.partition_by(group) if group else partial.global_()
        persist_in = [*(group or []), f"{PARTIAL}0"]
    else:
        source = stream.partition_by(group) if group else stream.global_()
        persist_in = [*(group or []), *spec.in_fields]
    updater: StateUpdater = (MapAggUpdater(agg, len(group)) if group else SnapshotAggUpdater(agg))
    state = StateSpec(factory)
    node = Node("partition_persist", out, parents=[source.node], op=updater, in_fields=persist_in,
                out_fields=out, state=state)
    state.updater = node
    return stream.wrap_state(node, state)


class MapAggUpdater(StateUpdater):
    """A grouped persistent aggregate's updater: a batch's tuples by key (the first
    ``key_width`` fields), each key's new value from its stored one (``multi_update``), and
    one ``[key..., value]`` out per key changed (the new values stream)."""

    def __init__(self, agg: Any, key_width: int) -> None:
        super().__init__()
        self.agg, self.key_width = agg, key_width

    def update_state(self, state: Any, tuples: list[TridentTuple], collector: Any) -> None:
        width = self.key_width
        if isinstance(self.agg, CombinerAggregator):
            # The batch's partials folded per key as they come: one updater per key, not a
            # list of tuples kept to fold inside it.
            combine = self.agg.combine
            partials: dict[tuple[Any, ...], Any] = {}
            for tup in tuples:
                values = tup.values
                key = tuple(values[:width])
                partials[key] = combine(partials[key], values[width]) if key in partials else values[width]
            keys = list(partials)
            updaters: list[Any] = [_Combined(combine, partial) for partial in partials.values()]
        else:
            by_key: dict[tuple[Any, ...], list[TridentTuple]] = {}
            for tup in tuples:
                by_key.setdefault(tuple(tup.values[:width]), []).append(tup)
            keys = list(by_key)
            updaters = [self._reducer(ts) for ts in by_key.values()]
        values = state.multi_update(keys, updaters)
        if not getattr(collector, "discards", False):
            for key, value in zip(keys, values, strict=True):
                collector.emit([*key, value])

    def _reducer(self, tuples: list[TridentTuple]) -> Any:
        agg, width = self.agg, self.key_width

        def reduce(old: Any) -> Any:
            value = agg.init() if old is None else old
            for tup in tuples:
                value = agg.reduce(value, _rest(tup, width))
            return value

        return reduce

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.agg.prepare(conf, context)

    def cleanup(self) -> None:
        self.agg.cleanup()


class _Combined:
    """A key's updater for a combiner: the batch's partial, combined onto the stored value."""

    __slots__ = ("combine", "partial")

    def __init__(self, combine: Callable[[Any, Any], Any], partial: Any) -> None:
        self.combine, self.partial = combine, partial

    def __call__(self, old: Any) -> Any:
        return self.partial if old is None else self.combine(old, self.partial)


class SnapshotAggUpdater(StateUpdater):
    """An ungrouped persistent aggregate's updater: the batch folded into the one value of a
    snapshottable state (``state.get()``/``state.set(value)``), emitted as ``[value]``."""

    def __init__(self, agg: Any) -> None:
        super().__init__()
        self.agg = agg

    def update_state(self, state: Any, tuples: list[TridentTuple], collector: Any) -> None:
        agg = self.agg
        old = state.get()
        if isinstance(agg, CombinerAggregator):
            value = agg.zero() if old is None else old
            for tup in tuples:
                value = agg.combine(value, tup.values[0])
        else:
            value = agg.init() if old is None else old
            for tup in tuples:
                value = agg.reduce(value, tup)
        state.set(value)
        collector.emit([value])

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.agg.prepare(conf, context)

    def cleanup(self) -> None:
        self.agg.cleanup()


def _rest(tup: TridentTuple, width: int) -> TridentTuple:
    """The tuple past its key fields (what a reducer sees: its input fields)."""
    names = tup.fields[width:]
    return TridentTuple(tup.values[width:], {n: i for i, n in enumerate(names)})
