"""Clicks counted per page per minute, exactly once, from Redis streams into Redis.

    bash ops/bootstrap.sh --redis
    .venv/bin/python examples/redis/clickstream.py --events 20000
    squall --config squall-dev/squall.yaml submit examples/redis/clickstream.py \
        --conf redis.url=redis://127.0.0.1:6379/0

A generator (``clickgen.py``) pushes clicks ``{page, ts, user}`` into the
streams ``clicks:0`` and ``clicks:1``.  A transactional topology reads them
with :class:`~squall.contrib.redis.transactional.RedisStreamPartitionedSpout`
(each stream a partition, each batch an entry id range replayed exactly if
it fails), counts each batch per ``page|YYYY-MM-DDTHH:MM`` in parallel, and
its committer adds the counts to a :class:`~squall.state.TransactionalMap`
over :class:`~squall.contrib.redis.RedisStore`: the Redis hash
``squall:state:clickstream``, one field per page and minute holding
``{"value": count, "txid": last txid}``, so a replayed commit is skipped.

Run as a script, it starts a redis-server of its own (or uses
``--redis-url``, after clearing the example's keys there), the generator and
the topology in local mode, waits until every click is counted, checks the
counts against the generator's own tally, prints them, and says how to look
at them with ``redis-cli``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from typing import Any

from squall import Grouping
from squall.contrib.redis.store import RedisStore
from squall.contrib.redis.transactional import RedisStreamPartitionedSpout
from squall.state import TransactionalMap
from squall.transactional import BatchBolt, Committer, TransactionalTopology, TransactionAttempt

try:
    from clickgen import PARTITIONS, STREAM, minute_key, push  # run as a file: its directory is on the path
except ImportError:  # imported as part of the examples package
    from examples.redis.clickgen import PARTITIONS, STREAM, minute_key, push

NAMESPACE = "clickstream"


def parse_click(fields: dict[str, str]) -> list[str]:
    """The spout's scheme: a stream entry's fields -> [key]."""
    return [minute_key(fields["page"], int(fields["ts"]))]


class PartialCount(BatchBolt):
    """Clicks per page-minute in this task's share of the batch."""

    outputs = ["tx", "key", "count"]

    def initialize(self, conf: dict[str, Any], context: Any, attempt: TransactionAttempt) -> None:
        self.attempt = attempt
        self.counts: Counter[str] = Counter()

    def process(self, tup: Any) -> None:
        self.counts[tup.values.key] += 1

    def finish_batch(self) -> None:
        for key, n in self.counts.items():
            self.emit([self.attempt, key, n])


class CommitCounts(Committer, BatchBolt):
    """Adds the batch's counts to Redis in txid order, skipping a txid already applied."""

    outputs = []
    _maps: dict[tuple[str, str], TransactionalMap] = {}  # one Redis connection per worker process
    _lock = threading.Lock()

    def initialize(self, conf: dict[str, Any], context: Any, attempt: TransactionAttempt) -> None:
        self.attempt = attempt
        self.counts: Counter[str] = Counter()
        if not conf.get("redis.url"):
            msg = "the clickstream example needs --conf redis.url=redis://HOST:PORT/DB"
            raise ValueError(msg)
        where = (conf["redis.url"], conf.get("clickstream.namespace", NAMESPACE))
        with self._lock:
            if where not in self._maps:
                self._maps[where] = TransactionalMap(RedisStore(*where))
            self.db = self._maps[where]

    def process(self, tup: Any) -> None:
        self.counts[tup.values.key] += tup.values.count

    def finish_batch(self) -> None:
        if self.counts:
            self.db.increment(self.attempt, dict(self.counts))


class Clickstream(TransactionalTopology):
    transactional_id = "clickstream"
    config = {"topology.max.spout.pending": 3}
    clicks = RedisStreamPartitionedSpout.spec(stream=STREAM, partitions=PARTITIONS, batch_size=1000,
                                              scheme=parse_click, fields=["key"], par=2)
    partial = PartialCount.spec(inputs=[clicks], par=2)
    commit = CommitCounts.spec(inputs={partial: Grouping.fields("key")}, par=2)


# -- the runner: everything on this machine, in one process -----------------------------


