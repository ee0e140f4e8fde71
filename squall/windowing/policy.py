"""What a windowed bolt's spec says: window length and slide, in tuples or
time, and where time comes from (arrival, or a timestamp in the tuple).

``Count`` and ``Duration`` are the user's words; :class:`WindowPolicy` is
the checked, JSON-able form a spec carries to the worker in its options.
Every check here runs when the topology class is defined, so a bad window
is a ``TopologyValidationError`` naming the component, not a dead worker.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from squall.errors import TopologyValidationError


class Count:
    """A window length or slide in tuples."""

    __slots__ = ("n",)

    def __init__(self, n: int) -> None:
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            msg = f"Count must be a positive number of tuples, got {n!r}"
            raise TopologyValidationError(msg)
        self.n = n

    def __repr__(self) -> str:
        return f"Count({self.n})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Count) and other.n == self.n

    def __hash__(self) -> int:
        return hash(("count", self.n))


class Duration:
    """A window length, slide, lag or watermark interval in milliseconds."""

    __slots__ = ("ms",)

    def __init__(self, ms: int) -> None:
        if not isinstance(ms, int) or isinstance(ms, bool) or ms < 0:
            msg = f"Duration must be a whole number of milliseconds >= 0, got {ms!r}"
            raise TopologyValidationError(msg)
        self.ms = ms

    @classmethod
    def milliseconds(cls, n: int) -> Duration:
        return cls(n)

    @classmethod
    def seconds(cls, n: float) -> Duration:
        return cls(_whole_ms(n * 1000, n, "seconds"))

    @classmethod
    def minutes(cls, n: float) -> Duration:
        return cls(_whole_ms(n * 60_000, n, "minutes"))

    @classmethod
    def hours(cls, n: float) -> Duration:
        return cls(_whole_ms(n * 3_600_000, n, "hours"))

    @classmethod
    def days(cls, n: float) -> Duration:
        return cls(_whole_ms(n * 86_400_000, n, "days"))

    def __repr__(self) -> str:
        return f"Duration({self.ms} ms)"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Duration) and other.ms == self.ms

    def __hash__(self) -> int:
        return hash(("duration", self.ms))


def _whole_ms(value: float, given: Any, unit: str) -> int:
    if isinstance(given, bool) or not isinstance(given, (int, float)):
        msg = f"Duration.{unit} takes a number, got {given!r}"
        raise TopologyValidationError(msg)
    return round(value)


Size = Count | Duration
DEFAULT_WATERMARK_MS = 1000  # Storm's default watermark interval
DEFAULT_LAG_MS = 0


@dataclass(frozen=True)
class WindowPolicy:
    """A checked window: ``length`` and ``slide`` are ("count", n) or ("ms", n)."""

    length: tuple[str, int]
    slide: tuple[str, int]
    timestamp_field: str | None = None
    timestamp_extractor: str | None = None  # "module:function"
    lag_ms: int = DEFAULT_LAG_MS
    watermark_interval_ms: int = DEFAULT_WATERMARK_MS
    late_stream: str | None = None

    @property
    def event_time(self) -> bool:
        return self.timestamp_field is not None or self.timestamp_extractor is not None

    @property
    def tick_secs(self) -> float | None:
        """How often the bolt needs a tick: watermarks (event time) or a time slide."""
        if self.event_time:
            return self.watermark_interval_ms / 1000
        if self.slide[0] == "ms":
            return self.slide[1] / 1000
        return None

    def to_options(self) -> dict[str, Any]:
        return {"length": list(self.length), "slide": list(self.slide),
                "timestamp_field": self.timestamp_field, "timestamp_extractor": self.timestamp_extractor,
                "lag_ms": self.lag_ms, "watermark_interval_ms": self.watermark_interval_ms,
                "late_stream": self.late_stream}

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> WindowPolicy:
        return cls(length=tuple(options["length"]), slide=tuple(options["slide"]),  # type: ignore[arg-type]
                   timestamp_field=options.get("timestamp_field"),
                   timestamp_extractor=options.get("timestamp_extractor"),
                   lag_ms=options.get("lag_ms", DEFAULT_LAG_MS),
                   watermark_interval_ms=options.get("watermark_interval_ms", DEFAULT_WATERMARK_MS),
                   late_stream=options.get("late_stream"))

    def check_timeout(self, timeout_secs: float, where: str) -> None:
        """Tuples stay pending until they leave the window: a duration window
        plus its slide must fit inside the message timeout, or every tuple
        would time out and replay before it is acked (Storm's rule)."""
        if self.length[0] != "ms":
            return
        span = self.length[1] + (self.slide[1] if self.slide[0] == "ms" else 0)
        if span >= timeout_secs * 1000:
            msg = (f"{where}: window length + slide is {span} ms, not below "
                   f"topology.message.timeout.secs ({timeout_secs} s): its tuples would time out "
                   f"and replay before they expire; raise the timeout or shorten the window")
            raise TopologyValidationError(msg)


def make_policy(where: str, *, window: Any = None, slide: Any = None, tumbling: Any = None,
                timestamp_field: Any = None, timestamp_extractor: Any = None, lag: Any = None,
                watermark_interval: Any = None, late_stream: Any = None) -> WindowPolicy:
    """The checked policy of ``WindowedBolt.spec(...)``'s window arguments."""
    if tumbling is not None and window is not None:
        msg = f"{where}: give either window= (with an optional slide=) or tumbling=, not both"
        raise TopologyValidationError(msg)
    if tumbling is not None and slide is not None:
        msg = f"{where}: a tumbling window slides by its own length; slide= is not allowed with tumbling="
        raise TopologyValidationError(msg)
    if tumbling is None and window is None:
        msg = f"{where}: a windowed bolt needs window=Count(n) or Duration(...), or tumbling=..."
        raise TopologyValidationError(msg)
    if tumbling is not None:
        length = _size(where, "tumbling", tumbling)
        step = length
    else:
        length = _size(where, "window", window)
        # Storm: a window without a slide slides with every tuple.
        step = ("count", 1) if slide is None else _size(where, "slide", slide)
    if timestamp_field is not None and timestamp_extractor is not None:
        msg = f"{where}: give timestamp_field= or timestamp_extractor=, not both"
        raise TopologyValidationError(msg)
    if timestamp_field is not None and (not isinstance(timestamp_field, str) or not timestamp_field):
        msg = f"{where}: timestamp_field must be a field name, got {timestamp_field!r}"
        raise TopologyValidationError(msg)
    extractor = None if timestamp_extractor is None else _callable_path(where, timestamp_extractor)
    event_time = timestamp_field is not None or extractor is not None
    for name, value in (("lag", lag), ("watermark_interval", watermark_interval)):
        if value is not None and not event_time:
            msg = (f"{where}: {name}= only applies to event time "
                   f"(give timestamp_field= or timestamp_extractor=)")
            raise TopologyValidationError(msg)
    if late_stream is not None:
        if not event_time:
            msg = (f"{where}: late_stream= needs event time: a tuple can only be late against "
                   f"a timestamp_field= or timestamp_extractor=")
            raise TopologyValidationError(msg)
        if not isinstance(late_stream, str) or not late_stream:
            msg = f"{where}: late_stream must be a stream name, got {late_stream!r}"
            raise TopologyValidationError(msg)
    lag_ms = _duration(where, "lag", lag, allow_zero=True) if lag is not None else DEFAULT_LAG_MS
    wm_ms = (_duration(where, "watermark_interval", watermark_interval, allow_zero=False)
             if watermark_interval is not None else DEFAULT_WATERMARK_MS)
    return WindowPolicy(length, step, timestamp_field, extractor, lag_ms, wm_ms, late_stream)


def _size(where: str, name: str, value: Any) -> tuple[str, int]:
    if isinstance(value, Count):
        return ("count", value.n)
    if isinstance(value, Duration):
        if value.ms <= 0:
            msg = f"{where}: {name}= must be a positive duration, got {value!r}"
            raise TopologyValidationError(msg)
        return ("ms", value.ms)
    msg = f"{where}: {name}= must be Count(n) or Duration...(n), got {value!r}"
    raise TopologyValidationError(msg)


def _duration(where: str, name: str, value: Any, allow_zero: bool) -> int:
    if not isinstance(value, Duration):
        msg = f"{where}: {name}= must be a Duration, got {value!r}"
        raise TopologyValidationError(msg)
    if value.ms == 0 and not allow_zero:
        msg = f"{where}: {name}= must be a positive duration, got {value!r}"
        raise TopologyValidationError(msg)
    return value.ms


def _callable_path(where: str, fn: Any) -> str:
    """A module-level function as "module:name": the spec is plain data that
    travels to workers, which import the function again."""
    if isinstance(fn, str):
        if ":" not in fn:
            msg = f"{where}: timestamp_extractor {fn!r} must look like 'package.module:function'"
            raise TopologyValidationError(msg)
        return fn
    qualname = getattr(fn, "__qualname__", "")
    module = getattr(fn, "__module__", None)
    if not callable(fn) or not module or not qualname or "<" in qualname:
        msg = (f"{where}: timestamp_extractor must be a module-level function (workers import it "
               f"again by name), got {fn!r}")
        raise TopologyValidationError(msg)
    return f"{module}:{qualname}"


def resolve_extractor(path: str) -> Callable[[Any], int]:
    from squall.topology.loading import resolve_class

    return resolve_class(path)  # type: ignore[no-any-return]
