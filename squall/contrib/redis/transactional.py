"""Transactional spouts over Redis Streams: each stream is a partition, a batch an entry id range.

    from squall.contrib.redis.transactional import RedisStreamPartitionedSpout

    clicks = RedisStreamPartitionedSpout.spec(stream="clicks:{}", partitions=4, batch_size=500)

Two kinds, as Storm's Kafka transactional spouts:

* :class:`RedisStreamPartitionedSpout` (a partitioned transactional spout):
  a batch's metadata is ``{"first", "last", "count"}``, the ids of its first
  and last entries and how many it holds, so a replay reads exactly the same
  entries back with ``XRANGE first last``.  Use it with
  :class:`~squall.state.TransactionalMap` committers.  If the range was
  trimmed away (``XTRIM``, ``MAXLEN``) before the replay, the batch cannot be
  replayed exactly: that is a :class:`ReplayLost` error, reported, and the
  transaction keeps failing until the data is back -- use the opaque spout
  for streams that are trimmed.
* :class:`RedisStreamOpaqueSpout` (an opaque partitioned spout): every batch
  starts right after the previous one's last id (``XRANGE (last``), so a
  replay reads whatever is there now: entries trimmed meanwhile are skipped
  (it resumes at the oldest remaining one), a stream deleted and recreated
  is read again from its start.  The metadata records what was actually
  read; with :class:`~squall.state.OpaqueMap` / :class:`~squall.state.OpaqueValue`
  committers the counts stay exact for the data that exists.

Options (``spec(...)``, the memory spouts' way): ``url`` (else the
topology conf's ``redis.url``), ``streams`` (a list) or ``stream`` (a
pattern with ``{}``) and ``partitions``, ``batch_size`` (entries per
partition per batch), ``start_id`` (where a partition never read starts:
``"-"``, the oldest entry), ``scheme`` and ``fields``, ``tx_field``,
``decode`` and ``dead_letter`` (below), ``poll_interval`` and
``idle_batch_secs`` (coordinator pacing, below).

Tuples are ``[attempt, stream, id, fields]`` (``fields`` a dict of str),
or with ``scheme`` -- a function, or ``"module:function"`` -- ``[attempt,
*scheme(fields)]`` declared as ``[tx_field, *fields]``.  A scheme that
returns None skips the entry; it must be deterministic, so that a replay
skips the same entries.  ``decode=False`` leaves field names and values
bytes (for the scheme, or in the default tuple).

An entry that is not UTF-8, or on which the scheme raises, is malformed and
handled as by every Redis spout (:mod:`squall.contrib.redis.entries`): left
out of the batch (and of every replay of it: the batch's metadata still
covers it, so a replay reads the same range and leaves out the same
entry), counted in ``redis.malformed``, reported once per task with its id,
and copied to the ``dead_letter`` stream if the spec names one.  Redis not
answering that copy fails the batch, which is replayed and copies it then.

One connection per spout instance, opened on first use; one ``XRANGE`` per
partition per batch.  When Redis does not answer, the batch fails (a
:class:`~squall.errors.FailedException` with the reason, logged) and the
coordinator replays it; the next attempts are spaced by an exponential
backoff, so an outage neither loses a tuple nor spins.

The coordinator starts a new transaction only when a stream has entries it
has not yet started a transaction for: it polls each stream's
``entries-added`` counter (``XINFO STREAM``) every ``poll_interval``
seconds and subtracts ``batch_size`` per partition per transaction; it also
starts one every ``idle_batch_secs`` while nothing seems new, in case its
estimate fell short.  An idle topology thus costs one ``XINFO`` per stream
per poll, not a stream of empty transactions.  A restarted coordinator does
not know how far the emitters got, so it counts every entry a stream holds
as new: up to ``length / batch_size`` transactions may then come out empty.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from squall.contrib.redis.client import Backoff, client, connection_errors, import_redis, redact
from squall.contrib.redis.entries import dead_letter, decode_fields, malformed
from squall.errors import FailedException, SquallError, TopologyValidationError
from squall.topology.component import ComponentSpec, spout_spec
from squall.topology.loading import resolve_class
from squall.transactional.spouts import (
    Emit,
    OpaquePartitionedTransactionalSpout,
    PartitionedTransactionalSpout,
)

DEFAULT_FIELDS = ["stream", "id", "fields"]
SetAside = tuple[str, dict[Any, Any], Exception]  # a malformed entry: id, fields as read, why


class ReplayLost(SquallError):
    """A partitioned batch's entries are no longer all in the stream: it cannot be replayed exactly."""


