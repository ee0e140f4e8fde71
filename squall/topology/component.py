"""What users subclass: Spout and Bolt, their output streams and specs.

A component class declares ``outputs``; ``Cls.spec(...)`` places it in a
topology with its inputs and parallelism.  ``emit``/``ack``/``fail`` are
bound by the executor when the component starts, so a call on an unstarted
component fails with a clear message instead of doing nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from squall.clock import Clock
from squall.topology.grouping import GroupingSpec

DEFAULT_STREAM = "default"
# The one system stream a component may declare itself: a window's end travelling on
# to the next bolt (Storm's punctuation, squall.streams), so Storm's "__" prefix.
PUNCTUATION_STREAM = "__punctuation"
# The option naming the operations a generated bolt runs (squall.streams), which the UI
# shows for it: a list of short descriptions such as "map(parse)".
OPERATIONS_OPTION = "operations"


class Stream:
    """One declared output stream: its fields, name and whether it is direct."""

    def __init__(self, fields: Sequence[str] = (), name: str = DEFAULT_STREAM, direct: bool = False):
        if isinstance(fields, str):
            fields = [fields]
        self.fields = tuple(fields)
        self.name = name
        self.direct = direct

    def __repr__(self) -> str:
        return f"Stream({list(self.fields)!r}, name={self.name!r}, direct={self.direct})"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "fields": list(self.fields), "direct": self.direct}


def normalize_outputs(outputs: Any, owner: str) -> dict[str, Stream]:
    """``["a", "b"]`` or ``[Stream(...), ...]`` -> {stream name: Stream}."""
    from squall.errors import TopologyValidationError

    if outputs is None:
        return {}
    if isinstance(outputs, (Stream, str)):
        outputs = [outputs]
    streams: dict[str, Stream] = {}
    plain: list[str] = []
    for item in outputs:
        if isinstance(item, Stream):
            if item.name in streams:
                msg = f"{owner}: stream {item.name!r} is declared twice"
                raise TopologyValidationError(msg)
            streams[item.name] = item
        elif isinstance(item, str):
            plain.append(item)
        elif isinstance(item, Mapping):
            stream = Stream(item.get("fields", ()), item.get("name", DEFAULT_STREAM),
                            item.get("direct", False))
            if stream.name in streams:
                msg = f"{owner}: stream {stream.name!r} is declared twice"
                raise TopologyValidationError(msg)
            streams[stream.name] = stream
        else:
            msg = f"{owner}: outputs must be field names or Stream objects, got {item!r}"
            raise TopologyValidationError(msg)
    if plain:
        if DEFAULT_STREAM in streams:
            msg = f"{owner}: field names {plain!r} and an explicit default Stream are both declared"
            raise TopologyValidationError(msg)
        streams[DEFAULT_STREAM] = Stream(plain)
    for stream in streams.values():
        _check_stream(stream, owner)
    return streams


def _check_stream(stream: Stream, owner: str) -> None:
    from squall.errors import TopologyValidationError

    if not isinstance(stream.name, str) or not stream.name:
        msg = f"{owner}: stream names must be non-empty strings, got {stream.name!r}"
        raise TopologyValidationError(msg)
    if stream.name.startswith("__") and stream.name != PUNCTUATION_STREAM:
        msg = f"{owner}: stream {stream.name!r} uses the '__' prefix reserved for system streams"
        raise TopologyValidationError(msg)
    seen: set[str] = set()
    for name in stream.fields:
        if not isinstance(name, str) or not name.isidentifier() or name.startswith("_"):
            msg = (f"{owner}: stream {stream.name!r} field {name!r} "
                   "must be an identifier not starting with '_'")
            raise TopologyValidationError(msg)
        if name in seen:
            msg = f"{owner}: stream {stream.name!r} declares field {name!r} twice"
            raise TopologyValidationError(msg)
        seen.add(name)


@dataclass(frozen=True, eq=False)
class StreamRef:
    """``spec["stream"]``: a subscription to one named stream of a component."""

    spec: ComponentSpec | str
    stream: str


class ComponentSpec:
    """A component placed in a topology: class, inputs, parallelism, config."""

    def __init__(
        self,
        cls: Any,
        kind: str,
        *,
        name: str | None = None,
        inputs: Any = None,
        par: int = 1,
        tasks: int | None = None,
        config: Mapping[str, Any] | None = None,
        outputs: Any = None,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        self.cls = cls
        self.kind = kind
        self.name = name  # explicit name=, or None: the attribute name is used
        self.display_name = name
        self.raw_inputs = inputs
        self.par = par
        self.tasks = par if tasks is None else tasks
        self.config = dict(config or {})
        self.raw_outputs = getattr(cls, "outputs", None) if outputs is None else outputs
        # Component-type specific settings (a shell command, a Spark schema, ...).
        self.options = dict(options or {})

    def __set_name__(self, owner: type, name: str) -> None:
        # Only a default for display: a topology names a spec by the attribute
        # it is assigned to (or its explicit ``name=``), so one spec may be
        # shared by several topologies under different attribute names.
        if self.name is None:
            self.display_name = name

    def __getitem__(self, stream: str) -> StreamRef:
        return StreamRef(self, stream)

    def set_memory_load(self, on_heap_mb: float, off_heap_mb: float | None = None) -> ComponentSpec:
        """Storm's ``setMemoryLoad``: the memory (MB) one executor of this component uses, on
        and off Python's heap; the resource-aware scheduler packs workers by it and each
        worker's memory limit is their sum (docs/scheduling.md).  Returns the spec."""
        from squall.topology import resources

        where = f"{self!r}.set_memory_load"
        self.config[resources.ON_HEAP] = resources.check(resources.ON_HEAP, on_heap_mb, where)
        if off_heap_mb is not None:
            self.config[resources.OFF_HEAP] = resources.check(resources.OFF_HEAP, off_heap_mb, where)
        return self

    def set_cpu_load(self, percent: float) -> ComponentSpec:
        """Storm's ``setCPULoad``: the CPU one executor uses, in percent of a core (100: one
        core); nodes are filled up to their supervisor.cpu.capacity.  Returns the spec."""
        from squall.topology import resources

        self.config[resources.CPU] = resources.check(resources.CPU, percent, f"{self!r}.set_cpu_load")
        return self

    def __repr__(self) -> str:
        cls = getattr(self.cls, "__name__", self.cls)
        return f"<{self.kind} spec {self.name or self.display_name or '?'} of {cls} par={self.par}>"