def stored_counts(url: str, namespace: str) -> dict[str, int]:
    """Every page-minute's committed count."""
    import redis

    with redis.Redis.from_url(url) as conn:
        keys = [k.decode() for k in conn.hkeys(f"squall:state:{namespace}")]
    if not keys:
        return {}
    with RedisStore(url, namespace) as store:
        return dict(zip(keys, TransactionalMap(store).get_many(keys), strict=True))


def table(counts: dict[str, int]) -> str:
    """Pages down, minutes across."""
    pages = sorted({k.split("|")[0] for k in counts})
    minutes = sorted({k.split("|")[1] for k in counts})
    width = max(len(p) for p in pages) + 2
    lines = [" " * width + "".join(f"{m[-5:]:>7}" for m in minutes) + f"{'total':>8}"]
    for page in pages:
        row = [counts.get(f"{page}|{m}", 0) for m in minutes]
        lines.append(f"{page:<{width}}" + "".join(f"{n:>7}" for n in row) + f"{sum(row):>8}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    import redis

    from squall import LocalCluster
    from squall.contrib.redis.devserver import DevRedis
    from squall.runtime.logging import configure_logging

    configure_logging(args.log_level)
    server = None
    url = args.redis_url
    if url is None:
        server = DevRedis(tempfile.mkdtemp(prefix="squall-clickstream-"))
        server.start()
        url = server.url
        print(f"started redis-server on 127.0.0.1:{server.port} (files in {server.dir})")
    keep = args.keep
    try:
        with redis.Redis.from_url(url) as conn:
            # A fresh start: the topology's transactional state lives in this process only.
            conn.delete(*[STREAM.format(p) for p in range(PARTITIONS)], f"squall:state:{NAMESPACE}")
            tally: Counter[str] = Counter()

            def generate() -> None:
                tally.update(push(conn, args.events, seed=args.seed, rate=args.rate))

            generator = threading.Thread(target=generate, name="clickgen", daemon=True)
            began = time.monotonic()
            with LocalCluster() as cluster:
                cluster.submit("clickstream", Clickstream, {"redis.url": url})
                generator.start()
                generator.join()
                print(f"generator pushed {args.events} clicks into {PARTITIONS} streams "
                      f"({STREAM.format('0')}, {STREAM.format('1')})")
                deadline = time.monotonic() + args.timeout
                counts = stored_counts(url, NAMESPACE)
                while counts != tally and time.monotonic() < deadline:
                    time.sleep(0.2)
                    counts = stored_counts(url, NAMESPACE)
                fatal = [e for e in cluster.errors("clickstream") if e.fatal]
        took = time.monotonic() - began
        print()
        print(table(counts))
        print()
        exact = counts == tally and not fatal
        if exact:
            print(f"exact: all {sum(tally.values())} clicks counted once each into {len(tally)} page-minutes "
                  f"in {took:.1f}s")
        else:
            missing = {k: (tally.get(k, 0), counts.get(k, 0)) for k in tally.keys() | counts.keys()
                       if tally.get(k, 0) != counts.get(k, 0)}
            print(f"NOT exact after {args.timeout}s: (expected, counted) differ for {len(missing)} keys, "
                  f"e.g. {dict(list(missing.items())[:5])}; errors: {fatal}")
        port = url.rsplit(":", 1)[1].split("/")[0]
        print(f"look at them: redis-cli -p {port} HGETALL squall:state:{NAMESPACE}")
        if server is not None and keep:
            print(f"redis-server keeps running (pid {server.process.pid if server.process else '?'}); "
                  f"stop it with: redis-cli -p {port} shutdown nosave")
        return 0 if exact else 1
    finally:
        if server is not None and not keep:
            server.stop()
            shutil.rmtree(server.dir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Count clicks per page per minute, exactly once, in Redis.")
    parser.add_argument("--events", type=int, default=20_000, help="clicks to generate (default 20000)")
    parser.add_argument("--redis-url", default=None,
                        help="use this Redis (its clicks:* streams and squall:state:clickstream are reset); "
                             "default: start a redis-server of our own on a free port")
    parser.add_argument("--keep", action="store_true", help="leave our redis-server running afterwards")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rate", type=float, default=None, help="clicks per second (default: no limit)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the counts")
    parser.add_argument("--log-level", default="warning")
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
