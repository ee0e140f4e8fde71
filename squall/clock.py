"""Time sources for daemons and executors.

Every timeout, tick and backoff in Squall reads time from a clock object so
that tests can drive time forward instead of sleeping.  :class:`Clock` is the
real one (monotonic seconds); :class:`FakeClock` only moves when told to.
"""

from __future__ import annotations

import threading
import time


class Clock:
    """Monotonic wall time, the default."""

    def now(self) -> float:
        return time.monotonic()

    def sleep_until(self, deadline: float, stop: threading.Event) -> bool:
        """Block until ``now() >= deadline`` or ``stop`` is set.

        Returns True when the deadline passed, False when stopped.
        """
        remaining = deadline - self.now()
        if remaining > 0 and stop.wait(remaining):
            return False
        return not stop.is_set()


class FakeClock(Clock):
    """A clock that moves only through :meth:`advance`.

    Threads blocked in :meth:`sleep_until` wake when time is advanced past
    their deadline.  Real time never moves it, so a test can hold a tuple
    "forever" and then jump past its timeout in one call.
    """

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._cond = threading.Condition()

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            msg = f"a clock cannot go backwards (advance by {seconds})"
            raise ValueError(msg)
        with self._cond:
            self._now += seconds
            self._cond.notify_all()

    def sleep_until(self, deadline: float, stop: threading.Event) -> bool:
        with self._cond:
            while self._now < deadline:
                if stop.is_set():
                    return False
                # Short real waits so that ``stop`` is noticed without a notify.
                self._cond.wait(0.05)
        return not stop.is_set()
