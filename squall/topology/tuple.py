"""The tuple a bolt receives, and the per-stream value records.

One source for both runs: the interpreter runs this file as it is, and
``python -m squall.compiled build`` compiles it with the C declarations of
``tuple.pxd`` (Cython's pure-Python mode).  Every tuple the engine moves is
then the typed Tuple, and what it saves is the Python objects acking made per
tuple.  A tuple in one tree (nearly all of them) keeps its root and edge id as
two C integers, not a ``{root: edge}`` dict and two ints; its id, being that
edge, is made into an int only if someone reads it; ``ackval`` is a C integer
the emitters XOR into.  Tuples come from a free list, so a bolt's steady state
allocates none.  ``anchors`` still reads as the dict (built on demand) for the
code that is not on the hot path, and any other map (several trees, or ids that
are not 64-bit) is kept as it is given.  In the interpreter ``id``, ``anchors``
and ``ackval`` are plain slots; built, they are properties over those C fields
(tests/topology/test_tuple.py runs both).
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import cython

TICK_STREAM = "__tick"
SYSTEM_COMPONENT = "__system"
SYSTEM_TASK = -1

if not cython.compiled:  # tuple.pxd's C helpers that only the build's own code calls

    def _c_only(*args: Any) -> Any:
        raise NotImplementedError("a C helper of tuple.pxd, called in the interpreter")

    id_of = set_id = anchors_of = reset_anchors = ackval_of = set_ackval = init_typed = _c_only
    pooled_record = pool_record_type = pooled_count = fields_as_slots = _c_only


# Not tracked by the cyclic collector, built: a Tuple holds strings, a task number, a
# values record and an anchors map of ints, and is in no cycle unless a bolt builds one by
# assigning a container holding the tuple to its own field.  Untracked, a tuple costs no
# collector bookkeeping when made or freed, nor any scan while it waits in a queue.
@cython.no_gc
@cython.freelist(1024)
@cython.cclass
class Tuple:
    """One tuple as a bolt sees it.

    ``values`` is a record of the source stream's fields: ``tup.values[0]``,
    ``tup.values.word`` and ``tup["word"]`` all read the same value.
    ``task`` is the task id of the emitter, as in Storm and pystorm.

    ``anchors`` maps each spout-tuple root id of the trees this tuple belongs
    to onto its edge id (``None`` when untracked); ``ackval`` accumulates the
    edge ids of the tuples anchored to it, sent to the acker when it is acked.
    """

    if not cython.compiled:
        __slots__ = ("ackval", "anchors", "component", "id", "stream", "task", "values")

    # Two __init__s: one testing ``cython.compiled`` would cost the interpreter that test a tuple.
    if cython.compiled:

        def __init__(self, id, component, stream, task, values, anchors=None):  # noqa: A002
            self.component = component
            self.stream = stream
            self.task = task
            self.values = values
            init_typed(self, id, anchors)  # id, anchors and ackval, in C fields (tuple.pxd)

    else:

        def __init__(
            self,
            id: Any,  # noqa: A002 - the name users know from Storm and pystorm
            component: str,
            stream: str,
            task: int,
            values: Any,
            anchors: dict[int, int] | None = None,
        ) -> None:
            self.id = id
            self.component = component
            self.stream = stream
            self.task = task
            self.values = values
            self.anchors = anchors
            self.ackval = 0

    def __getitem__(self, field: str) -> Any:
        return getattr(self.values, field)

    @property
    def is_tick(self) -> bool:
        return self.stream == TICK_STREAM

    def __repr__(self) -> str:
        vals = tuple(self.values)
        return (
            f"Tuple(id={self.id!r}, component={self.component!r}, stream={self.stream!r}, "
            f"task={self.task!r}, values={vals!r})"
        )

    if cython.compiled:  # id, anchors and ackval over the C fields of tuple.pxd

        @property
        def id(self) -> Any:
            return id_of(self)

        @id.setter
        def id(self, value: Any) -> None:
            set_id(self, value)

        @property
        def anchors(self) -> Any:
            return anchors_of(self)

        @anchors.setter
        def anchors(self, value: Any) -> None:
            reset_anchors(self, value)

        @property
        def ackval(self) -> int:
            return ackval_of(self)

        @ackval.setter
        def ackval(self, value: int) -> None:
            set_ackval(self, value)

        def __reduce__(self) -> Any:
            return (Tuple, (self.id, self.component, self.stream, self.task, self.values,
                            self.anchors), {"ackval": self.ackval})

        def __setstate__(self, state: dict[str, Any]) -> None:
            self.ackval = state["ackval"]

        def __delattr__(self, name: str) -> None:
            # Its fields are read by C code that takes them to be objects (tuple.pxd)
            raise AttributeError(f"a tuple's {name} cannot be deleted")


if cython.compiled:
    fields_as_slots()


def new_record(record: type, n: int) -> Any:
    """An empty record of ``n`` values from the free list (tuple.pxd; built only): the
    typed modules' one way to it, so that all take from the list this module fills."""
    return pooled_record(record, n)


def pool_records(record: type) -> None:
    """Free ``record``'s instances into the free list (a namedtuple class Squall made;
    anything else is refused).  In the interpreter records are freed as any object is."""
    if cython.compiled:
        pool_record_type(record)


def pooled_records() -> dict[int, int]:
    """How many dead records wait in the free list, by length (for tests)."""
    lengths = range(1, 9) if cython.compiled else range(0)  # records of 1 to 8 values
    return {n: pooled_count(n) for n in lengths if pooled_count(n)}


_record_types: dict[tuple[str, ...], type] = {}


def record_type(fields: tuple[str, ...]) -> type:
    """The shared namedtuple type for a stream with these fields.

    Field names must be identifiers; ``rename`` would silently change what a
    user asked for, so it is off and validation catches bad names earlier.
    """
    cls = _record_types.get(fields)
    if cls is None:
        cls = namedtuple("Values", fields)  # type: ignore[misc]
        pool_records(cls)  # its instances freed into the free list, where built
        _record_types[fields] = cls
    return cls
