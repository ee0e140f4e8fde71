"""One bolt's share of a batch: the operations of a group (squall.trident.planner) run over
the tuples that reach it, by plain calls from operation to operation.  Pure: tuples come in
through :meth:`BatchRun.receive` (or the function :meth:`BatchRun.input` gives), leave the
group through the ``send(node, values)`` it is given, and the states are the objects the task
made.

Per tuple, ``each``/``filter``/``map``/``project``/``merge`` pass a tuple on at once, through
functions made for the batch with everything they need bound; an aggregation of combiners
folds each tuple as it comes; the other nodes that need the whole batch (aggregations, state
queries and updates, joins, a DRPC answer) keep their tuples and run in
:meth:`BatchRun.finish`, parents before children, so what one emits there reaches the next
before it finishes.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

from squall.trident.graph import AggSpec, Node
from squall.trident.operations import Aggregator, CombinerAggregator, Count, ReducerAggregator, TridentTuple

Send = Callable[[Node, list[Any]], None]
BATCH_KINDS = ("aggregate", "state_query", "partition_persist", "join", "collect")


def index_of(fields: Sequence[str]) -> dict[str, int]:
    return {f: i for i, f in enumerate(fields)}


class Collector:
    """What an operation emits with, into a list; ``report_error`` goes to the task's reporter."""

    __slots__ = ("emitted", "reporter")

    def __init__(self, reporter: Callable[[BaseException], None] | None = None) -> None:
        self.emitted: list[list[Any]] = []
        self.reporter = reporter

    def emit(self, values: Any) -> None:
        self.emitted.append(list(values.values if type(values) is TridentTuple else values))

    def report_error(self, exc: BaseException) -> None:
        if self.reporter is not None:
            self.reporter(exc)

    def take(self) -> list[list[Any]]:
        out, self.emitted = self.emitted, []
        return out


class Discarding(Collector):
    """A collector whose emits go nowhere (an operation whose output nobody reads)."""

    __slots__ = ()
    discards = True  # an updater may skip building what it would emit

    def emit(self, values: Any) -> None:
        return None


