"""A Trident topology compiled onto the transactional core: for each spout (each batch group)
a coordinator and an emitter (squall.transactional's CoordinatorSpout and EmitterBolt, with
the transactional spout squall.trident.sources makes of the user's: the user's own, or one
carrying it), and for each group of operations (squall.trident.planner) one
:class:`~squall.trident.bolt.TridentBolt` inside a BatchCoordinatedBolt: batches complete by
per-task counts, state updates in the commit phase, in txid order.  What comes out is an
ordinary topology class: ``LocalCluster.submit`` and ``squall submit`` take it.
"""

from __future__ import annotations

import copy
import zlib
from typing import Any

from squall.errors import TopologyValidationError
from squall.topology.component import ComponentSpec, Stream, StreamRef
from squall.topology.grouping import CustomGrouping, Grouping
from squall.topology.topology import Topology, build_definition
from squall.transactional.coordinated import BatchCoordinatedBolt
from squall.transactional.coordinator_spout import CoordinatorSpout
from squall.transactional.emitter import EmitterBolt
from squall.transactional.output import BATCH_STREAM, COMMIT_STREAM, COUNT_STREAM, coordinator_name
from squall.trident import planner
from squall.trident.bolt import TridentBolt, TridentCommitterBolt
from squall.trident.drpc import RETURN_STREAM, DRPCReturn
from squall.trident.graph import Node, ancestors
from squall.trident.sources import spout_source
from squall.trident.spout import TridentSpout, encode
from squall.worker.plan import COLOCATE_WITH

TX = "tx"  # the first field of every stream: the batch's TransactionAttempt
CHUNK = 256  # rows of a spout's batch to a tuple


class IdentityGrouping(CustomGrouping):
    """Storm's IdentityGrouping, for a spout's stream (an emitter's tuples are not emitted
    direct): task i of the emitters feeds task i of the group after it when both have as
    many tasks, so the spout's partitions reach the operations chained after it unchanged;
    otherwise each emitter task deals its tuples round-robin."""

    def prepare(self, context: Any, stream: str, target_tasks: list[int]) -> None:
        self.targets = sorted(target_tasks)
        index, sources = context.this_task_index, len(context.this_component_tasks)
        self.next = index
        self.same = sources == len(self.targets)

    def choose_tasks(self, task_id: int, values: Any) -> list[int]:
        if self.same:
            return [self.targets[self.next]]
        self.next = (self.next + 1) % len(self.targets)
        return [self.targets[self.next]]


class BatchGlobalGrouping(CustomGrouping):
    """``batch_global()`` right after a spout: a whole batch to one task, picked by its txid as
    TridentBolt picks it for the streams between groups."""

    def prepare(self, context: Any, stream: str, target_tasks: list[int]) -> None:
        self.targets = sorted(target_tasks)

    def choose_tasks(self, task_id: int, values: Any) -> list[int]:
        return [self.targets[zlib.crc32(str(values[0].txid).encode()) % len(self.targets)]]


def _grouping(kind: str, fields: list[str], from_spout: bool = False) -> Any:
    if kind == "fields":
        return Grouping.fields(*fields)
    if from_spout and kind in ("identity", "batch_global"):
        return Grouping.custom(IdentityGrouping if kind == "identity" else BatchGlobalGrouping)
    if kind in ("identity", "batch_global"):
        return Grouping.direct()
    return {"shuffle": Grouping.shuffle, "local_or_shuffle": Grouping.local_or_shuffle,
            "all": Grouping.all, "global": Grouping.global_}[kind]()


def _cut(group: planner.Group) -> list[Node]:
    """Copies of the group's nodes whose parents outside the group are stand-ins carrying
    only their fields: a group's options hold its own operations, not the graph above it."""
    inside = {n.id for n in group.nodes}
    copies: dict[int, Node] = {}
    for node in group.nodes:
        twin = copy.copy(node)
        twin.options = {k: v for k, v in node.options.items() if k != "local_drpc"}
        twin.parents = [copies[p.id] if p.id in inside else Node("input", list(p.fields), id=p.id)
                        for p in node.parents]
        if node.state is not None:
            twin.state = copy.copy(node.state)
            twin.state.updater = None
        copies[node.id] = twin
    return [copies[n.id] for n in group.nodes]


def _side(target: Node, source: Node) -> int:
    """Which parent of ``target`` the tuples of ``source`` come in as (through repartitions)."""
    for i, parent in enumerate(target.parents):
        node = parent
        while node.kind == "partition" and node is not source:
            node = node.parents[0]
        if node is source:
            return i
    return 0


