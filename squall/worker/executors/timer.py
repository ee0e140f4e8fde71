"""The worker's system timer: periodic actions (ticks) driven by a clock.

With a :class:`~squall.clock.FakeClock` a test advancing time by ``n``
periods sees ``n`` firings, in order, as with real time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import structlog

from squall.clock import Clock

log = structlog.get_logger("squall.worker.executors.timer")


class _Job:
    __slots__ = ("action", "due", "period")

    def __init__(self, due: float, period: float, action: Callable[[], None]) -> None:
        self.due = due
        self.period = period
        self.action = action


class SystemTimer:
    def __init__(self, clock: Clock, name: str = "squall-timer") -> None:
        self._clock = clock
        self._jobs: list[_Job] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def every(self, period: float, action: Callable[[], None]) -> None:
        self._jobs.append(_Job(self._clock.now() + period, period, action))

    def start(self) -> None:
        if self._jobs:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def join(self, timeout: float) -> None:
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            due = min(job.due for job in self._jobs)
            if not self._clock.sleep_until(due, self._stop):
                return
            now = self._clock.now()
            # Fire every period that passed, oldest first, so a clock that
            # jumped ahead produces the same ticks real time would have.
            while not self._stop.is_set():
                job = min(self._jobs, key=lambda j: j.due)
                if job.due > now:
                    break
                job.due += job.period
                try:
                    job.action()
                except Exception:
                    log.exception("timer action failed")
