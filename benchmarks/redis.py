"""Redis Streams in and out: the spout beside a plain redis-py consumer loop, and
the exactly-once count's committed entries per second.

    python benchmarks/redis.py [--entries 200000] [--repeat 3]

One redis-server of our own on a loopback port (no AOF: the broker's disk is
not what is measured), a stream filled beforehand with ``--entries`` entries
of three fields (page, user, ts), then, side by side on the same data:

- **plain loop**: redis-py's ``XREADGROUP COUNT 256`` + one ``XACK`` per
  read in one thread: the most a Python consumer gets out of this Redis.
- **RedisStreamSpout**: local mode, the spout (acking on, max spout pending
  5000) into a bolt that does nothing but ack: entries/s from the first
  entry the group delivered to the moment the group has every entry read and
  acked (``XINFO GROUPS``: entries-read and pending).
- **in memory**: the same topology with a spout reading the same entries
  from a list: what Squall's own per-tuple path allows, without Redis.
- **exactly once**: ``RedisStreamOpaqueSpout`` over the same entries split
  into two streams, counted per page by a batch bolt and committed through an
  ``OpaqueMap`` over ``RedisStore``; committed entries/s from the first commit
  to the one that makes the stored total equal the entries.

Best of ``--repeat`` runs each (a run is a fresh group, or a fresh store).
Nothing here asserts a number.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# This file is benchmarks/redis.py: its own directory must not shadow the redis package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(REPO))

import redis  # noqa: E402

from squall import Bolt, Grouping, LocalCluster, Spout, Topology  # noqa: E402
from squall.contrib.redis.devserver import DevRedis  # noqa: E402
from squall.contrib.redis.store import RedisStore  # noqa: E402
from squall.contrib.redis.stream_spout import RedisStreamSpout  # noqa: E402
from squall.contrib.redis.transactional import RedisStreamOpaqueSpout  # noqa: E402
from squall.state import OpaqueMap  # noqa: E402
from squall.transactional import BatchBolt, Committer, TransactionalTopology  # noqa: E402

STREAM = "bench:events"
PARTS = ["bench:tx:0", "bench:tx:1"]
PAGES = [f"/page/{i}" for i in range(50)]
FILL_BATCH = 2000


def fill(client: redis.Redis, streams: list[str], entries: int) -> None:
    pipe = client.pipeline(transaction=False)
    for i in range(entries):
        pipe.xadd(streams[i % len(streams)], {"page": PAGES[i % len(PAGES)], "user": f"u{i % 997}",
                                              "ts": str(1_700_000_000_000 + i)})
        if i % FILL_BATCH == FILL_BATCH - 1:
            pipe.execute()
    pipe.execute()


def plain_loop(client: redis.Redis, entries: int, group: str) -> float:
    client.xgroup_create(STREAM, group, id="0")
    got = 0
    started = time.perf_counter()
    while got < entries:
        reply = client.xreadgroup(group, "plain", {STREAM: ">"}, count=256, block=100)
        for _stream, rows in reply:
            ids = [entry_id for entry_id, _fields in rows]
            got += len(ids)
            client.xack(STREAM, group, *ids)
    return entries / (time.perf_counter() - started)


class ListSpout(Spout):
    """The same entries from a list in memory, reliable: Squall's own ceiling for this topology."""

    outputs = ["stream", "id", "fields"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        n = conf["bench.entries"]
        self.rows = [[STREAM, f"{i}-0", {"page": PAGES[i % len(PAGES)], "user": f"u{i % 997}",
                                          "ts": str(1_700_000_000_000 + i)}] for i in range(n)]
        self.next = 0
        self.done = conf["bench.done"]

    def next_tuple(self) -> None:
        if self.next < len(self.rows):
            self.emit(self.rows[self.next], self.next)
            self.next += 1

    def ack(self, msg_id: Any) -> None:
        self.done.append(msg_id)


def memory_run(entries: int) -> float:
    done: list[int] = []

    class Consume(Topology):
        config = {"topology.max.spout.pending": 5000}
        events = ListSpout.spec()
        drop = Drop.spec(inputs=[events])

    with LocalCluster() as cluster:
        cluster.submit("memory", Consume, {"bench.entries": entries, "bench.done": done})
        while not done:
            time.sleep(0.001)
        t0, d0 = time.perf_counter(), len(done)
        while len(done) < entries:
            time.sleep(0.005)
        return (entries - d0) / (time.perf_counter() - t0)


class Drop(Bolt):
    def process(self, tup: Any) -> None:
        pass  # acked after process(), as every bolt


def group_done(client: redis.Redis, group: str, entries: int) -> tuple[int, int]:
    for info in client.xinfo_groups(STREAM):
        if info["name"].decode() == group:
            return int(info.get("entries-read") or 0), int(info["pending"])
    return 0, 0


def spout_run(client: redis.Redis, url: str, entries: int, group: str) -> float:
    class Consume(Topology):
        config = {"topology.max.spout.pending": 5000}
        events = RedisStreamSpout.spec(url=url, streams=[STREAM], group=group)
        drop = Drop.spec(inputs=[events])

    with LocalCluster() as cluster:
        cluster.submit(f"spout-{group}", Consume)
        first = None
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            read, pending = group_done(client, group, entries)
            now = time.perf_counter()
            if first is None and read > 0:
                first = (now, read)
            if read >= entries and pending == 0:
                break
            time.sleep(0.005)
        assert first is not None
        t0, r0 = first
        return (entries - r0) / (time.perf_counter() - t0)


class PageCounts(BatchBolt):
    outputs = ["attempt", "page", "count"]

    def initialize(self, conf: dict[str, Any], context: Any, attempt: Any) -> None:
        self.attempt, self.counts = attempt, Counter()

    def process(self, tup: Any) -> None:
        self.counts[tup.values.fields["page"]] += 1

    def finish_batch(self) -> None:
        for page, n in self.counts.items():
            self.emit([self.attempt, page, n])


class CommitCounts(Committer, BatchBolt):
    outputs = ["attempt", "committed"]

    def initialize(self, conf: dict[str, Any], context: Any, attempt: Any) -> None:
        self.attempt, self.counts = attempt, Counter()
        self.map = OpaqueMap(RedisStore(conf["redis.url"], conf["bench.namespace"]))

    def process(self, tup: Any) -> None:
        self.counts[tup.values.page] += tup.values.count

    def finish_batch(self) -> None:
        self.map.increment(self.attempt, dict(self.counts))
        self.emit([self.attempt, sum(self.counts.values())])


def exactly_once_run(url: str, entries: int, namespace: str, batch: int) -> float:
    class Count(TransactionalTopology):
        transactional_id = namespace
        config = {"topology.max.spout.pending": 3}
        events = RedisStreamOpaqueSpout.spec(url=url, streams=PARTS, batch_size=batch, par=2)
        partial = PageCounts.spec(inputs={events: Grouping.shuffle()}, par=2)
        commit = CommitCounts.spec(inputs={partial: Grouping.fields("page")})

    store = RedisStore(url, namespace)
    with LocalCluster() as cluster:
        cluster.submit(namespace, Count, {"redis.url": url, "bench.namespace": namespace})
        first = None
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            values = [v for v in store.get_many(PAGES) if v is not None]
            total = sum(v["curr"] for v in values)
            now = time.perf_counter()
            if first is None and total > 0:
                first = (now, total)
            if total >= entries:
                break
            time.sleep(0.01)
    store.close()
    assert first is not None
    t0, c0 = first
    return (entries - c0) / (time.perf_counter() - t0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--batch", type=int, default=2000,
                        help="opaque spout entries per partition per batch")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="squall-bench-redis-") as tmp, \
            DevRedis(Path(tmp) / "redis") as server:
        client = redis.Redis.from_url(server.url)
        fill(client, [STREAM], args.entries)
        fill(client, PARTS, args.entries)
        plain = max(plain_loop(client, args.entries, f"plain{i}") for i in range(args.repeat))
        spout = max(spout_run(client, server.url, args.entries, f"spout{i}") for i in range(args.repeat))
        memory = max(memory_run(args.entries) for _ in range(args.repeat))
        tx = max(exactly_once_run(server.url, args.entries, f"count{i}", args.batch)
                 for i in range(args.repeat))
        client.close()
    print(f"{args.entries:,} entries, one redis-server on 127.0.0.1, best of {args.repeat}\n")
    print(f"{'consumer':<58}{'entries/s':>12}{'vs plain':>10}")
    print("-" * 80)
    for label, value in (("plain redis-py loop (XREADGROUP COUNT 256 + XACK)", plain),
                         ("RedisStreamSpout, acking on, local mode", spout),
                         ("(the same topology, its spout reading a list in memory)", memory),
                         (f"exactly once: opaque spout -> OpaqueMap in Redis (batch {args.batch})", tx)):
        print(f"{label:<58}{value:>12,.0f}{value / plain:>9.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
