"""What the hot path reads and writes of a tuple, in Python.

Built, the emitters, a bolt's acks and the wire's encoder and reader
(squall/worker/executors/emit.py and acks.py, squall/worker/wire/codec.py and
reader.py) read and fill a Tuple's C fields through tuple.pxd's inline helpers.
In the interpreter they import these, of the same names, which read the Tuple's
``id``, ``anchors`` and ``ackval`` as any code does: those of the interpreter's
Tuple (plain slots) and, where a module runs from its edited source beside a
built Tuple, those of the built one (properties over its C fields).  Any object
with the Tuple's ``anchors`` and ``ackval`` (a feature's own tuple) is read the
same way.  Never compiled, so always importable.
"""

from __future__ import annotations

from typing import Any

from squall.topology.tuple import Tuple


def one_tree(t: Any) -> bool:
    """Anchored in exactly one tree."""
    am = t.anchors
    return am is not None and len(am) == 1


def root_of(t: Any) -> int:
    """The root of a tuple :func:`one_tree`."""
    for root in t.anchors:
        return root
    raise ValueError("a tuple in no tree")


def edge_of(t: Any) -> int:
    """Its edge in the tree of a tuple :func:`one_tree`."""
    for edge in t.anchors.values():
        return edge
    raise ValueError("a tuple in no tree")


def roots_of(t: Any) -> Any:
    return t.anchors


def ack_of(t: Any) -> int:
    return t.ackval


def add_ack(t: Any, edge: int) -> None:
    """XOR the edge of a child anchored to ``t`` into its ack value."""
    t.ackval ^= edge


def set_anchors(t: Any, anchors: Any) -> None:
    t.anchors = anchors


# A tuple without anchors: the class itself, called as (id, component, stream, task, values).
bare_tuple = Tuple


def tree_tuple(component: str, stream: str, task: int, values: Any, root: int, edge: int) -> Tuple:
    """A tuple of one tree: its id is its edge."""
    return Tuple(edge, component, stream, task, values, {root: edge})


def is_values_record(record: Any) -> bool:
    """Only built are records allocated and filled as tuples (``filled_record``)."""
    return False


def filled_record(record: type, values: Any, n: int) -> Any:
    return tuple.__new__(record, values)


# -- what the wire's encoder reads of a tuple (squall/worker/wire/codec.py)


def row_in_fields(t: Any) -> bool:
    """Never here: the encoder writes the objects ``id`` and ``anchors`` give as they are."""
    return False


def id_is_edge(t: Any) -> bool:
    return False  # (asked only of a tuple row_in_fields)


def id_of(t: Any) -> Any:
    return t.id