class Program:
    """A group's operations as one task runs them: the nodes, their children inside the
    group, where each node's tuples leave the group, and the task's states."""

    def __init__(self, nodes: Sequence[Node], exits: dict[int, bool], states: dict[int, Any],
                 reporter: Callable[[BaseException], None] | None = None, partition: int = 0) -> None:
        self.nodes = list(nodes)
        self.partition = partition  # this task's index in the group
        inside = {n.id for n in self.nodes}
        self.children: dict[int, list[Node]] = {n.id: [] for n in self.nodes}
        for n in self.nodes:
            for p in n.parents:
                if p.id in inside:
                    self.children[p.id].append(n)
        self.states = states  # node id -> the state it reads or updates
        self.reporter = reporter
        # The fields each node's input tuples have (its first parent's; a merge's are its own).
        self.in_index = {n.id: index_of(n.parents[0].fields) if n.parents else {} for n in self.nodes}
        # What each node's operation sees of its input: the positions of its fields, and the
        # names a TridentTuple of them answers to (made once, not per tuple).
        self.selection = {n.id: ([self.in_index[n.id][f] for f in n.in_fields], index_of(n.in_fields))
                          for n in self.nodes if n.kind not in ("aggregate", "merge", "collect", "join")}
        # Aggregations of combiners only, folded as their tuples come (nothing kept per tuple):
        # node id -> (key positions, per aggregator (its input positions and names, or for the
        # final phase the partial's position)).
        self.folding: dict[int, tuple[list[int], list[Any]]] = {}
        for n in self.nodes:
            if n.kind == "aggregate" and all(isinstance(s.agg, CombinerAggregator) for s in n.op):
                index = self.in_index[n.id]
                keys = [index[f] for f in n.group_fields or []]
                if n.options.get("phase") == "final":
                    per = [index[p] for p in n.options["partials"]]
                else:
                    per = [([index[f] for f in s.in_fields], index_of(s.in_fields)) for s in n.op]
                self.folding[n.id] = (keys, per)
        # Where each node's tuples go: out of the group (to send) or not, and to which child as
        # which of its parents (a join's, merge's or collect's side).
        self.routes: dict[int, tuple[bool, list[tuple[Node, int]]]] = {
            n.id: (bool(exits.get(n.id)),
                   [(c, c.parents.index(n) if c.kind in ("join", "merge", "collect") else 0)
                    for c in self.children[n.id]])
            for n in self.nodes}

    def folder(self, node: Node, table: dict[tuple[Any, ...], Any]) -> Callable[[list[Any]], None]:
        """The function that folds one tuple into ``table`` (key -> the aggregators' values) for
        a combiners-only aggregation: made once per batch, with what it needs bound."""
        keys, per = self.folding[node.id]
        specs = node.op
        final = node.options.get("phase") == "final"
        inits = []
        for spec, at in zip(specs, per, strict=True):
            agg = spec.agg
            if final:
                inits.append(lambda values, at=at: values[at])
            elif type(agg).init is Count.init:
                inits.append(lambda values: 1)  # a count's init reads nothing of the tuple
            else:
                positions, names = at
                inits.append(lambda values, init=agg.init, positions=positions, names=names:
                             init(TridentTuple([values[i] for i in positions], names)))
        combines = [s.agg.combine for s in specs]
        if len(specs) == 1 and len(keys) == 1 and not final and type(specs[0].agg) is Count:
            (k,) = keys

            def count_one(values: list[Any]) -> None:  # the word count's: no call per tuple
                key = (values[k],)
                old = table.get(key)
                if old is None:
                    table[key] = [1]
                else:
                    old[0] += 1  # the table's own list: counted in place

            return count_one
        if len(specs) == 1:
            init, combine = inits[0], combines[0]

            def fold_one(values: list[Any]) -> None:
                key = tuple([values[i] for i in keys])
                value = init(values)
                old = table.get(key)
                table[key] = [value] if old is None else [combine(old[0], value)]

            return fold_one

        def fold(values: list[Any]) -> None:
            key = tuple([values[i] for i in keys])
            new = [init(values) for init in inits]
            old = table.get(key)
            table[key] = new if old is None else [c(a, b) for c, a, b in zip(combines, old, new, strict=True)]

        return fold


