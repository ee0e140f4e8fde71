"""The user's side of Trident: ``TridentTopology``, ``Stream``, ``GroupedStream``,
``TridentState`` (Storm's names in snake_case, Storm's field rules: squall.trident.graph).

Each call adds a node to the graph and checks its fields at once: an unknown field raises
``TopologyValidationError`` naming it, where the user wrote it.  The aggregations are
spelled out here as Storm spells them (a combiner aggregates within each partition before
the values cross the network; the others repartition first), so the planner sees only
plain nodes.
"""

from __future__ import annotations

from typing import Any

from squall.errors import TopologyValidationError
from squall.trident import aggregation
from squall.trident.graph import Node, StateSpec, as_fields, check_inputs, check_new
from squall.trident.operations import (
    Assembly,
    Filter,
    FlatMapFunction,
    Function,
    MapFunction,
    PeekFilter,
    QueryFunction,
    StateUpdater,
    check_operation,
)
from squall.trident.sources import spout_source


def _agg_args(args: tuple[Any, ...], where: str) -> tuple[list[str] | None, Any, list[str]]:
    """``(in_fields, aggregator, out_fields)`` or Storm's ``(aggregator, out_fields)``."""
    if len(args) == 3:
        return as_fields(args[0], where), args[1], as_fields(args[2], where)
    if len(args) == 2:
        return None, args[0], as_fields(args[1], where)
    msg = f"{where}: takes (in_fields, aggregator, out_fields) or (aggregator, out_fields)"
    raise TopologyValidationError(msg)