def stream_names(streams: Any, stream: Any, partitions: Any, where: str) -> list[str]:
    """The partitions' stream names: ``streams`` as given, or ``stream`` formatted with 0..partitions-1."""
    if (streams is None) == (stream is None):
        msg = f"{where}: give either streams=[names] or stream='pattern:{{}}' with partitions=N"
        raise TopologyValidationError(msg)
    if streams is not None:
        if isinstance(streams, str):
            streams = [streams]
        names = list(streams)
        if partitions is not None and partitions != len(names):
            msg = f"{where}: partitions={partitions!r} but {len(names)} streams are listed"
            raise TopologyValidationError(msg)
    else:
        if not isinstance(stream, str) or "{}" not in stream:
            msg = f"{where}: stream must be a pattern containing '{{}}' (e.g. 'clicks:{{}}'), got {stream!r}"
            raise TopologyValidationError(msg)
        if partitions is None:
            partitions = 1
        if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
            msg = f"{where}: partitions must be an integer >= 1, got {partitions!r}"
            raise TopologyValidationError(msg)
        names = [stream.format(p) for p in range(partitions)]
    if not names or not all(isinstance(n, str) and n for n in names):
        msg = f"{where}: streams must be non-empty names, got {names!r}"
        raise TopologyValidationError(msg)
    if len(set(names)) != len(names):
        msg = f"{where}: a stream is listed twice: {names!r}"
        raise TopologyValidationError(msg)
    return names


def scheme_path(scheme: Any, where: str) -> str | None:
    """``scheme`` as a ``"module:function"`` reference that travels with the topology."""
    if scheme is None:
        return None
    if isinstance(scheme, str):
        module, _, name = scheme.partition(":")
        if not module or not name:
            msg = f"{where}: scheme {scheme!r} must look like 'package.module:function'"
            raise TopologyValidationError(msg)
        return scheme
    qualname = getattr(scheme, "__qualname__", "")
    module = getattr(scheme, "__module__", None)
    if not callable(scheme) or not module or not qualname or "<" in qualname:
        msg = (f"{where}: scheme must be a module-level function or 'module:function', "
               f"got {scheme!r} (lambdas and nested functions cannot travel to workers)")
        raise TopologyValidationError(msg)
    return f"{module}:{qualname}"


def _positive(value: Any, name: str, where: str, kind: type | tuple[type, ...] = int) -> Any:
    if isinstance(value, bool) or not isinstance(value, kind) or value <= 0:
        msg = f"{where}: {name} must be a number > 0, got {value!r}"
        raise TopologyValidationError(msg)
    return value


def _text(value: Any) -> str:
    """An entry id or an XINFO field: ASCII, always."""
    return value.decode("ascii") if isinstance(value, bytes) else str(value)


