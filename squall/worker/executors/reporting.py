"""Component errors: what is reported, and Storm's throttle on reporting."""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ErrorRecord:
    topology: str
    component: str
    task: int | None
    error: str  # "ValueError: bad input"
    trace: str
    fatal: bool  # True: the worker died of it and was restarted
    worker: str
    time: float = field(default_factory=time.time)  # wall time, for display only
    exception: BaseException | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "exception"}


def describe(exc: BaseException) -> tuple[str, str]:
    text = f"{type(exc).__name__}: {exc}"
    trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return text, trace


class ErrorThrottle:
    """At most ``limit`` reports per ``interval`` seconds (Storm's
    topology.max.error.report.per.interval); the rest are only counted."""

    def __init__(self, limit: int, interval: float, now: Callable[[], float]) -> None:
        self.limit = limit
        self.interval = interval
        self._now = now
        self._window_start = now()
        self._count = 0
        self.suppressed = 0

    def allow(self) -> bool:
        now = self._now()
        if now - self._window_start >= self.interval:
            self._window_start = now
            self._count = 0
        if self._count < self.limit:
            self._count += 1
            return True
        self.suppressed += 1
        return False