class Stream:
    """A stream of batches; every method returns the stream after its operation."""

    def __init__(self, topology: TridentTopology, node: Node) -> None:
        self.topology = topology
        self.node = node
        topology.register(node)

    # -- what the stream holds ----------------------------------------------------------------

    def get_output_fields(self) -> list[str]:
        return list(self.node.fields)

    def _add(self, kind: str, fields: list[str], **attrs: Any) -> Stream:
        return self.wrap(Node(kind, fields, parents=[self.node], **attrs))

    def wrap(self, node: Node) -> Stream:
        """A stream of this topology ending in ``node``."""
        return Stream(self.topology, node)

    def wrap_state(self, node: Node, spec: StateSpec) -> TridentState:
        return TridentState(self.topology, node, spec)

    def _where(self, call: str) -> str:
        return f"Stream.{call}"

    # -- per tuple ------------------------------------------------------------------------------

    def each(self, in_fields: Any, operation: Any, out_fields: Any = None) -> Stream:
        """``each(in, function, out)``: the function's emits appended; ``each(in, filter)``."""
        where = self._where("each")
        fields = as_fields(in_fields, where)
        check_inputs(self.node.fields, fields, where)
        if out_fields is None:
            check_operation(operation, (Filter,), where + " without output fields")
            return self._add("filter", list(self.node.fields), op=operation, in_fields=fields)
        check_operation(operation, (Function,), where)
        out = as_fields(out_fields, where)
        check_new(self.node.fields, out, where)
        return self._add("each", [*self.node.fields, *out], op=operation, in_fields=fields, out_fields=out)

    def filter(self, *args: Any) -> Stream:
        """``filter(filter)`` over every field, or ``filter(in_fields, filter)``."""
        if len(args) == 1:
            return self.each(self.node.fields, args[0])
        return self.each(args[0], args[1])

    def map(self, fn: Any, out_fields: Any = None) -> Stream:  # noqa: A003 - Storm's name
        return self._mapping("map", MapFunction(fn) if not isinstance(fn, Function) else fn, out_fields)

    def flat_map(self, fn: Any, out_fields: Any = None) -> Stream:
        return self._mapping("flat_map", FlatMapFunction(fn) if not isinstance(fn, Function) else fn,
                             out_fields)

    def _mapping(self, kind: str, function: Function, out_fields: Any) -> Stream:
        out = as_fields(out_fields, self._where(kind)) if out_fields is not None else list(self.node.fields)
        return self._add("map", out, op=function, in_fields=list(self.node.fields), out_fields=out)

    def peek(self, fn: Any) -> Stream:
        fields = list(self.node.fields)
        return self._add("filter", fields, op=PeekFilter(fn), in_fields=fields)

    def project(self, fields: Any) -> Stream:
        where = self._where("project")
        keep = as_fields(fields, where)
        check_inputs(self.node.fields, keep, where)
        return self._add("project", keep, in_fields=keep)

    # -- aggregations ---------------------------------------------------------------------------

    def partition_aggregate(self, *args: Any) -> Stream:
        in_fields, agg, out = _agg_args(args, self._where("partition_aggregate"))
        return aggregation.partition_aggregate(self, None, [(in_fields, agg, out)])

    def aggregate(self, *args: Any) -> Stream:
        in_fields, agg, out = _agg_args(args, self._where("aggregate"))
        return aggregation.aggregate(self, None, [(in_fields, agg, out)])

    def chained_agg(self) -> ChainedAggregatorDeclarer:
        return ChainedAggregatorDeclarer(self, None)

    def min_by(self, field: str) -> Stream:
        return aggregation.compare_by(self, field, least=True)

    def max_by(self, field: str) -> Stream:
        return aggregation.compare_by(self, field, least=False)

    def apply_assembly(self, assembly: Assembly) -> Stream:
        check_operation(assembly, (Assembly,), self._where("apply_assembly"))
        return assembly.apply(self)  # type: ignore[no-any-return]

    def group_by(self, fields: Any) -> GroupedStream:
        where = self._where("group_by")
        group = as_fields(fields, where)
        check_inputs(self.node.fields, group, where)
        return GroupedStream(self, group)

    def persistent_aggregate(self, factory: Any, *args: Any) -> TridentState:
        in_fields, agg, out = _agg_args(args, self._where("persistent_aggregate"))
        return aggregation.persistent_aggregate(self, None, factory, in_fields, agg, out)

    def partition_persist(self, factory: Any, in_fields: Any, updater: StateUpdater,
                          out_fields: Any = None) -> TridentState:
        where = self._where("partition_persist")
        fields = as_fields(in_fields, where)
        check_inputs(self.node.fields, fields, where)
        check_operation(updater, (StateUpdater,), where)
        out = as_fields(out_fields, where) if out_fields is not None else []
        state = StateSpec(factory)
        node = Node("partition_persist", out, parents=[self.node], op=updater, in_fields=fields,
                    out_fields=out, state=state)
        state.updater = node
        return TridentState(self.topology, node, state)

    def state_query(self, state: TridentState, *args: Any) -> Stream:
        """``state_query(state, [in_fields,] function, out_fields)`` (no input fields: all)."""
        where = self._where("state_query")
        if len(args) == 2:
            args = (list(self.node.fields), *args)
        if len(args) != 3:
            _fail(f"{where}: takes (state, [in_fields,] query_function, out_fields)")
        in_fields, function, out_fields = args
        if not isinstance(state, TridentState):
            _fail(f"{where}: the state is a TridentState (from persistent_aggregate, partition_persist "
                  f"or new_static_state), got {state!r}")
        fields = as_fields(in_fields, where)
        check_inputs(self.node.fields, fields, where)
        check_operation(function, (QueryFunction,), where)
        out = as_fields(out_fields, where)
        check_new(self.node.fields, out, where)
        return self._add("state_query", [*self.node.fields, *out], op=function, in_fields=fields,
                         out_fields=out, state=state.spec)

    # -- repartitions ---------------------------------------------------------------------------

    def _partition(self, kind: str, fields: list[str] | None = None) -> Stream:
        return self._add("partition", list(self.node.fields), grouping=(kind, fields or []))

    def shuffle(self) -> Stream:
        return self._partition("shuffle")

    def local_or_shuffle(self) -> Stream:
        return self._partition("local_or_shuffle")

    def broadcast(self) -> Stream:
        return self._partition("all")

    def global_(self) -> Stream:
        return self._partition("global")

    def batch_global(self) -> Stream:
        return self._partition("batch_global")

    def identity_partition(self) -> Stream:
        return self._partition("identity")

    def partition_by(self, fields: Any) -> Stream:
        where = self._where("partition_by")
        by = as_fields(fields, where)
        check_inputs(self.node.fields, by, where)
        return self._partition("fields", by)

    # -- placement ------------------------------------------------------------------------------

    def parallelism_hint(self, n: int) -> Stream:
        """The parallelism of the operations since the last repartition (the spout's, right
        after it)."""
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            _fail(f"Stream.parallelism_hint: a positive whole number, got {n!r}")
        node: Node | None = self.node
        while node is not None and node.kind != "partition":
            if node.parallelism is None:
                node.parallelism = n
            node = node.parents[0] if len(node.parents) == 1 else None
        return self

    def name(self, text: str) -> Stream:
        self.node.name = str(text)
        return self

    def to_stream(self) -> Stream:
        return self