def compile_topology(topology: Any, name: str = "TridentTopology") -> type[Topology]:
    seen: dict[str, Node] = {}
    for spout in topology.spouts:
        other = seen.setdefault(spout.options["tx_id"], spout)
        if other is not spout:
            msg = (f"TridentTopology: two streams with the transactional id {spout.options['tx_id']!r}; "
                   "each new_stream needs an id of its own (it keys the stream's transactions)")
            raise TopologyValidationError(msg)
    leaves = _leaves(topology)
    leaves = [*[n for n in leaves if not _is_drpc(n)], *_drpc_returns(topology, leaves)]
    plan = planner.plan(topology.spouts, leaves)
    specs: dict[str, ComponentSpec] = {}
    names = {g.name: g for g in plan.groups.values()}
    component_of = {g.name: g.name if g.spout is None else g.spout.options["tx_id"] for g in names.values()}
    for g in plan.spouts:
        spout_node = g.spout
        assert spout_node is not None
        tx_id = spout_node.options["tx_id"]
        component = component_of[g.name]
        coordinator = coordinator_name(component)
        source = spout_source(spout_node.op)
        # A batch spout's rows travel in chunks unless an edge from the spout partitions them by
        # fields (a chunk goes to one task): one queue hop and one count per chunk, not per row.
        chunk = CHUNK if source.spout is TridentSpout and not any(
            e.grouping[0] == "fields" for e in g.outputs) else 0
        opts = {"spout": source.spout, "spout_options": {**source.options, "chunk": chunk},
                "transactional_id": tx_id}
        shown = {"batchGroup": tx_id, "spout": source.label, "kind": source.kind}
        specs[coordinator] = ComponentSpec(CoordinatorSpout, "spout", name=coordinator, par=1, tasks=1,
                                           config=source.config,
                                           options={**opts, "trident": {**shown, "role": "coordinator"}})
        declared = [Stream([TX, "rows"]) if chunk and st.name == "default" else st for st in source.streams]
        streams = [*declared, Stream([TX, "count"], name=COUNT_STREAM, direct=True)]
        if spout_node.options.get("drpc"):
            streams.append(Stream([TX, "return_info"], name=RETURN_STREAM))
        emitter_inputs: dict[Any, Any] = {StreamRef(coordinator, BATCH_STREAM): Grouping.all()}
        if source.kind == "opaque":  # its emitters store each partition's metadata when it commits
            emitter_inputs[StreamRef(coordinator, COMMIT_STREAM)] = Grouping.all()
        specs[component] = ComponentSpec(EmitterBolt, "bolt", name=component, inputs=emitter_inputs,
                                         par=g.parallelism, outputs=streams, config=source.config,
                                         options={**opts, "trident": {**shown, "role": "emitter"}})
    late = _late_groups(plan)
    for g in plan.groups.values():
        if g.spout is not None:
            continue
        tx_id = g.batch_group  # the transactional id of the spout whose batches it processes
        coordinator = coordinator_name(tx_id)  # a spout's component is named by its id
        inputs: dict[Any, Any] = {}
        entries: dict[str, tuple[Node, int, bool]] = {}
        for edge in g.inputs:
            source = component_of[edge.source]
            from_spout = names[edge.source].spout is not None
            stream = edge.node.options.get("stream", "default") if from_spout else _stream(edge)
            kind, fields = edge.grouping
            inputs[StreamRef(source, stream)] = (_grouping(kind, fields, from_spout) if from_spout
                                                 else Grouping.direct())
            inputs[StreamRef(source, COUNT_STREAM)] = Grouping.direct()
            chunked = not from_spout or (stream == "default" and
                                         specs[source].options["spout_options"].get("chunk", 0) > 0)
            entries[f"{source}/{stream}"] = (edge.target, _side(edge.target, edge.node), chunked)
        if g.committer:  # its batches finish when the coordinator commits them, in txid order
            inputs[StreamRef(coordinator, COMMIT_STREAM)] = Grouping.all()
        exits: dict[int, list[tuple[str, str, str]]] = {}
        outputs = [Stream([TX, "count"], name=COUNT_STREAM, direct=True)]
        for edge in g.outputs:
            # Between two groups every stream is direct and carries rows in chunks: the bolt
            # partitions them itself (squall.trident.bolt), as the grouping would have.
            kind, fields = edge.grouping
            key = [edge.node.fields.index(f) for f in fields] if kind == "fields" else []
            exits.setdefault(edge.node.id, []).append((_stream(edge), kind, edge.target_group, key))
            outputs.append(Stream([TX, "rows"], name=_stream(edge), direct=True))
        cut = {n.id: n for n in _cut(g)}
        group_data = {"nodes": list(cut.values()),
                      "entries": {k: (cut[node.id], side, chunked)
                                  for k, (node, side, chunked) in entries.items()},
                      "exits": exits, "targets": sorted({e.target_group for e in g.outputs})}
        bolt = TridentCommitterBolt if g.committer else TridentBolt
        specs[g.name] = ComponentSpec(
            BatchCoordinatedBolt, "bolt", name=g.name, inputs=inputs, par=g.parallelism, outputs=outputs,
            config={COLOCATE_WITH: g.colocate_with} if g.colocate_with else {},
            options={"bolt": bolt, "bolt_options": {"group": encode(group_data)}, "committer": g.committer,
                     "coordinator": coordinator, "transactional_id": tx_id,
                     "late_sources": sorted(component_of[e.source] for e in g.inputs if e.source in late),
                     "trident": {"batchGroup": tx_id,
                                 "operations": [describe_node(n) for n in g.nodes],
                                 "committer": g.committer}})
    definition = build_definition(name, specs, {"topology.max.spout.pending": 1})
    return _topology_class(name, definition)