class BatchRun:
    """One batch (attempt) through one task's group."""

    def __init__(self, program: Program, batch_id: Any, send: Send) -> None:
        self.p = program
        self.batch_id = batch_id
        self.send = send
        self.kept: dict[int, list[Any]] = {n.id: [] for n in program.nodes if n.kind in BATCH_KINDS}
        self.folded: dict[int, dict[tuple[Any, ...], list[Any]]] = {n: {} for n in program.folding}
        self.folders = {n: program.folder(node, self.folded[n]) for node in program.nodes
                        if (n := node.id) in program.folding}
        self.collector = Collector(program.reporter)
        # Each node's input and output as functions made for this batch, children first: a
        # tuple goes from operation to operation by direct calls, with nothing looked up.
        self.pushes: dict[int, Callable[[list[Any]], None]] = {}
        self.outs: dict[int, Callable[[list[Any]], None]] = {}
        for node in reversed(program.nodes):
            out = self._output_of(node)
            self.outs[node.id] = out
            self.pushes[node.id] = self._input_of(node, out)

    # -- tuples in ------------------------------------------------------------------------------

    def receive(self, node: Node, values: list[Any], side: int = 0) -> None:
        """A tuple into ``node`` (of this group) from outside it; ``side``: which parent it
        came from (a join's or merge's)."""
        self._into(node, values, side)

    def input(self, node: Node, side: int = 0) -> Callable[[list[Any]], None]:
        """What takes ``node``'s tuples from outside the group, one call per tuple."""
        if node.kind in ("join", "collect"):
            kept = self.kept[node.id]
            return lambda values: kept.append((side, values))
        return self.pushes[node.id]

    def _into(self, node: Node, values: list[Any], side: int) -> None:
        if node.kind in ("join", "collect"):
            self.kept[node.id].append((side, values))
        else:
            self.pushes[node.id](values)

    def _selected(self, node: Node, values: list[Any]) -> TridentTuple:
        positions, names = self.p.selection[node.id]
        return TridentTuple([values[i] for i in positions], names)

    def _out(self, node: Node, values: list[Any]) -> None:
        self.outs[node.id](values)

    def _output_of(self, node: Node) -> Callable[[list[Any]], None]:
        """Where ``node``'s tuples go: out of the group, and into each child (its pushes made)."""
        leaves, children = self.p.routes[node.id]
        targets: list[Callable[[list[Any]], None]] = []
        if leaves:
            send = self.send
            targets.append(lambda values: send(node, values))
        for child, side in children:
            if child.kind in ("join", "collect"):
                kept = self.kept[child.id]
                targets.append(lambda values, kept=kept, side=side: kept.append((side, values)))
            else:
                targets.append(self.pushes[child.id])
        if len(targets) == 1:
            return targets[0]

        def fan_out(values: list[Any]) -> None:
            for target in targets:
                target(values)

        return fan_out

    def _input_of(self, node: Node, out: Callable[[list[Any]], None]) -> Callable[[list[Any]], None]:
        """What ``node`` does with a tuple that comes in (a batch node keeps it for finish())."""
        kind = node.kind
        folder = self.folders.get(node.id)
        if folder is not None:
            return folder
        if kind in BATCH_KINDS:
            return self.kept[node.id].append
        if kind == "merge":
            return out
        positions, names = self.p.selection[node.id]
        collector, op = self.collector, node.op
        if kind == "filter":
            is_keep = op.is_keep

            def keep(values: list[Any]) -> None:
                if is_keep(TridentTuple([values[i] for i in positions], names)):
                    out(values)

            return keep
        if kind == "each":
            execute, take = op.execute, collector.take

            def each(values: list[Any]) -> None:
                execute(TridentTuple([values[i] for i in positions], names), collector)
                for emitted in take():
                    out([*values, *emitted])

            return each
        if kind == "map":
            execute, take = op.execute, collector.take

            def mapped(values: list[Any]) -> None:
                execute(TridentTuple([values[i] for i in positions], names), collector)
                for emitted in take():
                    out(emitted)

            return mapped
        if kind == "project":
            return lambda values: out([values[i] for i in positions])
        msg = f"a {kind} node cannot take tuples"
        raise ValueError(msg)

    # -- the batch's end ------------------------------------------------------------------------

    def finish(self) -> None:
        for node in self.p.nodes:
            if node.kind == "aggregate":
                self._aggregate(node)
            elif node.kind == "state_query":
                self._query(node)
            elif node.kind == "partition_persist":
                self._persist(node)
            elif node.kind == "join":
                self._join(node)
            elif node.kind == "collect":  # the batch's tuples by side, to the operation (a DRPC answer)
                node.op.complete(self.batch_id, self.kept[node.id])

    def _aggregate(self, node: Node) -> None:
        if node.id in self.folded:  # combiners only: every partial and final phase is one
            self._finish_folded(node)
            return
        specs: list[AggSpec] = node.op
        group = node.group_fields or []
        index = self.p.in_index[node.id]
        key_at = [index[f] for f in group]
        groups: dict[tuple[Any, ...], list[list[Any]]] = {}
        for values in self.kept[node.id]:
            groups.setdefault(tuple(values[i] for i in key_at), []).append(values)
        if not group and not groups and self._answers_empty(node):
            groups[()] = []  # an ungrouped aggregation answers for an empty batch too
        for key, rows in groups.items():
            per_agg = [self._run_agg(spec, index, rows) for spec in specs]
            for combo in itertools.product(*per_agg):
                self._out(node, [*key, *itertools.chain.from_iterable(combo)])

    def _finish_folded(self, node: Node) -> None:
        table = self.folded[node.id]
        if not table and not node.group_fields:
            # Nothing came: an ungrouped aggregation answers zero() (from one partition if global);
            # a partial one says nothing (the final phase answers).
            if node.options.get("phase") != "partial" and self._answers_empty(node):
                self._out(node, [s.agg.zero() for s in node.op])
            return
        for key, folded in table.items():
            self._out(node, [*key, *folded])

    def _answers_empty(self, node: Node) -> bool:
        """Does this task answer for a batch none of whose tuples it got?  Every partition of
        a partition aggregate does; of a global aggregation only the one the batch would have
        gone to (Storm's SingleEmitAggregator): partition 0."""
        return node.options.get("single_emit") != "global" or self.p.partition == 0

    def _run_agg(self, spec: AggSpec, index: dict[str, int], rows: list[list[Any]]) -> list[list[Any]]:
        """One aggregator of a chain that mixes kinds (a chain of combiners only is folded)."""
        agg = spec.agg
        fields = spec.in_fields
        names = index_of(fields)
        tuples = [TridentTuple([r[index[f]] for f in fields], names) for r in rows]
        if isinstance(agg, CombinerAggregator):
            value = agg.init(tuples[0]) if tuples else agg.zero()
            for tup in tuples[1:]:
                value = agg.combine(value, agg.init(tup))
            return [[value]]
        if isinstance(agg, ReducerAggregator):
            value = agg.init()
            for tup in tuples:
                value = agg.reduce(value, tup)
            return [[value]]
        assert isinstance(agg, Aggregator)
        collector = Collector(self.p.reporter)
        state = agg.init(self.batch_id, collector)
        for tup in tuples:
            agg.aggregate(state, tup, collector)
        agg.complete(state, collector)
        return collector.take()

    def _query(self, node: Node) -> None:
        rows = self.kept[node.id]
        if not rows:
            return
        tuples = [self._selected(node, values) for values in rows]
        results = node.op.batch_retrieve(self.p.states[node.id], tuples)
        for values, tup, result in zip(rows, tuples, results, strict=True):
            node.op.execute(tup, result, self.collector)
            for emitted in self.collector.take():
                self._out(node, [*values, *emitted])

    def _persist(self, node: Node) -> None:
        state = self.p.states[node.id]
        kept = self.kept[node.id]
        if not kept:
            return  # as Storm: a batch with nothing for this partition leaves its state alone
        positions, names = self.p.selection[node.id]
        tuples = [TridentTuple([values[i] for i in positions], names) for values in kept]
        txid = getattr(self.batch_id, "txid", self.batch_id)
        # Nobody reads its new values (no new_values_stream used): they are not gathered.
        collector = self.collector if self.p.routes[node.id] != (False, []) else Discarding(self.p.reporter)
        state.begin_commit(txid)
        node.op.update_state(state, tuples, collector)
        state.commit(txid)
        for emitted in collector.take():
            self._out(node, emitted)

    def _join(self, node: Node) -> None:
        left_keys, right_keys = node.options["keys"]
        left_parent, right_parent = node.parents
        li, ri = index_of(left_parent.fields), index_of(right_parent.fields)
        left_rest = [f for f in left_parent.fields if f not in left_keys]
        right_rest = [f for f in right_parent.fields if f not in right_keys]
        rights: dict[tuple[Any, ...], list[list[Any]]] = {}
        lefts = []
        for side, values in self.kept[node.id]:
            if side == 0:
                lefts.append(values)
            else:
                rights.setdefault(tuple(values[ri[f]] for f in right_keys), []).append(values)
        for values in lefts:
            key = tuple(values[li[f]] for f in left_keys)
            for other in rights.get(key, ()):
                self._out(node, [*key, *(values[li[f]] for f in left_rest),
                                 *(other[ri[f]] for f in right_rest)])
