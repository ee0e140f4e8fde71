"""RedisStreamSpout: Redis Streams read at least once through a consumer group.

Redis keeps each entry a consumer group has delivered in the consumer's
pending entries list (PEL) until ``XACK``: the broker holds the tuple, as
Storm's reliability model wants.  So the spout

* reads with ``XREADGROUP`` as consumer ``<component>-<task index>``, a name
  that outlives the worker: a restarted task first re-reads its own PEL
  (id ``0``), then new entries (``>``);
* emits each entry with ``(stream, entry id)`` as its message id;
* ``XACK``\\s acked entries in batches, sent with the next read or when the
  batch is full or a few ms old -- never a round trip per ack;
* replays a failed entry by ``XCLAIM``\\ing it back (which also resets its
  idle time, so no other task takes it meanwhile);
* every ``claim_every_secs`` takes over, with ``XAUTOCLAIM``, entries idle
  longer than ``claim_idle_secs``: those of a consumer that died for good;
* skips a malformed entry (not UTF-8, or its scheme raised): counts it,
  reports it as a component error, copies it to the ``dead_letter`` stream if
  one is set, and acks it -- as every Redis spout does
  (:mod:`squall.contrib.redis.entries`).

Redis down (at start or later) never kills the worker: the spout reports the
error, emits nothing, and tries again after an exponential backoff measured
on the executor's clock.  Nothing is lost meanwhile: unacked entries stay in
the PEL, a read whose reply was lost is found again by re-reading the PEL,
and acks wait in the buffer (``XACK`` is idempotent).

Options of :meth:`RedisStreamSpout.spec` (defaults in :data:`DEFAULTS`):

``url``
    The Redis; default: the topology conf's ``redis.url``.
``streams``, ``group``
    Required.  ``streams`` is a stream name or a list of them.
``consumer``
    The consumer name's prefix; the task index is appended.  Default: the component.
``start_id``
    Where a group created here starts: ``"0"`` (the whole stream) or ``"$"`` (new entries only).
``count``
    Entries read per stream per ``XREADGROUP``.
``block_ms``
    How long a read waits for new entries, used only when the last read found
    none (a busy spout never blocks).  Small: it holds up the executor.
``ack_batch``, ``ack_flush_ms``
    Acks are sent once this many are buffered, or the oldest is this old.
``claim_idle_secs``
    An entry idle this long is taken over from its consumer.  Default:
    twice ``topology.message.timeout.secs``, because the executor fails a
    tree between one and two timeouts after its emit: a live task replays
    its own entries before another takes them.
``claim_every_secs``
    How often ``XAUTOCLAIM`` runs.
``scheme``
    ``f(stream, entry_id, fields) -> values`` (a callable, or
    ``"module:function"`` on a cluster); None skips (and acks) the entry.
    Default: ``[stream, id, fields]``.  Give ``outputs=`` to match.
``decode``
    Field names and values are UTF-8 decoded for the scheme (an entry that
    is not UTF-8 is malformed, never turned into replacement characters).
    False: the scheme (or the default tuple) gets bytes.
``dead_letter``
    A stream receiving malformed entries: their fields, plus ``squall.stream``,
    ``squall.id`` and ``squall.error``.
``backoff_initial``, ``backoff_max``
    Seconds between attempts while Redis is down: doubling from initial to max.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from squall.contrib.redis.client import (
    Backoff,
    RedisUnavailable,
    client,
    connection_errors,
    redact,
)
from squall.contrib.redis.entries import dead_letter, decode_fields, malformed
from squall.errors import SquallError, TopologyValidationError
from squall.topology.component import ComponentSpec, Spout, spout_spec

DEFAULTS: dict[str, Any] = {
    "consumer": None,
    "start_id": "0",
    "count": 256,
    "block_ms": 5,
    "ack_batch": 512,
    "ack_flush_ms": 5.0,
    "claim_idle_secs": None,
    "claim_every_secs": 5.0,
    "scheme": None,
    "decode": True,
    "dead_letter": None,
    "backoff_initial": 0.05,
    "backoff_max": 5.0,
}
REQUIRED = ("streams", "group")

Entry = tuple[str, str, Any]  # (stream, entry id, fields)
MsgId = tuple[str, str]


def default_scheme(stream: str, entry_id: str, fields: Any) -> list[Any]:
    return [stream, entry_id, fields]


def _resolve_scheme(scheme: Any) -> Callable[[str, str, Any], Any]:
    if scheme is None:
        return default_scheme
    if isinstance(scheme, str):
        from squall.topology.loading import resolve_class

        scheme = resolve_class(scheme)
    if not callable(scheme):
        msg = f"a RedisStreamSpout scheme must be callable or 'module:function', not {scheme!r}"
        raise TopologyValidationError(msg)
    return scheme


class RedisStreamSpout(Spout):
    """At-least-once spout over Redis Streams consumer groups (see the module's docstring)."""

    outputs = ["stream", "id", "fields"]

    @classmethod
    def spec(cls, name: str | None = None, par: int = 1, tasks: int | None = None,  # type: ignore[override]
             config: Mapping[str, Any] | None = None, **options: Any) -> ComponentSpec:
        where = f"spout {cls.__name__}"
        missing = [key for key in REQUIRED if not options.get(key)]
        if missing:
            msg = f"{where} needs {', '.join(missing)}"
            raise TopologyValidationError(msg)
        unknown = set(options) - set(DEFAULTS) - set(REQUIRED) - {"url", "outputs"}
        if unknown:
            known = sorted(["url", *REQUIRED, *DEFAULTS])
            msg = f"{where}: unknown options {sorted(unknown)}; known: {known}"
            raise TopologyValidationError(msg)
        if isinstance(options["streams"], str):
            options["streams"] = [options["streams"]]
        if options.get("scheme") is not None:
            _resolve_scheme(options["scheme"])  # fail at definition time, not in the worker
        return spout_spec(cls, where, name, par, tasks, config, options)

    # -- lifecycle ---------------------------------------------------------------
    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        opts = {**DEFAULTS, **self.options}
        self.url: str = opts.get("url") or conf.get("redis.url") or ""
        if not self.url:
            msg = f"{type(self).__name__}: no Redis URL: give spec(url=...) or --conf redis.url=redis://..."
            raise TopologyValidationError(msg)
        streams = opts["streams"]
        self.streams: list[str] = [streams] if isinstance(streams, str) else list(streams)
        self.group: str = opts["group"]
        prefix = opts["consumer"] or context.component_id
        self.consumer = f"{prefix}-{context.this_task_index}"
        self.start_id = opts["start_id"]
        self.count = int(opts["count"])
        self.block_ms = int(opts["block_ms"])
        self.ack_batch = int(opts["ack_batch"])
        self.ack_flush_secs = float(opts["ack_flush_ms"]) / 1000.0
        claim_idle = opts["claim_idle_secs"]
        if claim_idle is None:
            claim_idle = 2 * float(conf.get("topology.message.timeout.secs", 30))
        self.claim_idle_ms = int(claim_idle * 1000)
        self.claim_every = float(opts["claim_every_secs"])
        self.scheme = _resolve_scheme(opts["scheme"])
        self.decode = bool(opts["decode"])
        self._default_scheme = self.scheme is default_scheme and self.decode
        self.dead_letter: str | None = opts["dead_letter"]
        self.what = f"spout {context.component_id!r} task {context.task_id} (consumer {self.consumer!r})"
        self.backoff = Backoff(float(opts["backoff_initial"]), float(opts["backoff_max"]), attempts=None)

        self._errors = connection_errors()
        self._names = {s.encode(): s for s in self.streams}
        self._buffer: deque[Entry] = deque()
        # Per stream, the ids delivered to this task and not yet XACKed: never emitted twice at once.
        self._held: dict[str, set[str]] = {s: set() for s in self.streams}
        self._acks: dict[str, list[str]] = {s: [] for s in self.streams}
        self._n_acks = 0
        self._ack_deadline = 0.0
        self._dead: list[tuple[str, dict[Any, Any]]] = []
        self._replay: list[MsgId] = []
        # Re-read this consumer's own PEL from these ids first (None: done, read new entries).
        self._history: dict[str, str | None] = dict.fromkeys(self.streams, "0")
        self._claim_cursor = dict.fromkeys(self.streams, "0-0")
        self._next_claim = 0.0
        self._last_empty = False
        self._groups_ready = False
        self._down = False
        self._refused = False
        self.acked = 0  # entries XACKed by this task: its progress
        self._claimed = self.metrics.counter("redis.claimed")  # taken over from other consumers
        self._malformed_count = self.metrics.counter("redis.malformed")
        self._redis_errors = self.metrics.counter("redis.errors")
        self.metrics.gauge("redis.acked", lambda: self.acked)
        self.metrics.gauge("redis.held", lambda: sum(map(len, self._held.values())))
        self._redis = client(self.url, socket_timeout=max(5.0, self.block_ms / 1000.0 + 5.0))
        self._attempt(self._ensure_groups)

    def close(self) -> None:
        try:
            if self._n_acks or self._dead:
                self._flush_acks()
        except self._errors:
            pass  # what is not acked stays pending, and replays to this consumer's successor
        finally:
            self._redis.close()

    def deactivate(self) -> None:
        if self._n_acks or self._dead:
            self._attempt(self._flush_acks)

    def progress(self) -> float:
        return float(self.acked)

    # -- the executor's calls ------------------------------------------------------
    def next_tuple(self) -> None:
        buffer = self._buffer
        if self._n_acks and buffer and self.clock.now() >= self._ack_deadline:
            # Acks wait for the next read, but no longer than ack_flush_ms while the buffer lasts.
            self._ack_deadline = self.clock.now() + self.ack_flush_secs
            if self.backoff.ready(self.clock.now()):
                self._attempt(self._flush_acks)
        while True:
            if not buffer and (not self.backoff.ready(self.clock.now()) or not self._attempt(self._fill)
                               or not buffer):
                return
            stream, entry_id, fields = buffer.popleft()
            try:
                if self._default_scheme:  # the common case, inlined: it runs for every entry
                    values = [stream, entry_id, {k.decode(): v.decode() for k, v in fields.items()}]
                else:
                    values = self.scheme(stream, entry_id, decode_fields(fields) if self.decode else fields)
            except Exception as e:  # noqa: BLE001 - a bad entry is reported and set aside, never fatal
                self._malformed(stream, entry_id, fields, e)
                continue
            if values is None:
                self._ack(stream, entry_id)
                continue
            self.emit(values, (stream, entry_id))
            return

    def ack(self, msg_id: MsgId) -> None:
        self._ack(*msg_id)
        if self._n_acks >= self.ack_batch and self.backoff.ready(self.clock.now()):
            self._attempt(self._flush_acks)

    def fail(self, msg_id: MsgId) -> None:
        self._replay.append(msg_id)

    # -- internals -----------------------------------------------------------------------
    def _ack(self, stream: str, entry_id: str) -> None:
        # Still held until the XACK lands: a PEL re-read meanwhile must not emit it again.
        if not self._n_acks:
            self._ack_deadline = self.clock.now() + self.ack_flush_secs
        self._acks[stream].append(entry_id)
        self._n_acks += 1

    def _attempt(self, step: Callable[[], Any]) -> bool:
        """Run one step against Redis; on a connection error report it and back off (False)."""
        try:
            step()
        except self._errors as e:
            delay = self.backoff.failed(self.clock.now())
            self._redis_errors.inc()
            # What was read but whose reply was lost is in this consumer's PEL: read it again.
            self._history = dict.fromkeys(self.streams, "0")
            if not self._down or self.backoff.failures % 10 == 0:
                msg = (f"{self.what}: cannot reach Redis at {redact(self.url)}: {e}; "
                       f"retrying in {delay:.2f}s (failure {self.backoff.failures})")
                self.report_error(RedisUnavailable(msg))
            self._down = True
            return False
        if self._down:
            self.logger.info("redis reachable again", url=redact(self.url), consumer=self.consumer)
            self._down = False
        if self._refused:  # Redis answered, but refused a command: slow down as for an outage
            self._refused = False
            self.backoff.failed(self.clock.now())
        else:
            self.backoff.succeeded()
        return True

    def _ensure_groups(self) -> None:
        pipe = self._redis.pipeline(transaction=False)
        for stream in self.streams:
            pipe.xgroup_create(stream, self.group, id=self.start_id, mkstream=True)
        for stream, result in zip(self.streams, pipe.execute(raise_on_error=False), strict=True):
            if isinstance(result, Exception) and "BUSYGROUP" not in str(result):
                if isinstance(result, self._errors):
                    raise result
                msg = f"{self.what}: cannot create group {self.group!r} on stream {stream!r}: {result}"
                raise SquallError(msg) from result
        self._groups_ready = True

    def _queue_acks(self, pipe: Any) -> tuple[list[Any], dict[str, list[str]], int]:
        """Queue dead letters, then XACKs, on ``pipe``; returns what to restore if it fails."""
        dead, acks, n = self._dead, self._acks, self._n_acks
        for target, fields in dead:
            pipe.xadd(target, fields)
        for stream, ids in acks.items():
            if ids:
                pipe.xack(stream, self.group, *ids)
        self._dead, self._acks, self._n_acks = [], {s: [] for s in self.streams}, 0
        return dead, acks, n

    def _restore_acks(self, saved: tuple[list[Any], dict[str, list[str]], int]) -> None:
        dead, acks, n = saved
        self._dead = dead + self._dead
        for stream, ids in acks.items():
            self._acks[stream][:0] = ids
        if not self._n_acks:
            self._ack_deadline = self.clock.now() + self.ack_flush_secs
        self._n_acks += n

    def _flush_acks(self) -> None:
        pipe = self._redis.pipeline(transaction=False)
        saved = self._queue_acks(pipe)
        try:
            results = self._execute(pipe)
        except BaseException:
            self._restore_acks(saved)
            raise
        self._acked(saved, results[:len(saved[0]) + sum(1 for ids in saved[1].values() if ids)])

    def _execute(self, pipe: Any) -> list[Any]:
        """``pipe``'s replies; a connection error raises (for :meth:`_attempt`), a refused command
        comes back in its place."""
        results = pipe.execute(raise_on_error=False)
        for r in results:
            if isinstance(r, self._errors):
                raise r
        return results

    def _acked(self, saved: tuple[list[Any], dict[str, list[str]], int], replies: list[Any]) -> None:
        """The dead letters and XACKs of ``saved`` were sent, with these replies: count the acks,
        stop holding their entries, report what Redis refused."""
        for r in replies:
            if isinstance(r, Exception):
                self._report_response(r)
                break
        self.acked += sum(r for r in replies[len(saved[0]):] if isinstance(r, int))
        for stream, ids in saved[1].items():
            self._held[stream].difference_update(ids)

    def _fill(self) -> None:
        """One round trip: acks, replays, reclaims and a read, in one pipeline."""
        if not self._groups_ready:
            self._ensure_groups()
        pipe = self._redis.pipeline(transaction=False)
        saved = self._queue_acks(pipe)
        replay, self._replay = self._replay, []
        by_stream: dict[str, list[str]] = {}
        for stream, entry_id in replay:
            by_stream.setdefault(stream, []).append(entry_id)
        for stream, ids in by_stream.items():
            pipe.xclaim(stream, self.group, self.consumer, 0, ids)
        now = self.clock.now()
        claiming = now >= self._next_claim and self._history_done()
        if claiming:
            for stream in self.streams:
                pipe.xautoclaim(stream, self.group, self.consumer, self.claim_idle_ms,
                                start_id=self._claim_cursor[stream], count=self.count)
        history = {s: i for s, i in self._history.items() if i is not None}
        if history:
            pipe.xreadgroup(self.group, self.consumer, history, count=self.count)
        else:
            block = self.block_ms if self._last_empty and not replay and self.block_ms > 0 else None
            pipe.xreadgroup(self.group, self.consumer, dict.fromkeys(self.streams, ">"), count=self.count,
                            block=block)
        try:
            results = self._execute(pipe)
        except BaseException:
            self._restore_acks(saved)
            self._replay[:0] = replay
            raise
        i = len(saved[0]) + sum(1 for ids in saved[1].values() if ids)
        self._acked(saved, results[:i])
        found = 0
        for stream, ids in by_stream.items():
            claimed = results[i]
            i += 1
            if isinstance(claimed, Exception):
                self._replay.extend((stream, entry_id) for entry_id in ids)
                continue
            replayed = {self._id(entry_id) for entry_id, _ in claimed}
            for entry_id in ids:  # not returned: acked by another consumer meanwhile, or deleted
                if entry_id not in replayed:
                    self._held[stream].discard(entry_id)
            found += self._take(stream, claimed, skip_held=False)
        if claiming:
            self._next_claim = now + self.claim_every
            for stream in self.streams:
                result = results[i]
                i += 1
                if isinstance(result, Exception):
                    self._report_response(result)
                    continue
                cursor = self._claim_cursor[stream] = self._id(result[0])
                if cursor != "0-0":
                    self._next_claim = now  # more idle entries past the cursor: go on with the next read
                taken = self._take(stream, result[1], skip_held=True)
                self._claimed.inc(taken)
                found += taken
        read = results[i]
        if isinstance(read, Exception):
            self._report_response(read)
            return
        for name, entries in read or []:
            stream = self._names[name]
            if history:
                if entries:
                    self._history[stream] = self._id(entries[-1][0])
                else:
                    self._history[stream] = None
            found += self._take(stream, entries, skip_held=bool(history))  # new entries are never held
        if history:
            for stream in history:  # a stream absent from the reply has no history left
                if all(self._names[name] != stream for name, _ in read or []):
                    self._history[stream] = None
        self._last_empty = found == 0 and not history

    def _history_done(self) -> bool:
        return all(i is None for i in self._history.values())

    @staticmethod
    def _id(entry_id: Any) -> str:
        return entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)

    def _take(self, stream: str, entries: Any, skip_held: bool) -> int:
        """Buffer ``entries`` delivered to this consumer; returns how many.

        ``skip_held``: leave out entries this task already holds (buffered, in
        flight or waiting for a replay), so a re-read of the PEL or a reclaim
        never emits one twice.  Replays (XCLAIM of failed ones) take them all.
        """
        held = self._held[stream]
        append = self._buffer.append
        n = 0
        for raw_id, fields in entries:
            entry_id = raw_id.decode()
            if skip_held and entry_id in held:
                continue
            if fields is None:  # in the PEL but trimmed from the stream: nothing left to replay
                self._ack(stream, entry_id)
                continue
            held.add(entry_id)
            append((stream, entry_id, fields))
            n += 1
        return n

    def _report_response(self, error: Exception) -> None:
        if "NOGROUP" in str(error):
            # The stream or group is gone (Redis lost its data, or someone deleted it): create them again.
            self._groups_ready = False
            self._history = dict.fromkeys(self.streams, "0")
        msg = f"{self.what}: Redis refused a command: {error}"
        self.report_error(SquallError(msg))
        self._refused = True

    def _malformed(self, stream: str, entry_id: str, fields: Any, error: Exception) -> None:
        self._malformed_count.inc()
        self.report_error(malformed(self.what, stream, entry_id, error, self.dead_letter))
        if self.dead_letter:
            self._dead.append((self.dead_letter, dead_letter(fields, stream, entry_id, error)))
        self._ack(stream, entry_id)