class Component:
    outputs: Any = None

    def __init__(self) -> None:
        self.conf: dict[str, Any] = {}
        self.context: Any = None
        self.options: dict[str, Any] = {}
        # Marked as the user's: shown from info up whatever the engine's level (squall.runtime.logging).
        self.logger = structlog.get_logger(f"squall.component.{type(self).__name__}").bind(_user_code=True)
        # The worker's clock once running: read time through it, not time.monotonic(),
        # so a test driving a FakeClock drives the component's timeouts too.
        self.clock: Clock = Clock()
        # The task's metrics (counters, gauges, histograms): register in initialize.
        self.metrics: Any = _UnboundMetrics()

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        """Called once in the executor thread before any tuple."""

    def log(self, message: str, level: str = "info") -> None:
        getattr(self.logger, level)(message)

    def emit(self, values: Any, *args: Any, **kwargs: Any) -> Any:
        msg = f"{type(self).__name__}.emit called outside a running topology"
        raise RuntimeError(msg)

    def report_error(self, error: BaseException) -> None:
        """Report an error for this component (throttled, as Storm's reportError)."""
        msg = f"{type(self).__name__}.report_error called outside a running topology"
        raise RuntimeError(msg)

    def stopping(self) -> bool:
        """True once the executor is stopping (the topology is killed, the worker
        shuts down).  A long ``process`` or a helper thread should wrap up:
        what it has not acked times out and replays.  Thread-safe."""
        return False

    def build_inner(self, class_ref: Any, options: Mapping[str, Any] | None, context: Any = None) -> Any:
        """A component this one runs inside itself (a checkpointing or transactional
        wrapper's user bolt or spout), built as it would be unwrapped (a Flux recipe
        in ``options`` applies: squall.topology.loading.build_instance) and given
        this task's runtime: conf, context, clock, logger, metrics, error reporting
        and the stop signal.  ``context``: the one the inner component sees, when the
        wrapper's own is not it (its sources without the wrapper's streams)."""
        from squall.topology.loading import build_instance

        options = options or {}
        inner = build_instance(class_ref, options)
        if context is None:
            context = self.context
        inner.conf = self.conf
        inner.context = context
        inner.options = dict(options)
        inner.logger = inner.logger.bind(component=context.component_id, task=context.task_id)
        inner.clock = self.clock
        inner.call_soon = self.call_soon
        inner.stopping = self.stopping
        inner.report_error = self.report_error
        inner.metrics = self.metrics  # the task's, shared by every inner instance
        return inner

    def call_soon(self, fn: Any) -> None:
        """Run ``fn()`` in this component's executor thread (thread-safe).

        emit, ack and fail belong to the executor thread; a helper thread of
        the component hands work back through this.
        """
        msg = f"{type(self).__name__}.call_soon called outside a running topology"
        raise RuntimeError(msg)


