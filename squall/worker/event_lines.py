"""What the event logger decides, apart from threads and files: which emitted tuples are
sampled, and the line each one becomes in the worker's ``events.log``.

One line per sampled tuple, fields separated by commas as in Storm's event log (its
``Timestamp, Component name, Component task-id, MessageId (in case of anchoring), List
of emitted values``), with the stream added before the message id::

    2026-12-07T22:10:01.123Z,split,3,default,,['the', 'cow']
    2026-12-07T22:10:01.125Z,sentences,1,default,'s-42',['the cow jumped']

The message id is a spout's own (what it emitted with), empty for a bolt's tuples and
an unreliable spout's, as in Storm.  Values are rendered by :mod:`reprlib` (long strings
and containers cut short, a ``__repr__`` that raises rendered as the object's type), a
line never holds a newline and never passes :data:`MAX_LINE_CHARS`.
"""

from __future__ import annotations

import random
import reprlib
import time
from collections.abc import Callable
from typing import Any

MAX_LINE_CHARS = 4096

_REPR = reprlib.Repr()
_REPR.maxstring = 400
_REPR.maxother = 200
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 32
_REPR.maxlevel = 4


def render(value: Any) -> str:
    """``value`` as an event line shows it: short, on one line, whatever its ``__repr__`` does."""
    try:
        text = _REPR.repr(value)
    except Exception:  # noqa: BLE001 - a user's __repr__ (reprlib catches most; not all)
        text = f"<{type(value).__name__}>"
    return text.replace("\r", "\\r").replace("\n", "\\n")


def timestamp(wall: float) -> str:
    """Wall seconds -> ``2026-12-07T22:10:01.123Z``."""
    ms = int(wall * 1000) % 1000
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(wall)) + f".{ms:03d}Z"


def event_line(wall: float, component: str, task: int, stream: str, message_id: Any, values: Any) -> str:
    """One sampled tuple's line, newline included."""
    mid = "" if message_id is None else render(message_id)
    line = f"{timestamp(wall)},{component},{task},{stream},{mid},{render(list(values))}"
    line = line.replace("\n", "\\n")  # (a component or stream id with one)
    if len(line) > MAX_LINE_CHARS:
        line = line[:MAX_LINE_CHARS - 3] + "..."
    return line + "\n"


Sink = Callable[[str, int, str, Any, Any], None]  # (component, task, stream, message id, values)


class TaskSampler:
    """One task's sampling: called by its emitter with every tuple it emits (only while the
    task's component is sampled: otherwise the emitter holds None and calls nothing), passes
    ``pct`` percent of them to ``sink``.  ``rand`` gives floats in [0, 1): a seeded one makes
    the choice repeatable in tests."""

    __slots__ = ("component", "pct", "rand", "sink", "task")

    def __init__(self, component: str, task: int, pct: float, sink: Sink,
                 rand: Callable[[], float] | None = None) -> None:
        self.component = component
        self.task = task
        self.pct = pct
        self.sink = sink
        self.rand = rand if rand is not None else random.Random().random

    def __call__(self, stream: str, message_id: Any, values: Any) -> None:
        if self.pct < 100.0 and self.rand() * 100.0 >= self.pct:
            return
        self.sink(self.component, self.task, stream, message_id, values)