def describe_node(node: Node) -> str:
    """One operation as the UI shows it: ``each(Split: sentence -> word)``."""
    op = type(node.op).__name__ if node.op is not None else ""
    if node.kind == "aggregate":
        op = ", ".join(type(s.agg).__name__ for s in node.op)
        phase = node.options.get("phase")
        op += "" if phase in (None, "all") else f" {phase}"
    inputs = node.in_fields
    if node.kind == "aggregate":
        inputs = list(dict.fromkeys(f for s in node.op for f in s.in_fields))
    fields = f"{', '.join(inputs)} -> {', '.join(node.fields)}"
    label = f"{node.kind}({op + ': ' if op else ''}{fields})"
    return f"{node.name}: {label}" if node.name else label


def _is_drpc(node: Node) -> bool:
    return any(a.kind == "spout" and a.options.get("drpc") for a in ancestors([node]))


def _drpc_returns(topology: Any, leaves: list[Node]) -> list[Node]:
    """For each DRPC stream, the node that answers its requests: the stream's last tuples
    (every leaf of its batch group, globally) and the request's return info (the spout's
    stream of it), gathered in one task (squall.trident.drpc.DRPCReturn)."""
    out = []
    for spout in topology.spouts:
        if not spout.options.get("drpc"):
            continue
        ends = [n for n in leaves if spout in ancestors([n])] or [spout]
        parents = [Node("partition", list(n.fields), parents=[n], grouping=("global", [])) for n in ends]
        info = Node("spout_stream", ["return_info"], parents=[spout], options={"stream": RETURN_STREAM})
        parents.append(Node("partition", ["return_info"], parents=[info], grouping=("global", [])))
        out.append(Node("collect", [], parents=parents, op=DRPCReturn(),
                        name=f"return {spout.options['drpc']}"))
    return out


def _stream(edge: planner.Edge) -> str:
    return f"s{edge.node.id}-{edge.target.id}"


def _late_groups(plan: planner.Plan) -> set[str]:
    """Committing groups and every group downstream of one: they finish in the commit phase."""
    late = {g.name for g in plan.groups.values() if g.committer}
    changed = True
    while changed:
        changed = False
        for g in plan.groups.values():
            if g.name not in late and any(e.source in late for e in g.inputs):
                late.add(g.name)
                changed = True
    return late


def _leaves(topology: Any) -> list[Node]:
    """The graph's ends: every node no other node has for a parent, reached from the spouts."""
    # Children are not linked; every node the user made is reachable down from a spout only
    # through what was built on it, which the stream objects hold: find them from the registry.
    everything = ancestors(topology.nodes())
    has_child = {p.id for n in everything for p in n.parents}
    return [n for n in everything if n.id not in has_child]


def _topology_class(name: str, definition: Any) -> type[Topology]:
    namespace = {"config": dict(definition.config), "_abstract": True}
    cls = type(name, (Topology,), namespace)
    cls._definition = definition
    return cls
