"""One Spark Connect session per Spark bolt task, reopened when it breaks.

The session lives in the bolt's job thread only (Connect sessions are not
shared between threads here).  Calls use a short retry policy, so a dead
server fails the call within seconds; a broken session (server restarted:
``INVALID_HANDLE.SESSION_NOT_FOUND``, ``NO_ACTIVE_SESSION``; server gone:
``UNAVAILABLE``) is closed without talking to the server and the next
:meth:`SessionHolder.get` opens a new one and runs the bolt's setup hook on
it, which rebuilds what the old session held (cached tables, temp views).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import structlog

from squall.errors import SquallError

log = structlog.get_logger("squall.spark.SessionHolder")


class SessionUnavailable(SquallError):
    """No Spark Connect session could be opened (the server is down or unreachable)."""


def retry_policy(max_retries: int) -> Any:
    """spark.md: ~3 s to notice a dead server, instead of the default ~10 minutes."""
    from pyspark.sql.connect.client.retries import DefaultPolicy

    return DefaultPolicy(max_retries=max_retries, initial_backoff=100, backoff_multiplier=2.0,
                         max_backoff=2000, jitter=100, min_jitter_threshold=1000)


class SessionHolder:
    """Opens, probes and replaces the Connect session of one bolt task.

    ``url()`` gives the server's address when a session is opened (it may
    start a local server); ``setup(spark)`` runs on every new session.
    """

    def __init__(self, url: Callable[[], str], setup: Callable[[Any], None], *, max_retries: int = 5,
                 now: Callable[[], float] = time.monotonic, sleep: Callable[[float], bool] | None = None,
                 name: str = "spark-bolt") -> None:
        self._url = url
        self._setup = setup
        self.max_retries = max_retries
        self.now = now
        self._stopping = threading.Event()
        self._sleep = sleep or (lambda secs: not self._stopping.wait(secs))
        self.name = name
        self.session: Any = None
        self.opened = 0  # sessions opened so far (1 + reconnects)

    def get(self, deadline: float) -> Any:
        """The live session, opening one (with backoff) until ``deadline``."""
        if self.session is not None:
            return self.session
        delay = 0.2
        while True:
            try:
                return self._open()
            except Exception as e:  # server down or still starting: back off
                if self.now() + delay > deadline or self._stopping.is_set():
                    msg = f"cannot open a Spark Connect session: {_short(e)}"
                    raise SessionUnavailable(msg) from e
                log.info("Spark Connect server unreachable; retrying", error=_short(e), retry_in=delay)
                if not self._sleep(delay):
                    msg = "stopping"
                    raise SessionUnavailable(msg) from e
                delay = min(delay * 2, 5.0)

    def _open(self) -> Any:
        # pyspark's own entry point: it also marks the process as a Connect
        # client, which pyspark.sql.functions needs to build Connect columns.
        from pyspark.sql import SparkSession

        url = self._url()
        started = self.now()
        spark = SparkSession.builder.remote(url).create()
        try:
            spark.client.set_retry_policies([retry_policy(self.max_retries)])
            spark.range(1).collect()  # the server answers: the session is real
            self._setup(spark)
        except BaseException:
            self.discard(spark)
            raise
        self.session = spark
        self.opened += 1
        log.info("Spark Connect session opened", bolt=self.name, secs=round(self.now() - started, 2),
                 reconnect=self.opened > 1)
        return spark

    def check(self) -> bool:
        """After a failed job: is the session still good?  If not, drop it."""
        spark = self.session
        if spark is None:
            return False
        try:
            spark.range(1).collect()
            return True
        except Exception as e:  # noqa: BLE001 - any failure means a new session
            log.warning("Spark Connect session broken; a new one will be opened", error=_short(e))
            self.session = None
            self.discard(spark)
            return False

    def discard(self, spark: Any) -> None:
        """Close a session without a release RPC (its server may be gone)."""
        try:
            spark.release_session_on_close = False
            spark.stop()
        except Exception as e:  # noqa: BLE001 - best effort: the session is being dropped anyway
            log.debug("closing a dropped Spark session failed", error=_short(e))

    def close(self) -> None:
        """Release the session on the server (orderly shutdown)."""
        self._stopping.set()
        spark, self.session = self.session, None
        if spark is not None:
            try:
                spark.stop()
            except Exception:  # noqa: BLE001 - best effort
                self.discard(spark)

    def interrupt(self) -> None:
        """From another thread: stop waiting for a server."""
        self._stopping.set()


def _short(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}"
    first = text.strip().splitlines()[0] if text.strip() else type(e).__name__
    return first[:300]
