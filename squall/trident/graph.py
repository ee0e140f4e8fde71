"""A Trident topology as its user writes it: a graph of nodes, each an operation on the
stream of batches before it, with the fields it outputs -- plain data, checked as each call
is made; squall.trident.planner turns it into bolts.

Node kinds (``Node.kind``) and what their output fields are (Storm's rules):

* ``spout``: the spout's fields (a DRPC stream's: ``args``);
* ``each``: the input's fields then the function's; ``filter``: the input's;
* ``map`` / ``flat_map``: the function's, or the input's when it names none;
* ``project``: the fields named;
* ``partition_aggregate``: the aggregator's (``grouped``: the group fields, then its);
* ``state_query``: the input's then the query's;
* ``partition_persist``: the updater's (its new-values stream);
* ``partition``: a repartition (``grouping``: shuffle, fields, global, all, ...), the input's fields;
* ``merge``: the first stream's fields (all must have as many);
* ``join``: the join fields, then each stream's other fields (``out_fields`` renames them).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from squall.errors import TopologyValidationError

_ids = itertools.count(1)


def _fail(message: str) -> None:
    raise TopologyValidationError(message)


def as_fields(value: Any, where: str) -> list[str]:
    """A list of field names from ``"word"``, ``["word", "n"]`` or a tuple of them."""
    names = [value] if isinstance(value, str) else list(value) if isinstance(value, (list, tuple)) else None
    if names is None or not all(isinstance(n, str) and n for n in names):
        _fail(f"{where}: fields are a list of names, got {value!r}")
    if len(set(names)) != len(names):
        _fail(f"{where}: a field is named twice in {names}")
    return names


@dataclass(eq=False)
class Node:
    """One step of the graph."""

    kind: str
    fields: list[str]  # what it outputs
    parents: list[Node] = field(default_factory=list)
    op: Any = None  # the operation (Function, Filter, aggregator, ...), or the spout
    in_fields: list[str] = field(default_factory=list)  # the input fields the operation sees
    out_fields: list[str] = field(default_factory=list)  # the operation's own output fields
    grouping: tuple[str, list[str]] | None = None  # a partition's: (kind, fields)
    group_fields: list[str] | None = None  # a grouped aggregation's or query's
    state: StateSpec | None = None  # a state_query's or partition_persist's state
    options: dict[str, Any] = field(default_factory=dict)
    parallelism: int | None = None
    name: str | None = None
    id: int = field(default_factory=lambda: next(_ids))

    def __repr__(self) -> str:
        return f"Node({self.id} {self.kind} {self.fields})"


@dataclass(eq=False)
class AggSpec:
    """One aggregator of an ``aggregate`` node: what it reads, and the fields it outputs."""

    in_fields: list[str]
    agg: Any
    out_fields: list[str]


@dataclass(eq=False)
class StateSpec:
    """A state a topology keeps (``persistent_aggregate``, ``partition_persist``) or only
    reads (``new_static_state``): its factory, and the node that updates it, if any."""

    factory: Any
    updater: Node | None = None
    id: int = field(default_factory=lambda: next(_ids))


def check_inputs(node_fields: Sequence[str], wanted: Sequence[str], where: str) -> None:
    missing = [f for f in wanted if f not in node_fields]
    if missing:
        _fail(f"{where}: no field {missing[0]!r} in the stream (its fields: {list(node_fields)})")


def check_new(node_fields: Sequence[str], added: Sequence[str], where: str) -> None:
    clash = [f for f in added if f in node_fields]
    if clash:
        _fail(f"{where}: output field {clash[0]!r} is already in the stream (its fields: "
              f"{list(node_fields)}); name it otherwise or project it away first")


def ancestors(nodes: Sequence[Node]) -> list[Node]:
    """Every node reachable upwards from ``nodes``, each once, parents before children."""
    seen: dict[int, Node] = {}
    order: list[Node] = []

    def visit(node: Node) -> None:
        if node.id in seen:
            return
        seen[node.id] = node
        for parent in node.parents:
            visit(parent)
        order.append(node)

    for node in nodes:
        visit(node)
    return order
