"""Laying a builder's graph into bolts, as Storm's StreamBuilder does: a pure
planner over the nodes of squall.streams.stream, no I/O.

An operation starts a bolt (a *cut*) where its values must reach other tasks
than its input's: after a spout or a late-tuple stream, at a repartition, where
a window begins, at a key-based operation above parallelism 1 whose bolt is not
read by key, at a global aggregation above 1, and at ``update_state_by_key``.
Operations with no cut between them share a bolt and call each other.  Cuts at
one point (after the same node) start one bolt, read with the most specific of
their groupings.  The result, a list of :class:`Group`\\ s and sinks, is still
free of names, classes and specs: squall.streams.compile makes those.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from squall.streams import batching
from squall.streams.stream import TRANSPARENT, Node, upstream

_SPECIFIC = {"shuffle": 0, "fields": 1, "global": 2}


@dataclass(eq=False)
class Entry:
    """An operation's input port fed from another component: ``source`` is the node
    whose values arrive (a spout, a late-tuple source or an operation elsewhere)."""

    node: Node
    port: int
    source: Node
    by: str = "main"  # "main": the group's grouping; "value": fields-grouped on the value (a query)


@dataclass(eq=False)
class Group:
    """One processor bolt: the operations it runs, in creation (so topological) order."""

    made_by: int  # the id of the call that started it: what orders bolt names
    par: int
    kind: str = "plain"  # plain, windowed or stateful
    window: Any = None  # the window value a windowed group applies
    window_node: Node | None = None
    grouping: str = "shuffle"  # of its main inputs: shuffle, fields (on key) or global
    nodes: list[Node] = field(default_factory=list)
    entries: list[Entry] = field(default_factory=list)
    name: str = ""
    markers_in: list[Group] = field(default_factory=list)  # groups whose window ends it waits for
    markers_out: bool = False

    hold: bool = False  # downstream of a window with a batch operation: inputs wait for its end


@dataclass
class Layout:
    groups: list[Group]
    sinks: list[tuple[Node, Node]]  # (sink node, the node whose values it reads)
    group_of: dict[int, Group]
    exits: dict[int, Node]  # node id -> node whose values leave its bolt
    ops: dict[int, Any]  # node id -> the operation its bolt runs (a combined aggregation's phase)


def data_parents(node: Node) -> tuple[Node, ...]:
    """The nodes whose values reach it (a state query reads its state, not its values)."""
    return node.parents[:1] if "query_of" in node.extra else node.parents


class _Planner:
    def __init__(self, nodes: list[Node]) -> None:
        self.nodes = nodes
        self.next_id = max((n.id for n in nodes), default=0) + 1
        self.groups: list[Group] = []
        self.group_of: dict[int, Group] = {}
        self.at_point: dict[int, Group] = {}
        self.entry_nodes: set[int] = set()
        self.sinks: list[tuple[Node, Node]] = []
        self.ops: dict[int, Any] = {n.id: n.op for n in nodes}

    def run(self) -> Layout:
        for node in self.nodes:
            if node.kind in ("spout", "late", *TRANSPARENT):
                continue
            if node.kind == "sink":
                self.sinks.append((node, upstream(node.parents[0])[0]))
            elif node.extra.get("two_sided"):
                self._place_two_sided(node)
            elif "query_of" in node.extra:
                self._place_query(node)
            else:
                self._place(node)
        exits = {}
        for group in self.groups:
            for entry in group.entries:
                exits[entry.source.id] = entry.source
        for _sink, source in self.sinks:
            exits[source.id] = source
        self._markers()
        return Layout(self.groups, self.sinks, self.group_of, exits, self.ops)

    # -- placing one operation ------------------------------------------------------------

    def _place(self, node: Node) -> None:
        source, settings = upstream(node.parents[0])
        window = next((s for s in settings if s.kind == "window"), None)
        by_key = any(s.extra.get("by_key") for s in settings)
        stateful = bool(node.extra.get("stateful"))
        key_op = bool(node.extra.get("key_op"))
        cut = source.kind in ("spout", "late") or bool(settings) or stateful
        grouping = "shuffle"
        if stateful or (node.par > 1 and (by_key or (key_op and (cut or not self._keyed(source))))):
            cut, grouping = True, "fields"
        if node.extra.get("global_op") and node.par > 1:
            cut, grouping = True, "global"
        if not cut:
            self._join_group(node, self.group_of[source.id])
            return
        if (grouping != "shuffle" and not settings and source.kind == "op" and source.windowed
                and isinstance(node.op, (batching.Aggregate, batching.AggregateByKey))):
            source = self._combine_first(node, source)
        if stateful:
            group = self._new_group(node, settings)
        else:
            point = node.parents[0].id if source is upstream(node.parents[0])[0] else source.id
            group = self.at_point.get(point) or self._new_group(node, settings, point)
        if _SPECIFIC[grouping] > _SPECIFIC[group.grouping]:
            group.grouping = grouping
        if stateful:
            group.kind = "stateful"
        if window is not None:
            group.kind, group.window, group.window_node = "windowed", window.extra["window_value"], window
        self._enter(group, node, 0, source)

    def _combine_first(self, node: Node, source: Node) -> Node:
        """A global or by-key aggregation after an operation on a windowed stream: each task
        of the source's bolt combines its share per window first (Storm's Stream.combine)."""
        op = node.op
        partial = Node(self.next_id, "op", (source,), op=_phase(op, "partial"), pair=node.pair,
                       shape="pair" if node.pair else "value", par=source.par, window=source.window,
                       batched=True, spouts=source.spouts)
        self.next_id += 1
        self.ops[partial.id] = partial.op
        self.ops[node.id] = _phase(op, "merge")
        self._join_group(partial, self.group_of[source.id])
        return partial

    def _place_two_sided(self, node: Node) -> None:
        (src_a, set_a), (src_b, set_b) = upstream(node.parents[0]), upstream(node.parents[1])
        ga, gb = self.group_of.get(src_a.id), self.group_of.get(src_b.id)
        if (not set_a and not set_b and ga is not None and ga is gb
                and (node.par == 1 or (self._keyed(src_a) and self._keyed(src_b)))):
            self._join_group(node, ga)
            return
        group = self._new_group(node, [*set_a, *set_b])
        group.grouping = "fields" if node.par > 1 else "shuffle"
        window = node.extra.get("applies_window")
        if window is not None:
            group.kind, group.window, group.window_node = "windowed", window.extra["window_value"], window
        self._enter(group, node, 0, src_a)
        self._enter(group, node, 1, src_b)

    def _place_query(self, node: Node) -> None:
        group = self.group_of[node.extra["query_of"].id]
        source, settings = upstream(node.parents[0])
        if not settings and self.group_of.get(source.id) is group:
            self._join_group(node, group)
            return
        self._enter(group, node, 0, source, by="value")

    # -- groups ---------------------------------------------------------------------------

    def _new_group(self, node: Node, settings: list[Node], point: int | None = None) -> Group:
        made_by = min([node.id, *(s.id for s in settings)])
        group = Group(made_by=made_by, par=node.par)
        self.groups.append(group)
        if point is not None:
            self.at_point[point] = group
        return group

    def _join_group(self, node: Node, group: Group) -> None:
        group.nodes.append(node)
        self.group_of[node.id] = group

    def _enter(self, group: Group, node: Node, port: int, source: Node, by: str = "main") -> None:
        if node.id not in self.group_of:
            self._join_group(node, group)
        self.entry_nodes.add(node.id)
        group.entries.append(Entry(node, port, source, by))

    def _keyed(self, node: Node) -> bool:
        """Whether the node's values are where their key sends them: its bolt is read by
        key and only key-keeping operations came before it there."""
        group = self.group_of.get(node.id)
        if group is None:
            return False
        if node.id in self.entry_nodes:
            return group.grouping == "fields"
        if not getattr(self.ops[node.id], "key_keeping", False):
            return False
        return all(self._keyed(p) for p in data_parents(node))

    def _markers(self) -> None:
        """Which bolts send window ends on, and which wait for them (in topological order:
        groups were made after the groups they read)."""
        for group in self.groups:
            if group.kind == "windowed":
                group.markers_out = True
                continue
            feeding: list[Group] = []
            for entry in group.entries:
                src = self.group_of.get(entry.source.id)
                if src is not None and src.markers_out and src not in feeding and src is not group:
                    feeding.append(src)
            group.markers_in = feeding
            group.markers_out = bool(feeding)
            group.hold = bool(feeding) and any(getattr(self.ops[n.id], "batch", False) for n in group.nodes)


def _phase(op: Any, phase: str) -> Any:
    twin = copy.copy(op)
    twin.phase = phase
    twin.windowed = True
    if isinstance(twin, batching.AggregateByKey):
        twin.accs = {}
    return twin


def lay_out(nodes: list[Node]) -> Layout:
    return _Planner(nodes).run()
