"""structlog setup: readable console lines in development, JSON lines in files.

Executors bind node, topology, component and task into contextvars when
their thread starts, so every event says who logged it.  A worker's levels may be
changed while it runs (squall.runtime.log_levels): its filter asks them on every line.
"""

from __future__ import annotations

import logging
import sys
from typing import IO, Any

import structlog

from squall.runtime.log_levels import LogLevels
from squall.security.redact import redact_answer


def redact_secrets(_logger: Any, _name: str, event_dict: Any) -> Any:
    """No secret reaches a log line: a conf logged whole, a ``*.password`` field,
    a ``token=`` inside a URL, all come out as ``*****``."""
    return redact_answer(event_dict)


# Bound into a component's own logger (Component.logger): its lines are the user's, shown
# from info up whatever the engine's level (squall local's default, warning, hid them).
USER_CODE = "_user_code"
USER_LEVEL = logging.INFO
# Bound into the few lines that say what happened to the levels themselves (set, ignored,
# expired): shown whatever the levels say, or raising squall.worker would hide them.
ALWAYS = "_always_shown"
_METHOD_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "msg": logging.INFO,
                  "warning": logging.WARNING, "warn": logging.WARNING,
                  "error": logging.ERROR, "exception": logging.ERROR,
                  "critical": logging.CRITICAL, "fatal": logging.CRITICAL}


class NamedPrintLogger(structlog.PrintLogger):
    """structlog's PrintLogger, keeping the name it was asked for (``get_logger(name)``):
    levels are set by logger name."""

    def __init__(self, file: IO[str] | None = None, name: str = "") -> None:
        super().__init__(file)
        self.name = name


class NamedPrintLoggerFactory:
    def __init__(self, file: IO[str] | None = None) -> None:
        self._file = file

    def __call__(self, *args: Any) -> NamedPrintLogger:
        return NamedPrintLogger(self._file, args[0] if args and isinstance(args[0], str) else "")


def add_logger_name(logger: Any, _name: str, event_dict: Any) -> Any:
    """``logger``: the name levels are set by (squall set_log_level), when it has one."""
    name = getattr(logger, "name", "")
    if name:
        event_dict.setdefault("logger", name)
    return event_dict


def level_filter(engine: int, user: int, levels: LogLevels | None = None) -> Any:
    """A processor dropping what is below the engine's level, or the user's for lines of
    a component's own logger (marked with USER_CODE, which it takes out) -- unless
    ``levels`` name a level for the line's component or logger."""
    def drop_below(logger: Any, method_name: str, event_dict: Any) -> Any:
        if event_dict.pop(ALWAYS, False):
            return event_dict
        mine = event_dict.pop(USER_CODE, False)
        threshold = None if levels is None else levels.threshold(
            event_dict.get("component") if mine else None, getattr(logger, "name", ""))
        if threshold is None:
            threshold = user if mine else engine
        if _METHOD_LEVELS.get(method_name, logging.INFO) < threshold:
            raise structlog.DropEvent
        return event_dict

    return drop_below


def bound_logger_class(floor: int, levels: LogLevels) -> type:
    """structlog's bound logger letting every level through to the filter while ``levels``
    has any set; while it has none, a call below ``floor`` (the process's own level) returns
    at once as structlog's own filtering logger's does: a component's per-tuple debug line
    costs nothing until someone asks for it."""
    base: Any = structlog.make_filtering_bound_logger(logging.DEBUG)

    def gated(method: Any) -> Any:
        def call(self: Any, event: Any = None, *args: Any, **kw: Any) -> Any:
            if not levels.active:
                return None
            return method(self, event, *args, **kw)

        call.__name__ = method.__name__
        return call

    below = {name: gated(getattr(base, name)) for name, number in _METHOD_LEVELS.items()
             if number < floor and hasattr(base, name)}
    return type("BoundLoggerWithLevels", (base,), below)


def configure_logging(level: str = "info", json: bool = False, stream: IO[str] | None = None,
                      levels: LogLevels | None = None) -> None:
    """``levels``: changed while the process runs (a worker's): while any is set every line
    reaches the filter, which asks them."""
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        msg = f"unknown log level {level!r}"
        raise ValueError(msg)
    user = min(numeric, USER_LEVEL)
    renderer: Any = structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(
        colors=False)
    # Files name each line's logger (what set_log_level takes); the console stays terse.
    named: list[Any] = [add_logger_name] if json else []
    # Below this a call is dropped before any processor. Loggers bound now (a component's)
    # keep their class: with levels that may change, it lets them through when any is set.
    floor = min(numeric, user)
    wrapper = (structlog.make_filtering_bound_logger(floor) if levels is None
               else bound_logger_class(floor, levels))
    structlog.configure(
        processors=[
            level_filter(numeric, user, levels),
            structlog.contextvars.merge_contextvars,
            structlog.processors.StackInfoRenderer(),
            # A traceback becomes text before redaction: a secret in an exception's
            # message (a URL with its password) is hidden like any other.
            structlog.processors.format_exc_info,
            redact_secrets,
            structlog.processors.add_log_level,
            *named,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        wrapper_class=wrapper,
        logger_factory=NamedPrintLoggerFactory(stream or sys.stderr),
        cache_logger_on_first_use=False,
    )
