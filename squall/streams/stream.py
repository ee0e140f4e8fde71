"""What users chain: ``Stream``, ``PairStream`` and ``StreamState``.

Each call adds a :class:`Node` to its builder's graph and returns a handle on
it; nothing runs and nothing is laid into bolts until ``build()``
(squall.streams.layout).  What can be refused from the call alone is refused
here, naming the operation: the graph a build sees is always well formed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from squall.errors import TopologyValidationError
from squall.streams import batching, keyed_state
from squall.streams import processors as ops
from squall.streams.aggregators import Count
from squall.streams.functions import aggregator_of, check_callable, is_window, updater_of


def _fail(message: str) -> None:
    raise TopologyValidationError(message)


@dataclass(eq=False)
class Node:
    """One call of the graph.  ``kind``: spout, late (a source), op (an operation of
    ``op``), window and repartition (settings of the edge to the next operation,
    no operation themselves), sink (``to()``)."""

    id: int
    kind: str
    parents: tuple[Node, ...]
    op: Any = None
    pair: bool = False
    shape: str = "value"  # how its values cross to another bolt (squall.streams.chain)
    par: int = 1
    window: Node | None = None  # the window() node the stream is windowed by (the last)
    batched: bool = False  # a batch operation came since that window()
    spouts: frozenset[int] = frozenset()  # ids of the spout nodes its values come from
    extra: dict[str, Any] = field(default_factory=dict)
    children: list[Node] = field(default_factory=list)

    @property
    def windowed(self) -> bool:
        return self.window is not None


TRANSPARENT = ("window", "repartition")


def upstream(node: Node) -> tuple[Node, list[Node]]:
    """The nearest node that is not an edge setting, and the settings passed on the way."""
    settings: list[Node] = []
    while node.kind in TRANSPARENT:
        settings.append(node)
        node = node.parents[0]
    settings.reverse()
    return node, settings


class Stream:
    """Storm's ``Stream<T>``: values, one at a time."""

    def __init__(self, builder: Any, node: Node) -> None:
        self._builder = builder
        self._node = node

    def __repr__(self) -> str:
        return f"<{type(self).__name__} #{self._node.id} par={self._node.par}>"

    # -- the graph ---------------------------------------------------------------------

    def _add(self, kind: str, op: Any = None, *, pair: bool | None = None, shape: str | None = None,
             parents: tuple[Node, ...] | None = None, par: int | None = None, **extra: Any) -> Node:
        here = self._node
        node = self._builder._new_node(
            kind, parents if parents is not None else (here,), op=op,
            pair=here.pair if pair is None else pair,
            shape=(here.shape if shape is None else shape),
            par=here.par if par is None else par, window=here.window,
            batched=here.batched or bool(op is not None and getattr(op, "batch", False)),
            spouts=here.spouts, extra=extra)
        return node

    def _wrap(self, node: Node) -> Any:
        return (PairStream if node.pair else Stream)(self._builder, node)

    def _op(self, op: Any, *, pair: bool | None = None, shape: str | None = None) -> Any:
        return self._wrap(self._add("op", op, pair=pair, shape=shape))

    def _need_batch_since_window(self, what: str) -> None:
        node = self._node
        if node.windowed and not node.batched:
            _fail(f"{what}: the stream is windowed and no batch operation (an aggregation, reduce, "
                  f"count, group or join) came since its last window(); one must, to give per-window "
                  f"results for {what} to read")

    # -- per-value operations ----------------------------------------------------------

    def filter(self, predicate: Any) -> Any:
        check_callable("filter", predicate)
        return self._op(ops.Filter(predicate))

    def map(self, fn: Any) -> Stream:
        check_callable("map", fn)
        return self._op(ops.Map(fn), pair=False, shape="value")

    def flat_map(self, fn: Any) -> Stream:
        check_callable("flat_map", fn)
        return self._op(ops.FlatMap(fn), pair=False, shape="value")

    def map_to_pair(self, fn: Any) -> PairStream:
        check_callable("map_to_pair", fn)
        return self._op(ops.MapToPair(fn), pair=True, shape="pair")

    def flat_map_to_pair(self, fn: Any) -> PairStream:
        check_callable("flat_map_to_pair", fn)
        return self._op(ops.FlatMapToPair(fn), pair=True, shape="pair")

    def peek(self, fn: Any) -> Any:
        check_callable("peek", fn)
        return self._op(ops.Peek(fn))

    def for_each(self, fn: Any) -> None:
        check_callable("for_each", fn)
        self._add("op", ops.ForEach(fn))

    def print(self) -> None:  # noqa: A003 - Storm's name
        self._add("op", ops.Print())

    def to(self, bolt: Any, parallelism: int | None = None) -> None:
        spec = self._builder._sink_spec(bolt, parallelism)
        here = self
        source, settings = upstream(self._node)
        if source.kind == "late" or any(s.kind == "window" for s in settings):
            # A window, or late tuples, with no operation after: one passes the values on
            # (a sink reads a generated bolt's value streams, not a window's).
            here = self._op(ops.Pass())
        here._add("sink", None, sink=spec)

    def branch(self, *predicates: Any) -> list[Any]:
        if not predicates:
            _fail("branch: give one predicate or more")
        for p in predicates:
            check_callable("branch", p)
        router = self._add("op", ops.Branch(predicates))
        out = []
        for i in range(len(predicates)):
            node = Stream(self._builder, router)._add("op", ops.Pass(), branch=i)
            out.append(self._wrap(node))
        return out

    # -- windows and parallelism ------------------------------------------------------

    def window(self, window: Any) -> Any:
        if not is_window(window):
            _fail(f"window: expected SlidingWindows.of(...) or TumblingWindows.of(...), got {window!r}")
        self._need_batch_since_window("window")
        node = self._add("window", None, window_value=window)
        node.window, node.batched = node, False
        return self._wrap(node)

    def repartition(self, parallelism: int) -> Any:
        if isinstance(parallelism, bool) or not isinstance(parallelism, int) or parallelism < 1:
            _fail(f"repartition: the parallelism must be an integer >= 1, got {parallelism!r}")
        if parallelism == self._node.par:
            return self
        return self._wrap(self._add("repartition", None, par=parallelism))

    # -- batch operations ----------------------------------------------------------------

    def aggregate(self, *args: Any) -> Stream:
        agg = aggregator_of("aggregate", args)
        return self._global(agg, "aggregate")

    def reduce(self, fn: Any) -> Stream:
        check_callable("reduce", fn)
        return self._global(batching.Reducing(fn), "reduce")

    def count(self) -> Stream:
        return self._global(Count(), "count")

    def _global(self, agg: Any, label: str) -> Stream:
        node = self._add("op", batching.Aggregate(agg, label, windowed=self._node.windowed),
                         pair=False, shape="value", global_op=True)
        return self._wrap(node)

    # -- state -------------------------------------------------------------------------

    def state_query(self, stream_state: StreamState) -> PairStream:
        if not isinstance(stream_state, StreamState) or stream_state._builder is not self._builder:
            _fail(f"state_query: expected a StreamState of this builder (update_state_by_key's "
                  f"result), got {stream_state!r}")
        self._need_batch_since_window("state_query")
        update = stream_state._node
        node = self._add("op", keyed_state.StateQuery(update.op), pair=True, shape="pair",
                         parents=(self._node, update), query_of=update)
        return PairStream(self._builder, node)


