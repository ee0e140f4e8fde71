"""StatefulWindowedBolt: a windowed bolt whose KeyValueState is checkpointed
(Storm's IStatefulWindowedBolt run by StatefulWindowedBoltExecutor).

    class Sums(StatefulWindowedBolt):
        outputs = ["sum"]
        def init_state(self, state):          # a KeyValueState, as of the last commit
            self.state = state
        def process_window(self, window):
            total = sum(t.values.n for t in window.tuples)
            self.state.put("total", self.state.get("total", 0) + total)
            self.emit([total])

It is a :class:`~squall.windowing.bolt.WindowedBolt` and a
:class:`~squall.state.bolts.StatefulBolt` at once, so a topology holding one is
rewritten like any checkpointed topology and the checkpoint wrapper runs it:
``init_state`` comes before the first tuple, and the wrapper holds the ack a
window gives a tuple on expiry until the checkpoint after it commits, as
Storm's executor does.  The window itself is not saved: tuples still in it when
a worker dies are replayed by the acker (tracked spouts), so window plus slide
must fit in ``topology.message.timeout.secs`` as for any windowed bolt.

``persist=True`` (Storm's PersistentWindowedBoltExecutor: the window saved with
each checkpoint, acks on commit, windows longer than the message timeout) is
not built yet: ``spec`` refuses it with a TopologyValidationError rather than
run a window that would silently lose tuples.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from squall.errors import TopologyValidationError
from squall.state.bolts import StatefulBolt
from squall.topology.component import ComponentSpec
from squall.windowing.bolt import WindowedBolt


class StatefulWindowedBolt(WindowedBolt, StatefulBolt):
    """Subclass, define ``init_state(state)`` and ``process_window(window)``."""

    @classmethod
    def spec(  # type: ignore[override]
        cls,
        name: str | None = None,
        inputs: Any = None,
        par: int = 1,
        tasks: int | None = None,
        config: Mapping[str, Any] | None = None,
        *,
        persist: bool = False,
        max_events_in_memory: Any = None,
        **window_args: Any,
    ) -> ComponentSpec:
        where = f"stateful windowed bolt {cls.__name__}"
        if not isinstance(persist, bool):
            msg = f"{where}: persist must be True or False, got {persist!r}"
            raise TopologyValidationError(msg)
        if max_events_in_memory is not None and (
                isinstance(max_events_in_memory, bool) or not isinstance(max_events_in_memory, int)
                or max_events_in_memory <= 0):
            msg = f"{where}: max_events_in_memory must be a positive int, got {max_events_in_memory!r}"
            raise TopologyValidationError(msg)
        if max_events_in_memory is not None and not persist:
            msg = (f"{where}: max_events_in_memory bounds a persisted window's tuples in memory; "
                   "it needs persist=True")
            raise TopologyValidationError(msg)
        if persist:
            msg = (f"{where}: persist=True (the window saved with each checkpoint) is not supported "
                   "yet; use persist=False and a window plus slide within topology.message.timeout.secs")
            raise TopologyValidationError(msg)
        return super().spec(name, inputs, par, tasks, config, **window_args)
