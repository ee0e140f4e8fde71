"""structlog setup: readable console lines in development, JSON lines in files.

Executors bind node, topology, component and task into contextvars when
their thread starts, so every event says who logged it.
"""

from __future__ import annotations

import logging
import sys
from typing import IO, Any

import structlog

from squall.security.redact import redact_answer


def redact_secrets(_logger: Any, _name: str, event_dict: Any) -> Any:
    """No secret reaches a log line: a conf logged whole, a ``*.password`` field,
    a ``token=`` inside a URL, all come out as ``*****``."""
    return redact_answer(event_dict)


# Bound into a component's own logger (Component.logger): its lines are the user's, shown
# from info up whatever the engine's level (squall local's default, warning, hid them).
USER_CODE = "_user_code"
USER_LEVEL = logging.INFO
_METHOD_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "msg": logging.INFO,
                  "warning": logging.WARNING, "warn": logging.WARNING,
                  "error": logging.ERROR, "exception": logging.ERROR,
                  "critical": logging.CRITICAL, "fatal": logging.CRITICAL}


def level_filter(engine: int, user: int) -> Any:
    """A processor dropping what is below the engine's level, or the user's for lines of
    a component's own logger (marked with USER_CODE, which it takes out)."""
    def drop_below(_logger: Any, method_name: str, event_dict: Any) -> Any:
        threshold = user if event_dict.pop(USER_CODE, False) else engine
        if _METHOD_LEVELS.get(method_name, logging.INFO) < threshold:
            raise structlog.DropEvent
        return event_dict

    return drop_below


def configure_logging(level: str = "info", json: bool = False, stream: IO[str] | None = None) -> None:
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        msg = f"unknown log level {level!r}"
        raise ValueError(msg)
    user = min(numeric, USER_LEVEL)
    renderer: Any = structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(
        colors=False)
    structlog.configure(
        processors=[
            level_filter(numeric, user),
            structlog.contextvars.merge_contextvars,
            structlog.processors.StackInfoRenderer(),
            # A traceback becomes text before redaction: a secret in an exception's
            # message (a URL with its password) is hidden like any other.
            structlog.processors.format_exc_info,
            redact_secrets,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(min(numeric, user)),
        logger_factory=structlog.PrintLoggerFactory(stream or sys.stderr),
        cache_logger_on_first_use=False,
    )
