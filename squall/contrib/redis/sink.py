"""Sink bolts writing tuples to Redis: to a stream, or to keys; at least once, or once per txid.

Plain bolts (at least once):

* :class:`RedisStreamSink` -- ``XADD`` each tuple to a stream (``MAXLEN ~``
  optional);
* :class:`RedisKeysSink` -- ``SET key value`` (or ``HSET hash key value``)
  from two fields of each tuple, with an optional TTL: storm-redis's
  ``RedisStoreBolt``.

Both buffer the tuples of one executor batch and write them in one pipelined
round trip from ``batch_done``, then ack them; a tuple whose write failed is
failed (and replays), and the error reported.  While Redis is down the
sink fails new tuples at once for a backoff (0.05 s doubling to 2 s) rather
than wait on every batch.

Committers of a transactional topology (exactly once):
:class:`RedisStreamCommitter` and :class:`RedisKeysCommitter` collect their
batch and write it in ``finish_batch`` inside ``MULTI``/``EXEC``, together
with a marker -- the txid, in the hash ``squall:sink:<target>`` under a
field naming the transactional id, component and task -- that ``WATCH``
guards: a replayed commit finds its txid already there and writes nothing.
A stream sink cannot rely on explicit entry ids for that (``<txid>-<n>``):
two committer tasks of one txid would race for the stream's top id.

Options (``Sink.spec(inputs=..., url=..., ...)``):

``url``
    The Redis; default: the topology conf's ``redis.url``.
``stream`` (stream sinks)
    Required: the stream written.
``fields``
    The tuple fields written as the entry's fields; default all of them
    (a committer leaves out the transaction attempt).
``maxlen``, ``approximate`` (stream sinks)
    Trim the stream to about ``maxlen`` entries (``MAXLEN ~``; exact when
    ``approximate=False``).  Default: no trimming.
``key_field``, ``value_field`` (keys sinks)
    Required: which fields hold the key and the value.
``hash``  (keys sinks)
    Write ``HSET <hash> key value`` instead of ``SET key value``.
``key_prefix``, ``ttl`` (keys sinks)
    Prepended to every key; expiry in seconds (on the key, or on the whole hash).

Values that are not str, bytes, int or float are written as JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from squall.contrib.redis.client import (
    Backoff,
    call_with_retry,
    client,
    connection_errors,
    import_redis,
    redact,
)
from squall.errors import SquallError, TopologyValidationError
from squall.lazy import shared_resource
from squall.topology.component import Bolt, ComponentSpec
from squall.transactional.attempt import TransactionAttempt
from squall.transactional.bolts import BatchBolt, Committer

MARKER_PREFIX = "squall:sink:"

_STREAM_OPTIONS = {"url", "stream", "fields", "maxlen", "approximate"}
_KEYS_OPTIONS = {"url", "key_field", "value_field", "hash", "key_prefix", "ttl"}


def _check(cls: type, options: Mapping[str, Any], known: set[str], required: tuple[str, ...]) -> None:
    where = f"bolt {cls.__name__}"
    missing = [key for key in required if not options.get(key)]
    if missing:
        msg = f"{where} needs {', '.join(missing)}"
        raise TopologyValidationError(msg)
    unknown = set(options) - known - {"outputs"}
    if unknown:
        msg = f"{where}: unknown options {sorted(unknown)}; known: {sorted(known)}"
        raise TopologyValidationError(msg)


def redis_url(component: Any, conf: Mapping[str, Any]) -> str:
    """The component's ``url`` option, else the topology's ``redis.url``, else a clear error."""
    url = component.options.get("url") or conf.get("redis.url")
    if not url:
        msg = f"{type(component).__name__}: no Redis URL: give spec(url=...) or --conf redis.url=redis://..."
        raise TopologyValidationError(msg)
    return str(url)


def redis_value(value: Any) -> Any:
    """What Redis stores for ``value``: itself for str, bytes, int and float; else its JSON text."""
    if type(value) in (str, bytes, int, float):
        return value
    return json.dumps(value, separators=(",", ":"))


class _Writer:
    """Queues the commands writing one tuple, for the stream or the keys sinks."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        self.options = options

    def queue(self, pipe: Any, values: Any) -> None:
        raise NotImplementedError

    def finish(self, pipe: Any) -> None:
        """Commands after a batch's writes (the keys sink's hash TTL)."""

    @property
    def target(self) -> str:
        raise NotImplementedError