def _id_key(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


class _RedisStreams:
    """What both kinds share: options, the connection, reads, and the coordinator's pacing."""

    options: dict[str, Any]
    conf: dict[str, Any]
    clock: Any
    logger: Any
    report_error: Callable[[BaseException], None]
    stopping: Callable[[], bool]
    sleep: Callable[[float], None] = staticmethod(time.sleep)

    @classmethod
    def spec(cls, name: str | None = None, par: int = 1, tasks: int | None = None,
             config: Mapping[str, Any] | None = None, *, url: str | None = None,
             streams: Any = None, stream: str | None = None, partitions: int | None = None,
             batch_size: int = 1000, start_id: str = "-", scheme: Any = None, fields: Any = None,
             tx_field: str = "tx", decode: bool = True, dead_letter: str | None = None,
             poll_interval: float = 0.1, idle_batch_secs: float = 5.0,
             **options: Any) -> ComponentSpec:
        """Place the spout; ``par`` is the emitters' parallelism (partition p goes to emitter p mod par)."""
        where = f"{cls.__name__}.spec"  # type: ignore[attr-defined]
        names = stream_names(streams, stream, partitions, where)
        _positive(batch_size, "batch_size", where)
        _positive(poll_interval, "poll_interval", where, (int, float))
        _positive(idle_batch_secs, "idle_batch_secs", where, (int, float))
        if url is not None and not isinstance(url, str):
            msg = f"{where}: url must be a redis:// URL, got {url!r}"
            raise TopologyValidationError(msg)
        if not isinstance(decode, bool):
            msg = f"{where}: decode must be True or False, got {decode!r}"
            raise TopologyValidationError(msg)
        if dead_letter is not None and (not isinstance(dead_letter, str) or not dead_letter):
            msg = f"{where}: dead_letter must be a stream name, got {dead_letter!r}"
            raise TopologyValidationError(msg)
        path = scheme_path(scheme, where)
        if path is None:
            if fields is not None:
                msg = f"{where}: fields name a scheme's values; without a scheme they are {DEFAULT_FIELDS}"
                raise TopologyValidationError(msg)
            fields = DEFAULT_FIELDS
        elif fields is None:
            msg = f"{where}: a scheme needs fields=[...], the names of the values it returns"
            raise TopologyValidationError(msg)
        fields = [fields] if isinstance(fields, str) else list(fields)
        options = {**options, "url": url, "streams": names, "batch_size": batch_size, "start_id": start_id,
                   "scheme": path, "decode": decode, "dead_letter": dead_letter,
                   "poll_interval": poll_interval, "idle_batch_secs": idle_batch_secs}
        return spout_spec(cls, f"transactional spout {cls.__name__}", name, par, tasks, config,  # type: ignore[attr-defined]
                          options, outputs=[tx_field, *fields])

    # -- both sides ----------------------------------------------------------------

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        opts = self.options
        self.url: str = opts.get("url") or conf.get("redis.url") or ""
        if not self.url:
            msg = f"{type(self).__name__}: no Redis URL: give spec(url=...) or --conf redis.url=redis://..."
            raise TopologyValidationError(msg)
        self.streams: list[str] = list(opts["streams"])
        self.batch_size: int = opts["batch_size"]
        self.start_id: str = opts.get("start_id") or "-"
        self.scheme: Callable[[dict[str, str]], Any] | None = (
            resolve_class(opts["scheme"]) if opts.get("scheme") else None)
        self.decode: bool = opts.get("decode", True)
        self.dead_letter: str | None = opts.get("dead_letter")
        self.what = f"{type(self).__name__} task {getattr(context, 'task_id', '?')}"
        self._malformed = self.metrics.counter("redis.malformed")
        # Per partition, the id of the last malformed entry reported (and copied): one at
        # or before it is met again only in a replay, and not reported again.
        self._set_aside_upto: dict[int, str] = {}
        self._conn: Any = None
        self._redis = import_redis()
        self.backoff = Backoff(attempts=None)  # Redis not answering
        self.replay_backoff = Backoff(attempts=None)  # a partitioned batch that cannot be replayed
        # coordinator side
        self.poll_interval: float = opts.get("poll_interval", 0.1)
        self.idle_batch_secs: float = opts.get("idle_batch_secs", 5.0)
        self._added: list[int | None] = [None] * len(self.streams)
        self._backlog: list[int] = [0] * len(self.streams)
        self._next_poll = 0.0
        self._last_start = self.clock.now()

    def connection(self) -> Any:
        if self._conn is None:
            self._conn = client(self.url, socket_timeout=5.0, single_connection_client=True)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def num_partitions(self) -> int:
        # Called once per new transaction, on the coordinator: each reads up to batch_size per stream.
        self._backlog = [max(0, n - self.batch_size) for n in self._backlog]
        self._last_start = self.clock.now()
        return len(self.streams)

    def is_ready(self) -> bool:
        """Start a transaction when a stream has entries no transaction was started for yet."""
        if any(n > 0 for n in self._backlog):
            return True
        now = self.clock.now()
        if now < self._next_poll or not self.backoff.ready(now):
            return False
        self._next_poll = now + self.poll_interval
        try:
            infos = self._stream_infos()
        except connection_errors() as e:
            delay = self.backoff.failed(now)
            self.logger.warning("Redis unreachable; no new transaction until it answers",
                                url=redact(self.url), error=str(e), retry_in=round(delay, 2))
            return False
        self.backoff.succeeded()
        for p, (added, length) in enumerate(infos):
            prev = self._added[p]
            # First look (or the stream was recreated): assume everything in it is new.
            self._backlog[p] = length if prev is None or added < prev else self._backlog[p] + added - prev
            self._added[p] = added
        return any(n > 0 for n in self._backlog) or now - self._last_start >= self.idle_batch_secs

    def _stream_infos(self) -> list[tuple[int, int]]:
        pipe = self.connection().pipeline(transaction=False)
        for name in self.streams:
            pipe.xinfo_stream(name)
        out = []
        for reply in pipe.execute(raise_on_error=False):
            if isinstance(reply, connection_errors()):
                raise reply
            if isinstance(reply, Exception):  # no such key yet: nothing to read
                out.append((0, 0))
            else:
                out.append((int(reply.get("entries-added", reply["length"])), int(reply["length"])))
        return out

    # -- emitter side ----------------------------------------------------------------

    def wait_out(self, backoff: Backoff) -> None:
        """Space the replays of a batch that keeps failing: wait out ``backoff`` (at most 1 s)."""
        now = self.clock.now()
        if backoff.ready(now):
            return
        deadline = time.monotonic() + min(backoff.next_at - now, 1.0)
        while time.monotonic() < deadline and not self.stopping():
            self.sleep(0.02)

    def call(self, partition: int, fn: Callable[[Any], Any]) -> Any:
        """``fn(connection)``; Redis not answering fails the batch (replayed after a backoff)."""
        self.wait_out(self.backoff)
        try:
            result = fn(self.connection())
        except connection_errors() as e:
            delay = self.backoff.failed(self.clock.now())
            msg = (f"{self.what}: Redis at {redact(self.url)} did not answer reading stream "
                   f"{self.streams[partition]!r}: {e}; the batch fails and is replayed "
                   f"(next try in {delay:.2f}s)")
            self.logger.warning(msg)
            raise FailedException(msg) from e
        except self._redis.ResponseError as e:
            msg = f"{self.what}: Redis refused to read stream {self.streams[partition]!r}: {e}"
            raise SquallError(msg) from e
        self.backoff.succeeded()
        return result

    def read_after(self, partition: int, last: str | None) -> list[tuple[str, dict[Any, Any]]]:
        """Up to batch_size entries after ``last`` (exclusive; None: from start_id, inclusive)."""
        name = self.streams[partition]
        start = self.start_id if last is None else f"({last}"
        entries = self.call(partition, lambda c: c.xrange(name, start, "+", count=self.batch_size))
        if entries or last is None:
            return [(_text(i), f) for i, f in entries]
        # Nothing after `last`: caught up, unless the stream was deleted and recreated (or
        # Redis lost it) and now ends before `last`: then it is a new stream, read from its start.
        info = self.call(partition, lambda c: c.xinfo_stream(name) if c.exists(name) else None)
        if info is None or _id_key(_text(info["last-generated-id"])) >= _id_key(last):
            return []
        self.logger.warning("stream ends before the last id read: recreated; reading it from the start",
                            stream=name, last_read=last, last_generated=_text(info["last-generated-id"]))
        self._set_aside_upto.pop(partition, None)  # its ids begin again: new entries
        entries = self.call(partition, lambda c: c.xrange(name, "-", "+", count=self.batch_size))
        return [(_text(i), f) for i, f in entries]

    def emit_entries(self, attempt: Any, emit: Emit, partition: int,
                     entries: list[tuple[str, dict[Any, Any]]]) -> None:
        name = self.streams[partition]
        scheme, decode = self.scheme, self.decode
        bad: list[SetAside] = []
        for entry_id, raw in entries:
            try:
                fields = decode_fields(raw) if decode else raw
                values = [name, entry_id, fields] if scheme is None else scheme(fields)
            except Exception as e:  # noqa: BLE001 - a malformed entry is skipped, in every replay
                bad.append((entry_id, raw, e))
                continue
            if values is not None:
                emit([attempt, *values])
        if bad:
            self.set_aside(attempt, partition, bad)

    def set_aside(self, attempt: Any, partition: int, bad: list[SetAside]) -> None:
        """Count, report and copy to the dead-letter stream the malformed entries of a
        batch not met before (see the module's docstring)."""
        name = self.streams[partition]
        upto = self._set_aside_upto.get(partition)
        new = [b for b in bad if upto is None or _id_key(b[0]) > _id_key(upto)]
        if not new:
            return  # a replay: reported (and copied) when first read
        refused: Exception | None = None
        if self.dead_letter:
            letters = [dead_letter(raw, name, entry_id, e) for entry_id, raw, e in new]
            replies = self.call(partition, lambda c: self._copy(c, letters))  # Redis down: batch replayed
            refused = next((r for r in replies if isinstance(r, Exception)), None)
        self._set_aside_upto[partition] = new[-1][0]
        self._malformed.inc(len(new))
        copied = self.dead_letter if refused is None else None
        skipped = f", left out of txid {getattr(attempt, 'txid', attempt)}'s batch"
        for entry_id, _raw, e in new:
            self.report_error(malformed(self.what, name, entry_id, e, copied, skipped))
        if refused is not None:
            msg = (f"{self.what}: Redis refused to add {len(new)} malformed entries of stream {name!r} "
                   f"to dead-letter stream {self.dead_letter!r}: {refused}")
            self.report_error(SquallError(msg))

    def _copy(self, conn: Any, letters: list[dict[Any, Any]]) -> list[Any]:
        pipe = conn.pipeline(transaction=False)
        for letter in letters:
            pipe.xadd(self.dead_letter, letter)
        replies = pipe.execute(raise_on_error=False)
        for reply in replies:
            if isinstance(reply, connection_errors()):
                raise reply
        return replies

    @staticmethod
    def metadata(entries: list[tuple[str, Any]], last: str | None) -> dict[str, Any]:
        if not entries:
            return {"first": None, "last": last, "count": 0}
        return {"first": entries[0][0], "last": entries[-1][0], "count": len(entries)}


class RedisStreamPartitionedSpout(_RedisStreams, PartitionedTransactionalSpout):
    """Each stream a partition; a batch's id range is stored, and replayed exactly (see the module doc)."""

    def emit_new_batch(self, attempt: Any, emit: Emit, partition: int, last_metadata: Any) -> Any:
        last = None if last_metadata is None else last_metadata["last"]
        entries = self.read_after(partition, last)
        self.emit_entries(attempt, emit, partition, entries)
        return self.metadata(entries, last)

    def emit_batch(self, attempt: Any, emit: Emit, partition: int, metadata: Any) -> None:
        count = metadata["count"]
        if not count:
            return
        name, first, last = self.streams[partition], metadata["first"], metadata["last"]
        self.wait_out(self.replay_backoff)
        entries = self.call(partition, lambda c: c.xrange(name, first, last, count=count + 1))
        got = [(_text(i), f) for i, f in entries]
        if len(got) != count or got[0][0] != first or got[-1][0] != last:
            self.replay_backoff.failed(self.clock.now())  # it fails until the data is back: not in a loop
            msg = (f"{self.what}: txid {attempt.txid} read entries {first}..{last} ({count}) of stream "
                   f"{name!r}, but only {len(got)} of them are left (trimmed or deleted), so the batch "
                   "cannot be replayed exactly as a transactional spout must; use RedisStreamOpaqueSpout "
                   "with OpaqueMap/OpaqueValue committers for streams that are trimmed")
            raise ReplayLost(msg)
        self.replay_backoff.succeeded()
        self.emit_entries(attempt, emit, partition, got)


class RedisStreamOpaqueSpout(_RedisStreams, OpaquePartitionedTransactionalSpout):
    """Each stream a partition; every batch starts after the previous one's last id (see the module doc)."""

    def emit_batch(self, attempt: Any, emit: Emit, partition: int, last_metadata: Any) -> Any:
        last = None if last_metadata is None else last_metadata["last"]
        entries = self.read_after(partition, last)
        self.emit_entries(attempt, emit, partition, entries)
        return self.metadata(entries, last)
