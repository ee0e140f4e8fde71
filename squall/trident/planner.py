"""From a Trident graph to bolts: every run of operations between two repartitions is one
bolt (a *group*), the tuples of a batch go from operation to operation inside it by plain
calls, and only a repartition (or a spout) puts a stream between two bolts.  Pure: no
topology is built here (squall.trident.compiler does that).

A node joins its parent's group when it has one parent, in a group of operations (not a
spout's), through no repartition; a node with several parents joins them when they are all
in one group; anything else starts a group.  A group that updates a state is a committer:
its batches finish in the commit phase, in txid order, so the state sees them in order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from squall.errors import TopologyValidationError
from squall.trident.graph import Node, ancestors


@dataclass(eq=False)
class Edge:
    """Tuples of ``node`` (in group ``source``) into ``target`` (a node of another group),
    partitioned as ``grouping`` (kind, fields) says."""

    source: str
    node: Node
    target: Node
    grouping: tuple[str, list[str]]
    target_group: str = ""

    @property
    def stream(self) -> str:
        return f"s{self.node.id}"


@dataclass(eq=False)
class Group:
    name: str
    nodes: list[Node] = field(default_factory=list)  # parents before children
    inputs: list[Edge] = field(default_factory=list)
    outputs: list[Edge] = field(default_factory=list)
    parallelism: int = 1
    spout: Node | None = None  # a spout group's spout
    colocate_with: str | None = None  # a query group: the group updating the state it reads

    @property
    def committer(self) -> bool:
        return any(n.kind == "partition_persist" for n in self.nodes)

    @property
    def batch_group(self) -> str:
        """The transactional id of the spout whose batches this group processes."""
        return str(self.nodes[0].options.get("batch_group", "")) if self.nodes else ""


@dataclass
class Plan:
    groups: dict[str, Group]
    spouts: list[Group]


def _fail(message: str) -> None:
    raise TopologyValidationError(message)


def plan(spouts: Sequence[Node], leaves: Sequence[Node]) -> Plan:
    """Group every node reachable from ``leaves`` (the graph's ends)."""
    order = [n for n in ancestors(leaves) if n.kind != "partition"]
    where: dict[int, Group] = {}
    groups: dict[str, Group] = {}
    spout_groups = []
    for node in order:
        if node.kind == "spout_stream":  # another stream of its spout's (a DRPC request's return info)
            where[node.id] = where[node.parents[0].id]
            continue
        if node.kind == "spout":
            g = Group(f"spout-{node.options['tx_id']}", [node], spout=node,
                      parallelism=node.parallelism or 1)
            groups[g.name] = g
            spout_groups.append(g)
            where[node.id] = g
            continue
        real = [_through_partitions(p) for p in node.parents]
        homes = {id(where[r.id]) for r, _g in real}
        direct = all(g is None for _r, g in real)
        home = where[real[0][0].id]
        if direct and len(homes) == 1 and home.spout is None:
            home.nodes.append(node)
            where[node.id] = home
            continue
        g = Group(f"b-{len(groups) - len(spout_groups)}", [node])
        groups[g.name] = g
        where[node.id] = g
        for parent, grouping in real:
            src = where[parent.id]
            if grouping is None:
                # Straight from a spout, or several parents' groups meeting: task to task when
                # the counts match (Storm's identity partition), else spread.
                grouping = ("identity", [])
            edge = Edge(src.name, parent, node, grouping, g.name)
            g.inputs.append(edge)
            src.outputs.append(edge)
    for g in groups.values():
        if g.spout is None:
            hints = [n.parallelism for n in g.nodes if n.parallelism is not None]
            g.parallelism = max(hints) if hints else _inherited(g, groups)
    _align_queries(groups, where)
    _batch_groups(groups)
    return Plan(groups, spout_groups)


def _through_partitions(node: Node) -> tuple[Node, tuple[str, list[str]] | None]:
    """The operation above ``node`` through repartitions, and the last repartition's grouping."""
    grouping = None
    while node.kind == "partition":
        if grouping is None:
            grouping = node.grouping
        if len(node.parents) != 1:
            _fail(f"{node!r}: a repartition of several streams")
        node = node.parents[0]
    return node, grouping


def _inherited(g: Group, groups: dict[str, Group]) -> int:
    """A group with no hint: what an identity edge ties it to, else 1 (Storm's default)."""
    for edge in g.inputs:
        if edge.grouping[0] == "identity":
            return groups[edge.source].parallelism
    return 1


def _align_queries(groups: dict[str, Group], where: dict[int, Group]) -> None:
    """A query of a state the topology updates runs with the state's partitions: as many
    tasks as the updating bolt, so that task i of each holds partition i of the state, and
    task i of both in one worker (``colocate_with``: Storm runs them in one bolt), where a
    state in memory or in a node's file is one table.  A query stream partitioned by the
    state's key then reaches the partition that key is in.  A group reading states of two
    updating groups runs beside the first."""
    for g in groups.values():
        for node in g.nodes:
            updater = node.state.updater if node.kind == "state_query" and node.state is not None else None
            if updater is None or updater.id not in where:
                continue
            wanted = where[updater.id].parallelism
            hinted = [n.parallelism for n in g.nodes if n.parallelism is not None]
            if hinted and max(hinted) != wanted:
                _fail(f"Trident: state_query of a state kept with parallelism {wanted} is given "
                      f"parallelism {max(hinted)}; a query runs in the state's partitions (leave its "
                      "parallelism_hint out, or make it the state's)")
            g.parallelism = wanted
            if g.colocate_with is None:
                g.colocate_with = where[updater.id].name


def _batch_groups(groups: dict[str, Group]) -> None:
    """Each node's batch group: the transactional id of the spout its batches come from.
    Streams of two spouts may not meet (merge, join): their batches are not the same."""
    for g in groups.values():
        for node in g.nodes:
            spouts = {a.options["tx_id"] for a in ancestors([node]) if a.kind == "spout"}
            if len(spouts) > 1:
                _fail(f"Trident: {node.kind} of streams from spouts {sorted(spouts)}: the streams of "
                      "one operation come from one spout (each spout's batches are its own)")
            node.options["batch_group"] = next(iter(spouts)) if spouts else ""
