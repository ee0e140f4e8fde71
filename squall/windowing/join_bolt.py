"""JoinBolt: Storm's windowed join of several streams by key, as a
:class:`~squall.windowing.bolt.WindowedBolt` configured by a builder chain.

    join = (JoinBolt(JoinBolt.Selector.STREAM, "users", "user_id")
            .join("orders", "user_id", "users")
            .select("user_id, name, orders:price")
            .with_tumbling_window(Count(10)))

    class Shop(Topology):
        source = Source.spec()
        joined = join.spec(inputs=[source["users"], source["orders"]])

The chain builds a :class:`~squall.windowing.join.JoinPlan` (the pure core:
checks and the join itself); ``spec()`` checks it whole and puts it in the
spec's options, where a worker's bare ``JoinBolt()`` reads it back.  Each
window is joined into rows, each row emitted anchored to its own tuples;
the window's tuples are acked on expiry, as any windowed bolt's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from squall.errors import TopologyValidationError
from squall.topology.component import DEFAULT_STREAM, ComponentSpec, Stream, StreamRef
from squall.topology.grouping import Grouping, GroupingSpec
from squall.windowing.bolt import WindowedBolt
from squall.windowing.core import Window, WindowCore
from squall.windowing.join import INNER, LEFT, JoinPlan, Selector

JOIN_OPTION = "join"


class _SpecOfInstance:
    """``spec`` of a configured JoinBolt; on the class itself, a clear refusal
    (every setting lives on the instance, so ``JoinBolt.spec(...)`` has none)."""

    def __get__(self, obj: Any, owner: type) -> Any:
        if obj is None:
            def refuse(*args: Any, **kwargs: Any) -> Any:
                msg = (f"{owner.__name__}.spec: configure an instance first, "
                       f"{owner.__name__}(...).join(...).select(...).with_tumbling_window(...)"
                       f".spec(inputs=...)")
                raise TopologyValidationError(msg)
            return refuse
        return obj._spec


class JoinBolt(WindowedBolt):
    """``JoinBolt(JoinBolt.Selector.SOURCE | STREAM, source, key_field)``, or
    ``JoinBolt(source, key_field)`` for SOURCE, then chained calls; see
    docs/windowing.md, "JoinBolt"."""

    Selector = Selector

    def __init__(self, *args: Any) -> None:
        super().__init__()
        # A worker builds a bare JoinBolt() and reads the plan from its options (_setup).
        self._plan: JoinPlan | None = None
        self._window_args: dict[str, Any] = {}
        if not args:
            return
        if isinstance(args[0], Selector):
            selector, rest = args[0], args[1:]
        else:
            selector, rest = Selector.SOURCE, args
        if len(rest) != 2:
            msg = (f"JoinBolt{args!r}: give (JoinBolt.Selector.SOURCE or STREAM, source, key_field) "
                   f"or (source, key_field)")
            raise TopologyValidationError(msg)
        self._plan = JoinPlan(selector, rest[0], rest[1])

    @property
    def plan(self) -> JoinPlan:
        if self._plan is None:
            msg = "JoinBolt() without a first stream: JoinBolt(JoinBolt.Selector..., source, key_field)"
            raise TopologyValidationError(msg)
        return self._plan

    # -- the chain: each call checked now, each returning the bolt -----------------------

    def join(self, new_stream: str, field: str, prior_stream: str) -> JoinBolt:
        self.plan.add_join(new_stream, field, prior_stream, INNER)
        return self

    def left_join(self, new_stream: str, field: str, prior_stream: str) -> JoinBolt:
        self.plan.add_join(new_stream, field, prior_stream, LEFT)
        return self

    def select(self, fields: str) -> JoinBolt:
        self.plan.set_select(fields)
        return self

    def with_output_stream(self, name: str) -> JoinBolt:
        self.plan.set_output_stream(name)
        return self

    # BaseWindowedBolt's settings, kept as WindowedBolt.spec's arguments and checked there.
    def with_window(self, length: Any, sliding_interval: Any = None) -> JoinBolt:
        self._window_args.pop("tumbling", None)
        self._window_args.update(window=length, slide=sliding_interval)
        return self

    def with_tumbling_window(self, length: Any) -> JoinBolt:
        self._window_args.pop("window", None)
        self._window_args.pop("slide", None)
        self._window_args["tumbling"] = length
        return self

    def with_timestamp_field(self, field: str) -> JoinBolt:
        self._window_args["timestamp_field"] = field
        return self

    def with_timestamp_extractor(self, extractor: Any) -> JoinBolt:
        self._window_args["timestamp_extractor"] = extractor
        return self

    def with_lag(self, lag: Any) -> JoinBolt:
        self._window_args["lag"] = lag
        return self

    def with_watermark_interval(self, interval: Any) -> JoinBolt:
        self._window_args["watermark_interval"] = interval
        return self

    def with_late_tuple_stream(self, name: str) -> JoinBolt:
        self._window_args["late_stream"] = name
        return self

    # -- placing it ------------------------------------------------------------------------

    spec = _SpecOfInstance()

    def _spec(self, inputs: Any = None, par: int = 1, tasks: int | None = None, name: str | None = None,
              config: Mapping[str, Any] | None = None) -> ComponentSpec:
        plan = self.plan
        where = f"JoinBolt {name!r}" if name else "JoinBolt"
        n_tasks = par if tasks is None else tasks
        refs = plan.check(where, n_tasks if isinstance(n_tasks, int) else 1)
        if not any(k in self._window_args for k in ("window", "tumbling")):
            msg = (f"{where}: no window: with_window(length, sliding_interval) or "
                   f"with_tumbling_window(length), Count(n) or Duration...(n)")
            raise TopologyValidationError(msg)
        by_spec = _inputs_by_spec(inputs)
        if by_spec is not None and plan.selector is Selector.STREAM:
            plan.check_inputs(where, n_tasks, [(ref.stream, grouping, None) for ref, grouping in by_spec])
        fields = [ref.output_name for ref in refs]
        outputs: Any = fields if plan.output_stream is None else [Stream(fields, name=plan.output_stream)]
        # WindowedBolt.spec (a classmethod) for this class: it checks the window and sets its ticks.
        window_spec = super(JoinBolt, type(self)).spec
        return window_spec(name=name, inputs=inputs, par=par, tasks=tasks, config=config, outputs=outputs,
                           **{JOIN_OPTION: plan.to_options()}, **self._window_args)

    @classmethod
    def check_inputs(cls, cdef: Any, declared: Mapping[tuple[str, str], Any], where: str) -> None:
        """When the topology is defined: the inputs, by name now, against the join."""
        options = cdef.options.get(JOIN_OPTION)
        if options is None:
            return
        plan = JoinPlan.from_options(options)
        by_source = plan.selector is Selector.SOURCE
        plan.check_inputs(where, cdef.tasks, [
            (i.component if by_source else i.stream, i.grouping, declared[(i.component, i.stream)])
            for i in cdef.inputs])

    # -- the shell -------------------------------------------------------------------------

    def _setup(self) -> WindowCore:
        plan = JoinPlan.from_options(self.options[JOIN_OPTION])
        self._plan = plan
        self._fields = plan.fields()
        self._out = plan.output_stream or DEFAULT_STREAM
        self._by_source = plan.selector is Selector.SOURCE
        return super()._setup()

    def process_window(self, window: Window) -> None:
        by_source = self._by_source
        entries = [(t.component if by_source else t.stream, t.values, t) for t in window.tuples]
        for values, tuples in self.plan.rows(entries, self._fields):
            # Anchored to the row's own tuples, not the whole window (Storm's JoinBolt too).
            self.emit(values, tuples, self._out)


def _inputs_by_spec(inputs: Any) -> list[tuple[StreamRef, Any]] | None:
    """The inputs as (StreamRef, grouping) when every one is given as a spec or
    ``spec["stream"]`` (so their streams are known now); None when any is by name."""
    if inputs is None:
        return []
    if isinstance(inputs, (ComponentSpec, StreamRef, str)):
        inputs = [inputs]
    if isinstance(inputs, Mapping):
        pairs = list(inputs.items())
    else:
        pairs = [(key, Grouping.SHUFFLE) for key in inputs]
    out = []
    for key, grouping in pairs:
        if isinstance(key, ComponentSpec):
            key = StreamRef(key, DEFAULT_STREAM)
        if (not isinstance(key, StreamRef) or not isinstance(key.spec, ComponentSpec)
                or not isinstance(grouping, GroupingSpec)):
            return None  # by name, or malformed: the topology's definition tells
        out.append((key, grouping))
    return out