class StreamWriter(_Writer):
    def __init__(self, options: Mapping[str, Any]) -> None:
        super().__init__(options)
        self.stream = options["stream"]
        self.fields = options.get("fields")
        self.maxlen = options.get("maxlen")
        self.approximate = bool(options.get("approximate", True))

    @property
    def target(self) -> str:
        return self.stream

    def queue(self, pipe: Any, values: Any) -> None:
        if self.fields is not None:
            entry = {name: redis_value(getattr(values, name)) for name in self.fields}
        else:
            entry = {name: redis_value(value) for name, value in zip(values._fields, values, strict=True)
                     if not isinstance(value, TransactionAttempt)}
        pipe.xadd(self.stream, entry, maxlen=self.maxlen, approximate=self.approximate)


class KeysWriter(_Writer):
    def __init__(self, options: Mapping[str, Any]) -> None:
        super().__init__(options)
        self.key_field = options["key_field"]
        self.value_field = options["value_field"]
        self.hash = options.get("hash")
        self.prefix = options.get("key_prefix") or ""
        self.ttl = options.get("ttl")

    @property
    def target(self) -> str:
        return self.hash or f"{self.prefix}*"

    def queue(self, pipe: Any, values: Any) -> None:
        key = f"{self.prefix}{getattr(values, self.key_field)}"
        value = redis_value(getattr(values, self.value_field))
        if self.hash:
            pipe.hset(self.hash, key, value)
        else:
            pipe.set(key, value, ex=self.ttl)

    def finish(self, pipe: Any) -> None:
        if self.hash and self.ttl:
            pipe.expire(self.hash, self.ttl)


# -- plain bolts: at least once --------------------------------------------------------------
class _SinkBolt(Bolt):
    _writer_type: type[_Writer]
    _known: set[str]
    _required: tuple[str, ...]
    outputs = None
    auto_ack = False
    auto_anchor = False
    auto_fail = True

    _committer: type[_SinkCommitter]

    @classmethod
    def spec(cls, name: str | None = None, inputs: Any = None, par: int = 1,  # type: ignore[override]
             tasks: int | None = None, config: Mapping[str, Any] | None = None, committer: bool = False,
             **options: Any) -> ComponentSpec:
        """The bolt's spec; ``committer=True``: its committer's, for a transactional topology."""
        if committer:
            return cls._committer.spec(name=name, inputs=inputs, par=par, tasks=tasks, config=config,
                                       **options)
        _check(cls, options, cls._known, cls._required)
        return super().spec(name=name, inputs=inputs, par=par, tasks=tasks, config=config, **options)

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.url = redis_url(self, conf)
        self.writer = self._writer_type(self.options)
        self.what = f"bolt {context.component_id!r} task {context.task_id} writing to {self.writer.target!r}"
        self._errors = connection_errors()
        self._redis = client(self.url)
        self._backoff = Backoff(initial=0.05, max_delay=2.0, attempts=None)
        self._batch: list[Any] = []

    def process(self, tup: Any) -> None:
        self._batch.append(tup)

    def batch_done(self) -> None:
        batch, self._batch = self._batch, []
        if not batch:
            return
        if not self._backoff.ready(self.clock.now()):
            for tup in batch:  # Redis was down a moment ago: fail fast, the spout replays them later
                self.fail(tup)
            return
        pipe = self._redis.pipeline(transaction=False)
        for tup in batch:
            self.writer.queue(pipe, tup.values)
        self.writer.finish(pipe)
        try:
            results = pipe.execute(raise_on_error=False)
        except self._errors as e:
            delay = self._backoff.failed(self.clock.now())
            msg = (f"{self.what}: cannot reach Redis at {redact(self.url)}: {e}; {len(batch)} tuples failed, "
                   f"failing new ones for {delay:.2f}s")
            self.report_error(SquallError(msg))
            for tup in batch:
                self.fail(tup)
            return
        self._backoff.succeeded()
        refused = None
        for tup, result in zip(batch, results, strict=False):
            if isinstance(result, Exception):
                refused = result
                self.fail(tup)
            else:
                self.ack(tup)
        if refused is not None:
            msg = f"{self.what}: Redis refused a write: {refused}"
            self.report_error(SquallError(msg))

    def cleanup(self) -> None:
        self._redis.close()