class PairStream(Stream):
    """Storm's ``PairStream<K, V>``: ``(key, value)`` pairs."""

    def map_values(self, fn: Any) -> PairStream:
        check_callable("map_values", fn)
        return self._op(ops.MapValues(fn), shape="pair")

    def flat_map_values(self, fn: Any) -> PairStream:
        check_callable("flat_map_values", fn)
        return self._op(ops.FlatMapValues(fn), shape="pair")

    def _by_key(self, agg: Any, label: str) -> PairStream:
        node = self._add("op", batching.AggregateByKey(agg, label, windowed=self._node.windowed),
                         shape="pair", key_op=True)
        return PairStream(self._builder, node)

    def aggregate_by_key(self, *args: Any) -> PairStream:
        return self._by_key(aggregator_of("aggregate_by_key", args), "aggregate_by_key")

    def reduce_by_key(self, fn: Any) -> PairStream:
        check_callable("reduce_by_key", fn)
        return self._by_key(batching.Reducing(fn), "reduce_by_key")

    def count_by_key(self) -> PairStream:
        return self._by_key(Count(), "count_by_key")

    def group_by_key(self) -> PairStream:
        return self._by_key(batching.Grouping(), "group_by_key")

    def group_by_key_and_window(self, window: Any) -> PairStream:
        return self._key_partitioned("group_by_key_and_window").window(window).group_by_key()

    def reduce_by_key_and_window(self, fn: Any, window: Any) -> PairStream:
        check_callable("reduce_by_key_and_window", fn)
        return self._key_partitioned("reduce_by_key_and_window").window(window).reduce_by_key(fn)

    def _key_partitioned(self, what: str) -> PairStream:
        """Partition by key, then window: a key cut even when the window's bolt starts one anyway."""
        self._need_batch_since_window(what)
        return PairStream(self._builder, self._add("repartition", None, by_key=True))

    # -- joins ---------------------------------------------------------------------------

    def join(self, other: PairStream, value_joiner: Any = None) -> PairStream:
        return self._join("join", other, value_joiner)

    def left_outer_join(self, other: PairStream, value_joiner: Any = None) -> PairStream:
        return self._join("left_outer_join", other, value_joiner)

    def right_outer_join(self, other: PairStream, value_joiner: Any = None) -> PairStream:
        return self._join("right_outer_join", other, value_joiner)

    def full_outer_join(self, other: PairStream, value_joiner: Any = None) -> PairStream:
        return self._join("full_outer_join", other, value_joiner)

    def co_group_by_key(self, other: PairStream) -> PairStream:
        windowed = self._check_sides("co_group_by_key", other)
        node = self._add("op", batching.CoGroup(windowed), shape="cogroup", parents=(self._node, other._node),
                         key_op=True, two_sided=True)
        self._joined(node, other)
        return PairStream(self._builder, node)

    def _join(self, kind: str, other: PairStream, joiner: Any) -> PairStream:
        if joiner is not None:
            check_callable(f"{kind}'s value joiner", joiner)
        windowed = self._check_sides(kind, other)
        node = self._add("op", batching.Join(kind, joiner, windowed),
                         shape="join" if joiner is None else "pair",
                         parents=(self._node, other._node), key_op=True, two_sided=True)
        self._joined(node, other)
        return PairStream(self._builder, node)

    def _joined(self, node: Node, other: PairStream) -> None:
        """The joined stream is windowed as its sides were, its values from both."""
        a, b = self._node, other._node
        node.spouts = a.spouts | b.spouts
        node.window = a.window or b.window
        node.batched = True
        node.extra["applies_window"] = next((s for s in (a, b) if s.kind == "window"), None)

    def _check_sides(self, what: str, other: Any) -> bool:
        """Whether the join is windowed; refuses sides that do not fit (squall.streams' rule)."""
        if not isinstance(other, PairStream) or other._builder is not self._builder:
            _fail(f"{what}: the other side must be a PairStream of this builder, got {other!r}")
        a, b = self._node, other._node
        if a.kind == "window" and b.kind == "window":
            if a.extra["window_value"] != b.extra["window_value"]:
                _fail(f"{what}: the two sides are windowed differently "
                      f"({a.extra['window_value'].describe()} and {b.extra['window_value'].describe()})")
            return True
        for this, that in ((a, b), (b, a)):
            if this.kind == "window":
                if that.windowed and that.kind != "window":
                    _fail(f"{what}: one side is the stream a window() returned and the other is "
                          f"windowed already; window the other the same way or not at all")
                return True
        if a.windowed != b.windowed:
            _fail(f"{what}: one side is windowed and the other is not; window both equally, or "
                  f"call it on the stream window() returned so that the window applies to both")
        if a.windowed:
            wa, wb = a.window.extra["window_value"], b.window.extra["window_value"]  # type: ignore[union-attr]
            if wa != wb:
                _fail(f"{what}: the two sides' windows differ ({wa.describe()} and {wb.describe()})")
            for side in (a, b):
                self._need_side_batched(what, side)
            return True
        return False

    @staticmethod
    def _need_side_batched(what: str, side: Node) -> None:
        if not side.batched:
            _fail(f"{what}: a side is windowed and no batch operation came since its window(); join "
                  f"the stream window() returned instead, so the window applies to both sides")

    # -- state -------------------------------------------------------------------------

    def update_state_by_key(self, *args: Any) -> StreamState:
        updater = updater_of("update_state_by_key", args)
        self._need_batch_since_window("update_state_by_key")
        node = self._add("op", keyed_state.UpdateState(updater), shape="pair", key_op=True, stateful=True)
        self._builder._stateful.append(node)
        return StreamState(self._builder, node)


class StreamState:
    """What ``update_state_by_key`` returns: read it with ``state_query``; its
    ``to_pair_stream()`` is the stream of ``(key, new state)`` updates."""

    def __init__(self, builder: Any, node: Node) -> None:
        self._builder = builder
        self._node = node

    def to_pair_stream(self) -> PairStream:
        return PairStream(self._builder, self._node)

    def __repr__(self) -> str:
        return f"<StreamState #{self._node.id}>"
