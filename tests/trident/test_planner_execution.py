"""The pure cores under Trident's compiler: the planner's groups (operations between two
repartitions fused, a spout's group its own, committers, a query with its state's partitions)
and one group's batch run by plain calls, with no worker at all."""

from __future__ import annotations

from typing import Any

import pytest

from squall.errors import TopologyValidationError
from squall.trident import Count, Function, MemoryMapState, TridentTopology
from squall.trident.execution import BatchRun, Program
from squall.trident.operations import Filter, Sum
from squall.trident.planner import plan
from squall.trident.testing import FeederBatchSpout, Split


class Upper(Function):
    def execute(self, tup: Any, collector: Any) -> None:
        collector.emit([tup[0].upper()])


class Short(Filter):
    def is_keep(self, tup: Any) -> bool:
        return len(tup[0]) <= 3


def test_operations_between_repartitions_share_a_bolt() -> None:
    t = TridentTopology()
    words = (t.new_stream("s", FeederBatchSpout(["sentence"])).parallelism_hint(2)
             .each(["sentence"], Split(), ["word"]).each(["word"], Short()).each(["word"], Upper(), ["up"]))
    counts = words.group_by(["up"]).persistent_aggregate(MemoryMapState.factory(), Count(), ["n"])
    counts.parallelism_hint(3)
    p = plan(t.spouts, [counts.node])
    (spout,) = p.spouts
    groups = {name: g for name, g in p.groups.items() if g.spout is None}
    # each, filter, each and the count's partial aggregation in one bolt; the state in another
    first, second = sorted(groups.values(), key=lambda g: g.name)
    assert [n.kind for n in first.nodes] == ["each", "filter", "each", "aggregate"]
    assert first.parallelism == 2 and [e.grouping[0] for e in first.inputs] == ["identity"]
    assert [n.kind for n in second.nodes] == ["partition_persist"] and second.committer
    assert second.parallelism == 3 and second.inputs[0].grouping == ("fields", ["up"])
    assert not first.committer and spout.name == "spout-s"


def test_a_query_runs_with_its_states_partitions_and_refuses_another_count() -> None:
    from squall.trident import MapGet

    t = TridentTopology()
    counts = (t.new_stream("s", FeederBatchSpout(["word"])).group_by(["word"])
              .persistent_aggregate(MemoryMapState.factory(), Count(), ["n"]).parallelism_hint(4))
    query = t.new_stream("q", FeederBatchSpout(["word"])).group_by(["word"]).state_query(
        counts, ["word"], MapGet(), ["n"])
    p = plan(t.spouts, [counts.node, query.node])
    (query_group,) = [g for g in p.groups.values() if any(n.kind == "state_query" for n in g.nodes)]
    assert query_group.parallelism == 4
    # and its tasks run beside the state's, where a state in memory or on a node is one table
    (state_group,) = [g for g in p.groups.values() if g.committer]
    assert query_group.colocate_with == state_group.name
    compiled = t.build("counts").definition().components
    assert compiled[query_group.name].config == {"topology.colocate.with": state_group.name}
    query.parallelism_hint(2)
    with pytest.raises(TopologyValidationError, match="a query runs in the state's partitions"):
        plan(t.spouts, [counts.node, query.node])


def run_group(nodes: list[Any], rows: list[list[Any]], exits: set[int]) -> list[tuple[int, list[Any]]]:
    sent: list[tuple[int, list[Any]]] = []
    program = Program(nodes, {n: True for n in exits}, {})
    batch = BatchRun(program, 1, lambda node, values: sent.append((node.id, values)))
    for row in rows:
        batch.receive(nodes[0], row)
    batch.finish()
    return sent


def test_a_batch_runs_through_a_group_by_plain_calls() -> None:
    t = TridentTopology()
    stream = (t.new_stream("s", FeederBatchSpout(["sentence"])).each(["sentence"], Split(), ["word"])
              .each(["word"], Short()).each(["word"], Upper(), ["up"]))
    total = stream.aggregate(["up"], Count(), ["n"])  # partial within the group, then global
    p = plan(t.spouts, [total.node])
    first = next(g for g in p.groups.values() if g.spout is None and g.nodes[0].kind == "each")
    partial = first.nodes[-1]
    sent = run_group(first.nodes, [["the cow jumped"], ["a tall cat"]], {partial.id})
    assert sent == [(partial.id, [4])]  # the, cow, a, cat: 4 words of 3 letters or fewer
    # an empty batch: the partial phase says nothing (the final phase answers zero())
    assert run_group(first.nodes, [], {partial.id}) == []
    final = next(g for g in p.groups.values() if g.nodes[0].options.get("phase") == "final").nodes[0]
    sums = run_group([final], [[2], [5]], {final.id})
    assert sums == [(final.id, [7])]
    assert run_group([final], [], {final.id}) == [(final.id, [0])]


def test_a_grouped_sum_folds_each_tuple_as_it_comes() -> None:
    t = TridentTopology()
    s = t.new_stream("s", FeederBatchSpout(["k", "v"]))
    node = s.group_by(["k"]).partition_aggregate(["v"], Sum(), ["total"]).node
    sent = run_group([node], [["a", 1], ["b", 2], ["a", 3]], {node.id})
    assert sorted(v for _n, v in sent) == [["a", 4], ["b", 2]]