class GroupedStream:
    """A stream grouped by fields: aggregations per group, state per group."""

    def __init__(self, stream: Stream, group_fields: list[str]) -> None:
        self.stream = stream
        self.group_fields = group_fields

    def get_group_fields(self) -> list[str]:
        return list(self.group_fields)

    def get_output_fields(self) -> list[str]:
        return self.stream.get_output_fields()

    def aggregate(self, *args: Any) -> Stream:
        in_fields, agg, out = _agg_args(args, "GroupedStream.aggregate")
        return aggregation.aggregate(self.stream, self.group_fields, [(in_fields, agg, out)])

    def partition_aggregate(self, *args: Any) -> Stream:
        in_fields, agg, out = _agg_args(args, "GroupedStream.partition_aggregate")
        return aggregation.partition_aggregate(self.stream, self.group_fields, [(in_fields, agg, out)])

    def chained_agg(self) -> ChainedAggregatorDeclarer:
        return ChainedAggregatorDeclarer(self.stream, self.group_fields)

    def persistent_aggregate(self, factory: Any, *args: Any) -> TridentState:
        in_fields, agg, out = _agg_args(args, "GroupedStream.persistent_aggregate")
        return aggregation.persistent_aggregate(self.stream, self.group_fields, factory, in_fields, agg, out)

    def state_query(self, state: TridentState, *args: Any) -> Stream:
        """``state_query(state, [in_fields,] function, out_fields)``: by the group fields by default."""
        if len(args) == 2:
            args = (self.group_fields, *args)
        return self.stream.partition_by(self.group_fields).state_query(state, *args)

    def each(self, in_fields: Any, operation: Any, out_fields: Any = None) -> GroupedStream:
        return GroupedStream(self.stream.each(in_fields, operation, out_fields), self.group_fields)

    def to_stream(self) -> Stream:
        return self.stream


class ChainedAggregatorDeclarer:
    """``chained_agg().aggregate(...).aggregate(...).chain_end()``: several aggregators over
    the same batch (and groups), their outputs side by side in one tuple."""

    def __init__(self, stream: Stream, group_fields: list[str] | None) -> None:
        self.stream = stream
        self.group_fields = group_fields
        self.aggs: list[tuple[list[str] | None, Any, list[str]]] = []
        self.kind: str | None = None

    def _add(self, kind: str, args: tuple[Any, ...]) -> ChainedAggregatorDeclarer:
        if self.kind not in (None, kind):
            _fail("chained_agg: all aggregators of a chain are aggregate() or all partition_aggregate()")
        self.kind = kind
        self.aggs.append(_agg_args(args, f"chained_agg().{kind}"))
        return self

    def aggregate(self, *args: Any) -> ChainedAggregatorDeclarer:
        return self._add("aggregate", args)

    def partition_aggregate(self, *args: Any) -> ChainedAggregatorDeclarer:
        return self._add("partition_aggregate", args)

    def chain_end(self) -> Stream:
        if not self.aggs:
            _fail("chained_agg: chain_end() with no aggregator")
        if self.kind == "aggregate":
            return aggregation.aggregate(self.stream, self.group_fields, self.aggs)
        return aggregation.partition_aggregate(self.stream, self.group_fields, self.aggs)


class TridentState:
    """A state the topology keeps or reads: ``state_query`` reads it; ``new_values_stream()``
    is the stream of what each batch changed in it."""

    def __init__(self, topology: TridentTopology, node: Node | None, spec: StateSpec) -> None:
        self.topology = topology
        self.node = node
        self.spec = spec
        if node is not None:
            topology.register(node)

    def new_values_stream(self) -> Stream:
        if self.node is None:
            _fail("TridentState.new_values_stream: a static state changes no values")
        return Stream(self.topology, self.node)

    def parallelism_hint(self, n: int) -> TridentState:
        if self.node is not None:
            Stream(self.topology, self.node).parallelism_hint(n)
        return self


