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


def configure_logging(level: str = "info", json: bool = False, stream: IO[str] | None = None) -> None:
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        msg = f"unknown log level {level!r}"
        raise ValueError(msg)
    renderer: Any = structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(
        colors=False)
    structlog.configure(
        processors=[
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
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(stream or sys.stderr),
        cache_logger_on_first_use=False,
    )
