"""Spouts and sinks the Streams API tests share."""

from __future__ import annotations

import threading
from typing import Any

from squall import Bolt, Spout
from squall.testing import complete_topology


class Numbers(Spout):
    outputs = ["n"]


class Pairs(Spout):
    outputs = ["k", "v"]


class Words(Spout):
    outputs = ["word"]


class Lines(Spout):
    outputs = ["line"]


class Collect(Bolt):
    """A sink: a PairStream's tuples are key, value."""

    outputs = ["key", "value"]

    def process(self, tup: Any) -> None:
        self.emit([tup.values.key, tup.values.value])


class CollectValue(Bolt):
    outputs = ["value"]

    def process(self, tup: Any) -> None:
        self.emit([tup.values.value])


def run(topology: Any, mocks: dict[str, Any], **kwargs: Any) -> Any:
    """complete_topology with a one-second message timeout: values a window still holds at
    the end fail then (as Storm's do), instead of after the default 30 s."""
    return complete_topology(topology, mock_sources=mocks, conf={"topology.message.timeout.secs": 1},
                             **kwargs)


def inputs_of(topology: Any) -> list[tuple[str, int, list[tuple[str, str, tuple[str, ...]]]]]:
    """Each generated or sink bolt: name, parallelism and its data inputs (component,
    grouping, fields), Squall's own streams left out."""
    out = []
    for c in topology.definition().components.values():
        if c.kind != "bolt":
            continue
        data = [(i.component, i.grouping.type, tuple(i.grouping.fields)) for i in c.inputs
                if not i.stream.startswith(("__", "$"))]
        out.append((c.name, c.par, data))
    return out


class Recorded:
    """What sinks in the test's own process saw (local mode: one process)."""

    lock = threading.Lock()
    values: dict[str, list[Any]] = {}

    @classmethod
    def add(cls, name: str, value: Any) -> None:
        with cls.lock:
            cls.values.setdefault(name, []).append(value)

    @classmethod
    def get(cls, name: str) -> list[Any]:
        with cls.lock:
            return list(cls.values.get(name, []))

    @classmethod
    def clear(cls) -> None:
        with cls.lock:
            cls.values.clear()


class Record(Bolt):
    """A sink recording ``[key, value]`` or ``[value]`` under its component name."""

    outputs = None

    def process(self, tup: Any) -> None:
        Recorded.add(self.context.component_id, list(tup.values))


class ReplayingSpout(Spout):
    """A reliable spout over a fixed list (class attribute ``items``, each a list of
    values), replaying what fails; ``acked`` and ``failed`` count per class."""

    outputs = ["word"]
    items: list[list[Any]] = []

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.todo = list(range(len(self.items)))
        self.todo.reverse()

    def next_tuple(self) -> None:
        if self.todo:
            i = self.todo.pop()
            self.emit(list(self.items[i]), tup_id=i)

    def ack(self, tup_id: Any) -> None:
        Recorded.add(f"{type(self).__name__}.acked", tup_id)

    def fail(self, tup_id: Any) -> None:
        Recorded.add(f"{type(self).__name__}.failed", tup_id)
        self.todo.append(tup_id)
