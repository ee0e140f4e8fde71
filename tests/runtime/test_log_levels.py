"""Levels set on a running worker (Storm's set_log_level): which name covers a line, expiry
by the clock, nimbus's merge, and the log filter that asks them on every line."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator

import pytest
import structlog

from squall.clock import FakeClock
from squall.runtime.log_levels import LogLevels, NamedLevel, decode, merge
from squall.runtime.logging import configure_logging

DEBUG, INFO, WARNING, ERROR = 10, 20, 30, 40


def wire(**levels: tuple[str, float | None]) -> dict[str, dict[str, object]]:
    return {name: {"level": level, "timeout_secs": 0 if expires is None else 5, "expires_at": expires}
            for name, (level, expires) in levels.items()}


def test_the_most_specific_name_wins() -> None:
    levels = LogLevels(FakeClock(100.0).now)
    levels.apply({**wire(root=("ERROR", None), split=("DEBUG", None)),
                  "squall.worker": wire(x=("WARN", None))["x"],
                  "squall.worker.wire.transfer": wire(x=("DEBUG", None))["x"]})
    assert set(levels.in_force()) == {"ROOT", "split", "squall.worker", "squall.worker.wire.transfer"}
    # A component's own line: its id first, whatever its logger's name says.
    assert levels.threshold("split", "squall.component.Split") == DEBUG
    # Another component's: no id of its own, no prefix of its logger's name: ROOT.
    assert levels.threshold("count", "squall.component.Count") == ERROR
    # Engine lines by the longest dotted prefix of their logger's name, never a component id.
    assert levels.threshold(None, "squall.worker.wire.transfer") == DEBUG
    assert levels.threshold(None, "squall.worker.process.lifecycle.WorkerProcess") == WARNING
    assert levels.threshold(None, "squall.workers") == ERROR  # a prefix ends at a dot
    assert levels.threshold(None, "split") == DEBUG  # ...a logger may be named so, though
    assert levels.threshold(None, "") == ERROR


def test_no_levels_leave_every_line_to_the_default() -> None:
    levels = LogLevels(FakeClock().now)
    assert levels.threshold("split", "squall.component.Split") is None
    levels.apply(wire(split=("DEBUG", None)))
    assert levels.threshold("count", "squall.component.Count") is None


def test_levels_expire_by_the_clock_and_answers_follow() -> None:
    clock = FakeClock(100.0)
    levels = LogLevels(clock.now)
    levels.apply(wire(ROOT=("DEBUG", 130.0), split=("WARN", None)))
    assert levels.threshold(None, "squall.x") == DEBUG  # asked (and remembered) before the expiry
    version = levels.version
    clock.advance(29.9)
    assert levels.expire() == {}
    assert levels.version == version
    clock.advance(0.1)
    gone = levels.expire()
    assert list(gone) == ["ROOT"] and gone["ROOT"].level == "DEBUG"
    assert levels.version == version + 1
    assert levels.threshold(None, "squall.x") is None  # the remembered answer went with it
    assert levels.threshold("split", "squall.component.Split") == WARNING  # until reset
    assert levels.expire() == {}


def test_an_entry_already_expired_is_not_applied() -> None:
    levels = LogLevels(FakeClock(200.0).now)
    levels.apply(wire(ROOT=("DEBUG", 150.0)))
    assert levels.in_force() == {}


def test_applying_the_same_levels_again_changes_nothing() -> None:
    levels = LogLevels(FakeClock().now)
    levels.apply(wire(split=("DEBUG", None)))
    version = levels.version
    levels.apply(wire(split=("DEBUG", None)))
    assert levels.version == version
    levels.apply({})
    assert levels.version == version + 1 and levels.in_force() == {}


def test_invalid_entries_are_left_out_and_said() -> None:
    levels = LogLevels(FakeClock().now)
    invalid = levels.apply({**wire(split=("DEBUG", None)), "count": {"level": "LOUD"}, "": {"level": "INFO"}})
    assert set(levels.in_force()) == {"split"}
    assert "unknown log level 'LOUD'" in invalid["count"] and "logger name" in invalid[""]


def test_merge_sets_expiries_resets_and_drops_what_expired() -> None:
    merged = merge({}, {"root": ("debug", 30), "com.x": ("INFO", 0)}, now=1000.0)
    assert merged == {"ROOT": {"level": "DEBUG", "timeout_secs": 30, "expires_at": 1030.0},
                      "com.x": {"level": "INFO", "timeout_secs": 0, "expires_at": None}}
    merged = merge(merged, {"split": ("WARN", 5)}, now=1031.0)  # ROOT's time has passed
    assert set(merged) == {"com.x", "split"}
    assert merge(merged, {"com.x": (None, 0), "nothing": (None, 0)}, now=1032.0) == {
        "split": {"level": "WARN", "timeout_secs": 5, "expires_at": 1036.0}}
    valid, invalid = decode(merged)
    assert valid["split"] == NamedLevel("WARN", 5, 1036.0) and invalid == {}


@pytest.mark.parametrize(("changes", "says"), [
    ({"ROOT": ("LOUD", 0)},
     "unknown log level 'LOUD' (one of ALL, TRACE, DEBUG, INFO, WARN, ERROR, FATAL, OFF)"),
    ({"ROOT": ("DEBUG", -1)}, "whole number of seconds"),
    ({"ROOT": ("DEBUG", 1.5)}, "whole number of seconds"),
    ({"": ("DEBUG", 0)}, "logger name must be a non-empty string"),
])
def test_merge_refuses_a_bad_change_naming_it(changes: dict[str, tuple[str, int]], says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)):
        merge({}, changes, now=0.0)


def test_merge_bounds_how_many_names_a_topology_holds() -> None:
    with pytest.raises(ValueError, match="at most 100 log levels"):
        merge({}, {f"n{i}": ("DEBUG", 0) for i in range(101)}, now=0.0)


# -- the filter, through structlog ---------------------------------------------------------


@pytest.fixture
def levels_and_stream() -> Iterator[tuple[LogLevels, FakeClock, io.StringIO]]:
    clock = FakeClock(100.0)
    levels, stream = LogLevels(clock.now), io.StringIO()
    configure_logging("info", json=True, stream=stream, levels=levels)
    try:
        yield levels, clock, stream
    finally:
        structlog.reset_defaults()


def events(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_a_components_logger_bound_before_the_change_follows_it(
        levels_and_stream: tuple[LogLevels, FakeClock, io.StringIO]) -> None:
    levels, clock, stream = levels_and_stream
    # As ComponentExecutor binds it, once, when the task starts.
    own = structlog.get_logger("squall.component.Split").bind(_user_code=True, component="split", task=3)
    engine = structlog.get_logger("squall.worker.wire.transfer")
    own.debug("before")
    own.info("shown anyway")
    engine.debug("engine before")
    levels.apply(wire(split=("DEBUG", 105.0)))
    own.debug("during")
    engine.debug("engine during")
    clock.advance(5)
    levels.expire()
    own.debug("after")
    said = [(e["event"], e.get("logger")) for e in events(stream)]
    assert said == [("shown anyway", "squall.component.Split"), ("during", "squall.component.Split")]


def test_root_raises_the_bar_for_every_line(
        levels_and_stream: tuple[LogLevels, FakeClock, io.StringIO]) -> None:
    levels, _clock, stream = levels_and_stream
    own = structlog.get_logger("squall.component.Split").bind(_user_code=True, component="split")
    levels.apply(wire(ROOT=("ERROR", None)))
    own.info("hidden")
    structlog.get_logger("squall.worker").warning("hidden too")
    own.error("shown")
    assert [e["event"] for e in events(stream)] == ["shown"]


def test_while_no_level_is_set_a_debug_call_reaches_no_processor(
        levels_and_stream: tuple[LogLevels, FakeClock, io.StringIO]) -> None:
    levels, _clock, _stream = levels_and_stream
    asked: list[str] = []
    structlog.get_config()["processors"].insert(0, lambda _l, method, event: asked.append(method) or event)
    own = structlog.get_logger("squall.component.Split").bind(_user_code=True, component="split")
    own.debug("costs nothing")  # a per-tuple debug line in user code, as cheap as before
    assert asked == []
    levels.apply(wire(count=("ERROR", None)))
    own.debug("asked about")
    assert asked == ["debug"]
