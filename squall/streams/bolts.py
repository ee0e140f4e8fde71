"""The shells that run a stream's operations as bolts (Storm's three processor bolts):

- :class:`ProcessorBolt`: plain; an input is acked once its values passed the chain;
- :class:`HoldingProcessorBolt`: plain, downstream of a window with a batch
  operation: inputs are held until each upstream window task has ended a
  window, then the batch results are emitted anchored to them and they are acked;
- :class:`WindowedProcessorBolt`: a :class:`~squall.windowing.WindowedBolt`
  whose window runs the chain, then ends it;
- :class:`StatefulProcessorBolt`: a :class:`~squall.state.StatefulBolt` with one
  ``update_state_by_key``, its state queries and what follows them.

A window's end travels on, after the window's values, as a marker on the
``__punctuation`` stream to every task of the next bolt.
"""

from __future__ import annotations

from typing import Any

from squall.errors import FailedException
from squall.state.bolts import StatefulBolt
from squall.streams.chain import SCALARS, BoltPlan, Chain, Exit, MarkerGate, to_wire
from squall.topology.component import PUNCTUATION_STREAM, Bolt
from squall.topology.loading import from_value
from squall.windowing.bolt import WindowedBolt

PLAN_OPTION = "streams"


class _Runs:
    """What every processor bolt shares: its chain, bound to the task's emitter."""

    plan: BoltPlan
    chain: Chain
    anchors: Any = None  # explicit anchors for what a window's end emits (None: the input)
    ts: Any = None  # the timestamp the values being pushed carry on

    def _bind(self: Any, context: Any) -> None:
        self.plan = plan = from_value(self.options[PLAN_OPTION]["plan"])
        self.chain = Chain(plan, self._exit)
        self.dispatch = self.chain.dispatch
        self.ts_index = plan.ts_index
        tasks = [t for comp in plan.markers_in for t in context.component_tasks[comp]]
        self.gate = MarkerGate(tasks) if tasks else None
        self.marker_seq = 0

    def _exit(self: Any, exit: Exit) -> Any:  # noqa: A002 - the plan's word
        stream = exit.stream
        emit = self.emit
        runner = self
        if exit.ts:
            if exit.pair:
                return lambda kv: emit([to_wire(kv[0]), to_wire(kv[1]), runner.ts], runner.anchors, stream)
            return lambda v: emit([to_wire(v), runner.ts], runner.anchors, stream)
        scalars = SCALARS
        # The common exits without a call to to_wire for a scalar (a word, a count).
        if exit.pair:
            def emit_pair(kv: Any) -> None:
                k, v = kv
                emit([k if type(k) in scalars else to_wire(k), v if type(v) in scalars else to_wire(v)],
                     runner.anchors, stream)

            return emit_pair
        return lambda v: emit([v if type(v) in scalars else to_wire(v)], runner.anchors, stream)

    def _stamp(self: Any, tup: Any) -> None:
        i = self.ts_index.get((tup.component, tup.stream))
        self.ts = None if i is None else tup.values[i]

    def _send_marker(self: Any) -> None:
        if self.plan.markers_out:
            self.marker_seq += 1
            self.emit([self.marker_seq], [], PUNCTUATION_STREAM)


class ProcessorBolt(_Runs, Bolt):
    """Plain: the engine acks each input after ``process``, anchors to it, fails it on error."""

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self._bind(context)
        if self.ts_index:
            self.process = self._process_stamped  # type: ignore[method-assign]
        elif len(self.dispatch) == 1 and self.gate is None:
            # One input and no window ends to count: every tuple is that input's, so
            # the executor calls its entry itself (no lookup, no frame of ours).
            self.process = next(iter(self.dispatch.values()))  # type: ignore[method-assign]

    def process(self, tup: Any) -> None:
        enter = self.dispatch.get((tup.component, tup.stream))
        if enter is not None:
            enter(tup)
        elif tup.stream == PUNCTUATION_STREAM and self.gate.arrive(tup.task):  # type: ignore[union-attr]
            self._send_marker()

    def _process_stamped(self, tup: Any) -> None:
        self._stamp(tup)
        ProcessorBolt.process(self, tup)


class HoldingProcessorBolt(_Runs, Bolt):
    """Downstream of a window, with a batch operation: inputs wait for the window's end."""

    auto_ack = False
    auto_fail = False

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self._bind(context)
        self.held: list[Any] = []
        self.latest_ts: Any = None

    def process(self, tup: Any) -> None:
        if tup.stream == PUNCTUATION_STREAM and (tup.component, tup.stream) not in self.dispatch:
            self.ack(tup)
            if self.gate is not None and self.gate.arrive(tup.task):
                self._end_window()
            return
        self._stamp(tup)
        if self.ts is not None:
            self.latest_ts = self.ts
        try:
            self.dispatch[(tup.component, tup.stream)](tup)
        except FailedException:
            self.fail(tup)
            return
        except Exception as e:  # noqa: BLE001 - a user function's error: its input replays
            self.fail(tup)
            self.report_error(e)
            return
        self._keep(tup)

    def _keep(self, tup: Any) -> None:
        if self.plan.hold:
            self.held.append(tup)
        else:
            self.ack(tup)

    def _end_window(self) -> None:
        held, self.held = self.held, []
        self.anchors, self.ts = held, self.latest_ts
        try:
            self.chain.end()
        except Exception as e:  # noqa: BLE001 - its inputs replay, the window is gone
            self.chain.reset()
            for tup in held:
                self.fail(tup)
            if not isinstance(e, FailedException):
                self.report_error(e)
        else:
            for tup in held:
                self.ack(tup)
        finally:
            self.anchors = None
        self._send_marker()


class StatefulProcessorBolt(HoldingProcessorBolt, StatefulBolt):
    """``update_state_by_key``'s bolt: its state is the task's checkpointed KeyValueState."""

    def init_state(self, state: Any) -> None:
        for op in self.plan.ops.values():
            if getattr(op, "name", None) == "update_state_by_key":
                op.state = state


class WindowedProcessorBolt(_Runs, WindowedBolt):
    """Each evaluation runs every value of the window through the chain, then ends it."""

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self._bind(context)

    def process_window(self, window: Any) -> None:
        self.ts = window.end
        dispatch = self.dispatch
        try:
            for tup in window.tuples:
                dispatch[(tup.component, tup.stream)](tup)
            self.chain.end()
        except BaseException:
            self.chain.reset()
            raise
        self._send_marker()

    def _run(self, acts: list[Any]) -> None:
        super()._run(acts)
        for act in acts:
            if act.window is None:  # an empty window ends too (processing time: each evaluation)
                self._send_marker()
