"""WindowedBolt: the thin shell around :class:`~squall.windowing.core.WindowCore`.

It runs as an ordinary bolt.  ``process`` stamps each tuple (arrival time on
the worker's clock, or its event time) and buffers it; ``process_tick``
carries time forward.  The ticks are the component's own
``topology.tick.tuple.freq.secs``, which ``spec`` sets to the slide (a
duration slide in processing time) or to the watermark interval (event
time), so the worker's system timer drives windows and watermarks and a
test's FakeClock drives them too: no thread of our own.

At least once, as Storm: a tuple is acked when it leaves the window, and
what ``process_window`` emits is anchored to every tuple of the window.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from squall.errors import SerializationError, TopologyValidationError
from squall.topology.component import DEFAULT_STREAM, Bolt, ComponentSpec, Stream
from squall.windowing.core import Activation, Window, WindowCore
from squall.windowing.policy import WindowPolicy, make_policy, resolve_extractor

TICK_KEY = "topology.tick.tuple.freq.secs"
TIMEOUT_KEY = "topology.message.timeout.secs"
LATE_TUPLE_FIELD = "late_tuple"  # Storm's WindowedBoltExecutor.LATE_TUPLE_FIELD


def _unbound_emit(*args: Any, **kwargs: Any) -> Any:
    msg = "WindowedBolt.emit called outside a running topology"
    raise RuntimeError(msg)


class WindowedBolt(Bolt):
    """Subclass, declare ``outputs`` and define ``process_window(window)``.

    ``window.tuples`` / ``.new`` / ``.expired`` / ``.start`` / ``.end``: see
    :class:`~squall.windowing.core.Window`.  A windowed bolt's ticks belong to
    its windows; it gets no ``process_tick`` of its own.
    """

    # The shell acks (on expiry) and anchors (to the window) itself.
    auto_ack = False
    auto_anchor = False
    auto_fail = False

    _core: WindowCore | None = None
    _raw_emit: Any = staticmethod(_unbound_emit)
    _anchors: list[Any] | None = None
    _failed: set[int] | None = None  # ids of tuples failed with their window: never acked after

    @classmethod
    def spec(  # type: ignore[override]
        cls,
        name: str | None = None,
        inputs: Any = None,
        par: int = 1,
        tasks: int | None = None,
        config: Mapping[str, Any] | None = None,
        *,
        window: Any = None,
        slide: Any = None,
        tumbling: Any = None,
        timestamp_field: str | None = None,
        timestamp_extractor: Any = None,
        lag: Any = None,
        watermark_interval: Any = None,
        late_stream: str | None = None,
        **options: Any,
    ) -> ComponentSpec:
        where = f"windowed bolt {cls.__name__}"
        policy = make_policy(where, window=window, slide=slide, tumbling=tumbling,
                             timestamp_field=timestamp_field, timestamp_extractor=timestamp_extractor,
                             lag=lag, watermark_interval=watermark_interval, late_stream=late_stream)
        conf = dict(config or {})
        tick = policy.tick_secs
        if tick is not None:
            if conf.get(TICK_KEY) not in (None, tick):
                msg = (f"{where}: {TICK_KEY} is set by the window ({tick} s, its "
                       f"{'watermark interval' if policy.event_time else 'slide'}); do not set it")
                raise TopologyValidationError(msg)
            conf[TICK_KEY] = tick
        if TIMEOUT_KEY in conf:
            policy.check_timeout(conf[TIMEOUT_KEY], where)
        outputs = options.pop("outputs", None)
        if outputs is None:
            outputs = cls.outputs
        if late_stream is not None:
            if outputs is None:
                outputs = []
            elif isinstance(outputs, (str, Stream)):
                outputs = [outputs]
            outputs = [*outputs, Stream([LATE_TUPLE_FIELD], name=late_stream)]
        options["window"] = policy.to_options()
        return ComponentSpec(cls, "bolt", name=name, inputs=inputs, par=par, tasks=tasks,
                             config=conf, outputs=outputs, options=options)

    @classmethod
    def check_definition(cls, cdef: Any, conf: Mapping[str, Any], where: str) -> None:
        """Called by the topology's definition with its config (the
        component's own on top): the window must fit in the message timeout."""
        if "window" in cdef.options:
            WindowPolicy.from_options(cdef.options["window"]).check_timeout(conf[TIMEOUT_KEY], where)

    # -- what users write ------------------------------------------------------

    def process_window(self, window: Window) -> None:
        raise NotImplementedError

    # -- emit anchored to the window ----------------------------------------------

    @property  # type: ignore[override]
    def emit(self) -> Any:
        return self._emit_anchored

    @emit.setter
    def emit(self, fn: Any) -> None:
        # The executor binds its emitter here; emits go through _emit_anchored.
        self._raw_emit = fn

    def _emit_anchored(self, values: Any, anchors: Any = None, stream: str = DEFAULT_STREAM,
                       direct_task: Any = None) -> Any:
        if anchors is None:
            anchors = self._anchors
        return self._raw_emit(values, anchors, stream, direct_task)

    # -- the shell -------------------------------------------------------------

    def _setup(self) -> WindowCore:
        options = self.options.get("window")
        if options is None:
            msg = f"{type(self).__name__} was not placed with {type(self).__name__}.spec(window=...)"
            raise TopologyValidationError(msg)
        policy = WindowPolicy.from_options(options)
        timeout = self.conf.get(TIMEOUT_KEY)
        if timeout is not None:
            try:
                policy.check_timeout(timeout, f"windowed bolt {self.context.component_id}")
            except TopologyValidationError as e:  # a submit-time override lowered it
                self.logger.warning("window longer than the message timeout", error=str(e))
        sources = list(self.context.sources) if self.context is not None else [("", DEFAULT_STREAM)]
        core = WindowCore(policy, sources)
        self._policy = policy
        self._field = policy.timestamp_field
        self._extract = resolve_extractor(policy.timestamp_extractor) if policy.timestamp_extractor else None
        # Window bounds are epoch ms; durations come from the monotonic clock.
        self._offset_ms = round(time.time() * 1000) - self._clock_ms()
        self._late = self.metrics.counter("late_tuples")
        self.metrics.gauge("window_buffered", lambda: len(core))
        self._core = core
        return core

    def _clock_ms(self) -> int:
        return int(self.clock.now() * 1000)

    def now_ms(self) -> int:
        """The worker's clock as epoch milliseconds (processing time)."""
        return self._clock_ms() + self._offset_ms

    def process(self, tup: Any) -> None:
        core = self._core or self._setup()
        if core.event_time:
            try:
                ts = self._timestamp(tup)
            except Exception as e:  # noqa: BLE001 - a tuple without a usable timestamp: fail it, say why
                self.fail(tup)
                self.report_error(e)
                return
        else:
            ts = self.now_ms()
        acts = core.add(tup, ts, (tup.component, tup.stream))
        if acts is None:
            self._on_late(tup, ts)
        elif acts:
            self._run(acts)

    def process_tick(self, tup: Any) -> None:
        core = self._core or self._setup()
        acts = core.tick(self.now_ms())
        if acts:
            self._run(acts)

    def _timestamp(self, tup: Any) -> int:
        if self._extract is not None:
            ts = self._extract(tup)
        else:
            try:
                ts = tup[self._field]
            except AttributeError:
                msg = (f"tuple from {tup.component!r} stream {tup.stream!r} has no timestamp field "
                       f"{self._field!r} (fields: {list(tup.values._fields)})")
                raise ValueError(msg) from None
        if isinstance(ts, bool) or not isinstance(ts, (int, float)):
            msg = f"timestamp of tuple from {tup.component!r} must be epoch milliseconds, got {ts!r}"
            raise TypeError(msg)
        return int(ts)

    def _on_late(self, tup: Any, ts: int) -> None:
        self._late.inc()
        stream = self._policy.late_stream
        if stream is not None:
            detached = {"component": tup.component, "stream": tup.stream, "task": tup.task,
                        "values": list(tup.values), "ts": ts}
            self._raw_emit([detached], [tup], stream, None)
        else:
            self.logger.debug("late tuple dropped", ts=ts, watermark=self._core.watermarks.watermark)  # type: ignore[union-attr]
        self.ack(tup)

    def _run(self, acts: list[Activation]) -> None:
        for act in acts:
            window = act.window
            if window is not None:
                self._anchors = window.tuples
                try:
                    self.process_window(window)
                except SerializationError:
                    raise
                except Exception as e:  # noqa: BLE001 - user code: its window replays
                    failed = self._failed if self._failed is not None else set()
                    for tup in window.tuples:
                        if id(tup) not in failed:
                            failed.add(id(tup))
                            self.fail(tup)
                    self._failed = failed
                    self.report_error(e)
                finally:
                    self._anchors = None
            # Expired tuples are acked after the window that saw them last was processed.
            failed = self._failed
            for tup in act.evicted:
                if failed and id(tup) in failed:
                    failed.discard(id(tup))
                else:
                    self.ack(tup)