def spout_spec(cls: Any, what: str, name: str | None, par: int, tasks: int | None,
               config: Mapping[str, Any] | None, options: dict[str, Any],
               outputs: Any = None) -> ComponentSpec:
    """A spout's spec (any kind of spout): spouts have no inputs."""
    if "inputs" in options:
        from squall.errors import TopologyValidationError

        msg = f"{what} cannot have inputs"
        raise TopologyValidationError(msg)
    outputs = options.pop("outputs", outputs)
    return ComponentSpec(cls, "spout", name=name, par=par, tasks=tasks, config=config,
                         outputs=outputs, options=options)


class _UnboundMetrics:
    """``metrics`` before the component runs: registering there is an error."""

    def __getattr__(self, name: str) -> Any:
        msg = "metrics are registered once the component runs: in initialize(), not in __init__"
        raise AttributeError(msg)


class Spout(Component):
    """A source of tuples.  ``next_tuple`` emits; ``ack``/``fail`` get message ids."""

    # next_tuple is called only while fewer than topology.max.spout.pending trees
    # are pending; a spout that limits itself (the transactional coordinator) opts out.
    throttled_by_pending = True

    @classmethod
    def spec(
        cls,
        name: str | None = None,
        par: int = 1,
        tasks: int | None = None,
        config: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> ComponentSpec:
        return spout_spec(cls, f"spout {cls.__name__}", name, par, tasks, config, options)

    def next_tuple(self) -> None:
        """Emit zero or more tuples; called while the spout is active and not throttled."""

    def ack(self, tup_id: Any) -> None:
        """The tuple tree of ``tup_id`` was fully processed."""

    def fail(self, tup_id: Any) -> None:
        """The tuple tree of ``tup_id`` failed or timed out; replay it if you need to."""

    def activate(self) -> None:
        """The topology became active; ``next_tuple`` calls follow."""

    def deactivate(self) -> None:
        """The topology was deactivated; ``next_tuple`` is no longer called."""

    def close(self) -> None:
        """The spout is being shut down in an orderly way (not called on a crash)."""

    def progress(self) -> float | None:
        """How far this spout has got, as a number that only grows (the
        Storm@Twitter paper's "progress" metric, which an auto-tuner reads): a
        committed offset, say.  None (the default): its acked tuple trees count."""
        return None


class Bolt(Component):
    """A tuple processor.

    With the defaults every tuple is acked after ``process`` returns, every
    emit is anchored to the tuple being processed, and an exception fails it.
    Set ``auto_ack = auto_anchor = auto_fail = False`` to manage the tree by hand.
    """

    auto_ack = True
    auto_anchor = True
    auto_fail = True

    @classmethod
    def spec(
        cls,
        name: str | None = None,
        inputs: Any = None,
        par: int = 1,
        tasks: int | None = None,
        config: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> ComponentSpec:
        outputs = options.pop("outputs", None)
        return ComponentSpec(cls, "bolt", name=name, inputs=inputs, par=par, tasks=tasks,
                             config=config, outputs=outputs, options=options)

    def process(self, tup: Any) -> None:
        raise NotImplementedError

    def process_tick(self, tup: Any) -> None:
        """A ``__tick`` tuple arrived (``topology.tick.tuple.freq.secs``)."""

    def batch_done(self) -> None:
        """The executor handed this bolt a batch of tuples (or a tick) and it was processed.

        A bolt that buffers work per tuple (writes to a child, a database)
        can flush it here once per batch.  Called only when overridden; an
        exception here kills the worker, as one in ``initialize`` does.
        """

    def ack(self, tup: Any) -> None:
        msg = f"{type(self).__name__}.ack called outside a running topology"
        raise RuntimeError(msg)

    def fail(self, tup: Any) -> None:
        msg = f"{type(self).__name__}.fail called outside a running topology"
        raise RuntimeError(msg)

    def cleanup(self) -> None:
        """The bolt is being shut down in an orderly way (not called on a crash)."""


class BasicBolt(Bolt):
    """Storm's BasicBolt: anchor to the input, ack after ``process``, fail on error."""

    auto_ack = True
    auto_anchor = True
    auto_fail = True


def grouping_of(value: Any) -> GroupingSpec:
    from squall.errors import TopologyValidationError

    if isinstance(value, GroupingSpec):
        return value
    msg = f"expected a Grouping, got {value!r}"
    raise TopologyValidationError(msg)
