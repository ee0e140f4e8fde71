"""The tuple a bolt receives, and the per-stream value records."""

from __future__ import annotations

from collections import namedtuple
from typing import Any

TICK_STREAM = "__tick"
SYSTEM_COMPONENT = "__system"
SYSTEM_TASK = -1


class Tuple:
    """One tuple as a bolt sees it.

    ``values`` is a record of the source stream's fields: ``tup.values[0]``,
    ``tup.values.word`` and ``tup["word"]`` all read the same value.
    ``task`` is the task id of the emitter, as in Storm and pystorm.

    ``anchors`` maps each spout-tuple root id of the trees this tuple belongs
    to onto its edge id (``None`` when untracked); ``ackval`` accumulates the
    edge ids of the tuples anchored to it, sent to the acker when it is acked.
    """

    __slots__ = ("ackval", "anchors", "component", "id", "stream", "task", "values")

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


PureTuple = Tuple  # the pure-Python twin, kept as the reference the typed one is tested against

try:  # the same class typed in C (squall/topology/typed_tuple.pyx), where it was built
    from squall.topology.typed_tuple import (
        Tuple,  # type: ignore[assignment]  # noqa: F811
        pool_records,
    )
except ImportError:
    def pool_records(record: type) -> None:
        """Without the build, records are freed as any object is."""


_record_types: dict[tuple[str, ...], type] = {}


def record_type(fields: tuple[str, ...]) -> type:
    """The shared namedtuple type for a stream with these fields.

    Field names must be identifiers; ``rename`` would silently change what a
    user asked for, so it is off and validation catches bad names earlier.
    """
    cls = _record_types.get(fields)
    if cls is None:
        cls = namedtuple("Values", fields)  # type: ignore[misc]
        pool_records(cls)  # its instances freed into the typed core's free list, where built
        _record_types[fields] = cls
    return cls
