"""Redis connectors (``pip install squall[redis]``): Redis Streams spouts, Redis state, sinks,
Trident map states (:class:`RedisMapState`).

    from squall.contrib.redis import RedisStore, RedisStreamSpout
    from squall.state import OpaqueMap

    events = RedisStreamSpout.spec(url="redis://127.0.0.1:6379/0", streams=["clicks"], group="counts")
    counts = OpaqueMap(RedisStore("redis://127.0.0.1:6379/0", namespace="counts"))

Names are imported on first use, so importing this package does not need
the ``redis`` client; using a connector without it says how to install it.
"""

from squall.lazy import lazy_exports

_EXPORTS = {
    "Backoff": "squall.contrib.redis.client",
    "RedisUnavailable": "squall.contrib.redis.client",
    "connect": "squall.contrib.redis.client",
    "redact": "squall.contrib.redis.client",
    "RedisMap": "squall.contrib.redis.store",
    "RedisStore": "squall.contrib.redis.store",
    "RedisStreamSpout": "squall.contrib.redis.stream_spout",
    "MalformedEntry": "squall.contrib.redis.entries",
    "RedisKeysCommitter": "squall.contrib.redis.sink",
    "RedisKeysSink": "squall.contrib.redis.sink",
    "RedisStreamCommitter": "squall.contrib.redis.sink",
    "RedisStreamSink": "squall.contrib.redis.sink",
    "RedisStreamOpaqueSpout": "squall.contrib.redis.transactional",
    "RedisStreamPartitionedSpout": "squall.contrib.redis.transactional",
    "ReplayLost": "squall.contrib.redis.transactional",
    "DevRedis": "squall.contrib.redis.devserver",
    "RedisBackingMap": "squall.contrib.redis.trident",
    "RedisMapState": "squall.contrib.redis.trident",
}
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
__all__ = sorted(_EXPORTS)
