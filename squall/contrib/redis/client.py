"""Connections to Redis for Squall's connectors, and how they ride out a Redis that is down.

Every connector (spouts, state, sinks) gets its client from :func:`connect`,
which checks the server answers before returning: an unreachable Redis at
start is a :class:`RedisUnavailable` naming *what* wanted it and *where*
(the URL, password redacted), after a bounded exponential backoff.

Once connected, a failed command is not retried inside redis-py (its default
would block an executor for seconds, and would silently repeat an
``XREADGROUP`` whose reply was lost).  Callers decide instead:

* a committer or a store wraps its round trip in :func:`call_with_retry`
  (same backoff; the last error propagates, so a committer's batch fails and
  replays);
* a spout keeps a :class:`Backoff` and simply emits nothing until its next
  attempt is due, driven by the executor's clock (no sleeps in an executor).

redis-py reconnects by itself on the next command after a server restart.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from squall.errors import SquallError

if TYPE_CHECKING:
    import redis

T = TypeVar("T")

INSTALL_HINT = "pip install squall[redis]"


class RedisUnavailable(SquallError):
    """Redis could not be reached (the message names what wanted it, and where)."""


def import_redis() -> Any:
    """The ``redis`` module, or an ImportError saying how to install it."""
    try:
        import redis
    except ImportError as e:
        msg = f"squall.contrib.redis needs the redis client: {INSTALL_HINT}"
        raise ImportError(msg) from e
    return redis


def redact(url: str) -> str:
    """``url`` with any password replaced by ``***`` (for messages and logs)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def connection_errors() -> tuple[type[BaseException], ...]:
    """The errors that mean "Redis is not answering" (worth a retry), not a bad command."""
    redis = import_redis()
    return (redis.ConnectionError, redis.TimeoutError, OSError)


@dataclass
class Backoff:
    """Exponential delays: ``initial``, doubled each failure up to ``max_delay``.

    ``attempts`` bounds :func:`call_with_retry` and :func:`connect` (None:
    unbounded).  A spout uses :meth:`failed` / :meth:`ready` with its clock.
    """

    initial: float = 0.05
    max_delay: float = 2.0
    attempts: int | None = 8

    def __post_init__(self) -> None:
        if self.initial <= 0 or self.max_delay < self.initial:
            msg = f"a backoff needs 0 < initial <= max_delay, not {self.initial}, {self.max_delay}"
            raise ValueError(msg)
        if self.attempts is not None and self.attempts < 1:
            msg = f"a backoff needs at least 1 attempt, not {self.attempts}"
            raise ValueError(msg)
        self.failures = 0
        self.next_at = 0.0

    def delay(self, failures: int) -> float:
        """The wait after the ``failures``-th failure in a row (1-based)."""
        return min(self.max_delay, self.initial * 2 ** min(failures - 1, 30))

    def total(self) -> float:
        """The longest :func:`call_with_retry` waits in all before giving up."""
        if self.attempts is None:
            return float("inf")
        return sum(self.delay(n) for n in range(1, self.attempts))

    # -- non-blocking use, for executors ----------------------------------------
    def ready(self, now: float) -> bool:
        return now >= self.next_at

    def failed(self, now: float) -> float:
        """Record a failure at ``now``; returns the delay before the next attempt."""
        self.failures += 1
        delay = self.delay(self.failures)
        self.next_at = now + delay
        return delay

    def succeeded(self) -> None:
        self.failures = 0
        self.next_at = 0.0


def call_with_retry(fn: Callable[[], T], *, what: str, url: str, backoff: Backoff | None = None,
                    sleep: Callable[[float], None] = time.sleep) -> T:
    """``fn()``, retried on connection errors with ``backoff``; then a RedisUnavailable.

    Only connection errors are retried: a command Redis refused (wrong type,
    syntax) propagates at once.
    """
    backoff = backoff or Backoff()
    errors = connection_errors()
    refused = import_redis().AuthenticationError  # a ConnectionError that waiting will not cure
    failures = 0
    while True:
        try:
            return fn()
        except refused as e:
            msg = f"{what}: Redis at {redact(url)} refused the credentials: {e}"
            raise RedisUnavailable(msg) from e
        except errors as e:
            failures += 1
            if backoff.attempts is not None and failures >= backoff.attempts:
                msg = (f"{what}: cannot reach Redis at {redact(url)} after {failures} attempts "
                       f"over {backoff.total():.1f}s: {e}")
                raise RedisUnavailable(msg) from e
            sleep(backoff.delay(failures))


def client(url: str, *, socket_timeout: float | None = 5.0, **kwargs: Any) -> redis.Redis:
    """A client for ``url`` (redis:// or rediss:// or unix://) without redis-py's own retries.

    ``decode_responses`` stays off: stream fields are bytes until a scheme
    decides; the state store decodes its JSON text itself.  Replies are parsed
    by hiredis (the ``squall[redis]`` extra installs it; redis-py picks it up):
    a spout reading a stream spends most of its time parsing ``XREADGROUP``
    replies, and redis-py's pure-Python parser is several times slower.
    """
    redis = import_redis()
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    kwargs.setdefault("socket_connect_timeout", min(socket_timeout or 5.0, 5.0))
    # RESP2 replies: the shapes the connectors parse (RESP3 nests XREADGROUP's reply differently).
    kwargs.setdefault("protocol", 2)
    kwargs.setdefault("health_check_interval", 0)
    try:
        return redis.Redis.from_url(url, socket_timeout=socket_timeout, retry=Retry(NoBackoff(), 0),
                                    **kwargs)
    except ValueError as e:
        msg = f"not a Redis URL: {redact(url)}: {e}"
        raise ValueError(msg) from None


def connect(url: str, *, what: str, backoff: Backoff | None = None,
            sleep: Callable[[float], None] = time.sleep, **kwargs: Any) -> redis.Redis:
    """A client for ``url`` that has answered a PING, or a RedisUnavailable naming ``what``.

    ``what`` says who wants Redis ("RedisStore 'counts'", "spout 'events'
    task 3"), for the error.  PING is retried with ``backoff`` (default:
    8 attempts, 0.05 s doubling to 2 s, about 6 s in all).  Other keyword
    arguments go to :func:`client`.
    """
    conn = client(url, **kwargs)
    try:
        call_with_retry(conn.ping, what=what, url=url, backoff=backoff, sleep=sleep)
    except BaseException:
        conn.close()
        raise
    return conn