class TridentTopology:
    """Streams of batches from spouts, operations on them, and the states they keep;
    ``build()`` is what ``LocalCluster.submit`` and ``squall submit`` take."""

    def __init__(self) -> None:
        self.spouts: list[Node] = []
        self.states: list[StateSpec] = []
        self._nodes: dict[int, Node] = {}  # every node made, in order

    def register(self, node: Node) -> None:
        self._nodes.setdefault(node.id, node)

    def nodes(self) -> list[Node]:
        return list(self._nodes.values())

    def new_stream(self, tx_id: str, spout: Any) -> Stream:
        if not isinstance(tx_id, str) or not tx_id or "/" in tx_id:
            _fail(f"TridentTopology.new_stream: the transactional id is a name without '/', got {tx_id!r}")
        source = spout_source(spout, carry=False)
        node = Node("spout", source.fields, op=spout, options={"tx_id": tx_id, "stream": source.stream},
                    name=tx_id, parallelism=source.parallelism)
        self.spouts.append(node)
        return Stream(self, node)

    def new_drpc_stream(self, function: str, local_drpc: Any = None) -> Stream:
        if not isinstance(function, str) or not function:
            _fail(f"TridentTopology.new_drpc_stream: a function name, got {function!r}")
        from squall.drpc.invocations import service_id_of
        from squall.trident.drpc import DRPCBatchSpout

        node = Node("spout", ["args"], op=DRPCBatchSpout(function, service_id_of(local_drpc)),
                    name=f"drpc-{function}", options={"drpc": function, "tx_id": f"drpc-{function}"})
        self.spouts.append(node)
        return Stream(self, node)

    def new_static_state(self, factory: Any) -> TridentState:
        spec = StateSpec(factory)
        self.states.append(spec)
        return TridentState(self, None, spec)

    def merge(self, *streams: Stream) -> Stream:
        if len(streams) == 1 and isinstance(streams[0], (list, tuple)):
            streams = tuple(streams[0])
        if len(streams) < 2:
            _fail("TridentTopology.merge: two streams or more")
        width = len(streams[0].node.fields)
        for s in streams[1:]:
            if len(s.node.fields) != width:
                _fail(f"TridentTopology.merge: the streams have {width} and {len(s.node.fields)} fields; "
                      "merged streams have as many (the first one's names)")
        return Stream(self, Node("merge", list(streams[0].node.fields), parents=[s.node for s in streams]))

    def join(self, stream1: Stream, fields1: Any, stream2: Stream, fields2: Any, out_fields: Any) -> Stream:
        where = "TridentTopology.join"
        f1, f2 = as_fields(fields1, where), as_fields(fields2, where)
        check_inputs(stream1.node.fields, f1, where)
        check_inputs(stream2.node.fields, f2, where)
        if len(f1) != len(f2):
            _fail(f"{where}: join on as many fields of each stream, got {f1} and {f2}")
        out = as_fields(out_fields, where)
        others1 = [f for f in stream1.node.fields if f not in f1]
        others2 = [f for f in stream2.node.fields if f not in f2]
        if len(out) != len(f1) + len(others1) + len(others2):
            _fail(f"{where}: out_fields names {len(out)} fields; the join gives "
                  f"{len(f1) + len(others1) + len(others2)} (the join fields, then each stream's others: "
                  f"{f1 + others1 + others2})")
        left = stream1.partition_by(f1).node
        right = stream2.partition_by(f2).node
        return Stream(self, Node("join", out, parents=[left, right], options={"keys": [f1, f2]}))

    def build(self, name: str = "TridentTopology") -> Any:
        """The topology that runs this (squall.trident.compiler): what ``LocalCluster.submit``
        and ``squall submit`` take.  ``name``: its definition's (its states' key)."""
        from squall.trident.compiler import compile_topology

        return compile_topology(self, name)


def _fail(message: str) -> None:
    raise TopologyValidationError(message)


__all__ = ["ChainedAggregatorDeclarer", "GroupedStream", "Stream", "TridentState",
           "TridentTopology"]