class RedisStreamSink(_SinkBolt):
    """``XADD`` every tuple to ``stream``, pipelined per executor batch (at least once)."""

    _writer_type = StreamWriter
    _known = _STREAM_OPTIONS
    _required = ("stream",)


class RedisKeysSink(_SinkBolt):
    """``SET`` (or ``HSET``) a key from each tuple, pipelined per executor batch (at least once)."""

    _writer_type = KeysWriter
    _known = _KEYS_OPTIONS
    _required = ("key_field", "value_field")


# -- committers: once per txid -----------------------------------------------------------------
CLIENT_RESOURCE = "squall.contrib.redis.client"


def shared_client(url: str, resources: dict[str, Any]) -> Any:
    """One client per URL in this worker: a committer instance lives for a single batch.

    It is a worker resource (``context.resources``): the worker closes it when it stops.
    """
    return shared_resource(resources, f"{CLIENT_RESOURCE}:{url}", lambda: client(url))


def commit_once(conn: Any, marker: str, field: str, txid: int, queue: Any) -> bool:
    """Run ``queue(pipe)``'s writes and record ``txid`` under ``marker``/``field``, in one MULTI.

    False (nothing written) when ``txid`` or a later one is recorded already: a replay.
    """
    watch_error = import_redis().WatchError
    with conn.pipeline(transaction=True) as pipe:
        while True:
            try:
                pipe.watch(marker)
                done = pipe.hget(marker, field)
                if done is not None and int(done) >= txid:
                    return False
                pipe.multi()
                queue(pipe)
                pipe.hset(marker, field, txid)
                pipe.execute()
                return True
            except watch_error:
                continue


class _SinkCommitter(Committer, BatchBolt):
    _writer_type: type[_Writer]
    _known: set[str]
    _required: tuple[str, ...]
    outputs = None
    skips_replayed_txids = True  # the marker skips a replay whole

    @classmethod
    def spec(cls, name: str | None = None, inputs: Any = None, par: int = 1,  # type: ignore[override]
             tasks: int | None = None, config: Mapping[str, Any] | None = None, committer: bool = True,
             **options: Any) -> ComponentSpec:
        _check(cls, options, cls._known, cls._required)
        return super().spec(name=name, inputs=inputs, par=par, tasks=tasks, config=config, committer=True,
                            **options)

    def initialize(self, conf: dict[str, Any], context: Any, attempt: TransactionAttempt) -> None:  # type: ignore[override]
        self.attempt = attempt
        self.url = redis_url(self, conf)
        self.writer = self._writer_type(self.options)
        tid = conf.get("topology.transactional.id") or conf.get("topology.name") or context.topology_name
        self.marker = MARKER_PREFIX + self.writer.target
        self.field = f"{tid}:{context.component_id}:{context.this_task_index}"
        self.what = (f"committer {context.component_id!r} task {context.task_id} "
                     f"writing to {self.writer.target!r}")
        self.resources = context.resources
        self.values: list[Any] = []
        self.written: bool | None = None  # after finish_batch: False if it was a replay

    def process(self, tup: Any) -> None:
        self.values.append(tup.values)

    def finish_batch(self) -> None:
        def queue(pipe: Any) -> None:
            for values in self.values:
                self.writer.queue(pipe, values)
            self.writer.finish(pipe)

        conn = shared_client(self.url, self.resources)
        # A connection error after the retries fails the batch: the commit replays, and the marker
        # tells whether this one had landed.
        txid = self.attempt.txid
        self.written = call_with_retry(lambda: commit_once(conn, self.marker, self.field, txid, queue),
                                       what=self.what, url=self.url, backoff=Backoff(attempts=5))


class RedisStreamCommitter(_SinkCommitter):
    """A transactional committer appending its batch to ``stream`` exactly once per txid."""

    _writer_type = StreamWriter
    _known = _STREAM_OPTIONS
    _required = ("stream",)


class RedisKeysCommitter(_SinkCommitter):
    """A transactional committer setting keys from its batch exactly once per txid."""

    _writer_type = KeysWriter
    _known = _KEYS_OPTIONS
    _required = ("key_field", "value_field")


RedisStreamSink._committer = RedisStreamCommitter
RedisKeysSink._committer = RedisKeysCommitter
