"""Exactly once end to end on a real cluster: numbered events in Redis streams,
counted by a transactional topology into Redis state, exact while workers are
SIGKILLed, a supervisor dies and comes back, nimbus dies and comes back, and
Redis itself is SIGKILLed and restarted (append-only file on)."""

from __future__ import annotations

import os
import random
import signal
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from squall.contrib.redis.devserver import DevRedis
from squall.contrib.redis.store import RedisStore
from squall.state import TransactionalMap, TransactionalValue
from squall.testing import poll_for
from tests.cluster.conftest import busy_workers, make_cluster, squall_cli  # noqa: F401 - make_cluster is a fixture
from tests.helpers import stay

TOPOLOGY = str(Path(__file__).resolve().parent / "topologies" / "tx_count.py")
KEYS = [f"k{i}" for i in range(13)]


class Events:
    """Numbered events pushed into ``events:0`` and ``events:1`` at a steady rate
    from a thread, until stopped; what was pushed is the expected count."""

    def __init__(self, url: str, rate: float = 60.0) -> None:
        self.url, self.rate = url, rate
        self.pushed: Counter[str] = Counter()
        self.n = 0
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self.run, name="events", daemon=True)
        self.errors = 0

    def run(self) -> None:
        conn = redis.Redis.from_url(self.url, socket_timeout=2, socket_connect_timeout=2)
        rng = random.Random(5)
        try:
            while not self.stop_event.wait(0.25):
                batch = [(self.n + i, KEYS[rng.randrange(len(KEYS))]) for i in range(int(self.rate / 4))]
                try:
                    pipe = conn.pipeline(transaction=False)
                    for n, key in batch:
                        pipe.xadd(f"events:{n % 2}", {"n": str(n), "key": key})
                    pipe.execute()
                except (redis.ConnectionError, redis.TimeoutError):
                    # Redis is down (the test killed it): these were not written; push them later.
                    self.errors += 1
                    continue
                self.n += len(batch)
                self.pushed.update(key for _n, key in batch)
        finally:
            conn.close()

    def __enter__(self) -> Events:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(10)

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Counted:
    """What the committers wrote to Redis, read as a user would (None while Redis is down)."""

    def __init__(self, url: str, directory: Path) -> None:
        self.url, self.dir = url, directory

    def total(self) -> int:
        try:
            with RedisStore(self.url, "txcount-total") as store:
                return TransactionalValue(store, "total").get() or 0
        except Exception:  # noqa: BLE001 - Redis is down for a moment: nothing new to see
            return -1

    def per_key(self) -> dict[str, int]:
        with RedisStore(self.url, "txcount") as store:
            values = TransactionalMap(store).get_many(KEYS)
        return {k: n for k, n in zip(KEYS, values, strict=True) if n}

    def txids(self) -> list[list[int]]:
        out = []
        for path in sorted(self.dir.glob("commits-*.log")):
            out.append([int(line.split()[0]) for line in path.read_text().splitlines() if line.strip()])
        return out


@pytest.fixture
def redis_aof(tmp_path: Path) -> Iterator[DevRedis]:
    server = DevRedis(tmp_path / "redis", aof=True)
    server.start()
    yield server
    server.stop()


def setup(make: Any, server: DevRedis, tmp_path: Path, supervisors: int) -> tuple[Any, Counted]:
    cluster = make(supervisors=supervisors, slots=3)
    directory = tmp_path / "tx"
    directory.mkdir()
    squall_cli(cluster, "submit", TOPOLOGY, "--name", "rtx", "--conf", f"redis.url={server.url}",
               "--conf", f"squall.test.dir={directory}", "--conf", "topology.workers=3",
               "--conf", "squall.test.batches.per.sec=5", "--conf", "squall.test.batch=10")
    poll_for(lambda: len(cluster.worker_pids()) == 3, timeout=60, message="3 workers up")
    return cluster, Counted(server.url, directory)


def progress(counted: Counted, message: str, timeout: float = 40) -> None:
    before = counted.total()
    poll_for(lambda: counted.total() > before, timeout=timeout, message=message)


def in_streams(url: str) -> Counter[str]:
    """The events the streams hold, per key: the ground truth (a push cut by a Redis
    kill may or may not have landed, so the generator's own tally could be off)."""
    with redis.Redis.from_url(url) as conn:
        entries = [fields for p in range(2) for _id, fields in conn.xrange(f"events:{p}")]
    return Counter(fields[b"key"].decode() for fields in entries)


def assert_exact(counted: Counted, events: Events) -> None:
    expected = in_streams(events.url)
    total = sum(expected.values())
    assert total >= sum(events.pushed.values()) > 0
    poll_for(lambda: counted.total() >= total, timeout=60,
             message=f"all {total} events committed (now {counted.total()})")
    assert counted.total() == total
    assert counted.per_key() == dict(expected)
    logs = counted.txids()
    for txids in logs:
        firsts = list(dict.fromkeys(txids))
        assert firsts == sorted(firsts), f"commits out of order: {firsts}"
    done = sorted({t for txids in logs for t in txids})
    assert done == list(range(1, done[-1] + 1))


def test_exact_while_workers_and_a_supervisor_die(make_cluster: Any, redis_aof: DevRedis,  # noqa: F811
                                                  tmp_path: Path) -> None:
    # Given events flowing into Redis and a transactional count on 3 workers of 2 nodes
    with Events(redis_aof.url) as events:
        cluster, counted = setup(make_cluster, redis_aof, tmp_path, supervisors=2)
        progress(counted, "first commits")
        # When workers are SIGKILLed, one after the other
        rng = random.Random(3)
        for _ in range(2):
            slot, pid = rng.choice(sorted(busy_workers(cluster, "rtx").items()))
            os.kill(pid, signal.SIGKILL)
            poll_for(lambda s=slot, p=pid: cluster.worker_pids().get(s) not in (None, p), timeout=30,
                     message=f"worker on {slot} restarted")
            progress(counted, "commits after a worker was killed")
        # and a supervisor is SIGKILLed and restarted
        cluster.kill_process("supervisor-1")
        progress(counted, "commits without supervisor 1")
        cluster.start_supervisor(1)
        progress(counted, "commits after supervisor 1 restarted")
    # Then, once the events stop, every one is counted exactly once, in total and per key
    assert_exact(counted, events)


def test_exact_while_nimbus_and_redis_die(make_cluster: Any, redis_aof: DevRedis,  # noqa: F811
                                          tmp_path: Path) -> None:
    # Given events flowing into Redis and a transactional count on 3 workers
    with Events(redis_aof.url) as events:
        cluster, counted = setup(make_cluster, redis_aof, tmp_path, supervisors=1)
        progress(counted, "first commits")
        # When nimbus dies, commits go on; it comes back
        cluster.kill_process("nimbus-0")
        progress(counted, "commits without nimbus")
        cluster.start_nimbus(0)
        # and Redis itself is SIGKILLed (the source and the state), then restarted on its port
        redis_aof.kill()
        redis_aof.stop()  # closes its log file: kill() leaves it open
        assert stay(lambda: not redis_aof.ping(), 1.5)  # down long enough for everyone to notice
        redis_aof.start()
        progress(counted, "commits after Redis restarted", timeout=60)
        # and a worker is SIGKILLed for good measure
        slot, pid = min(cluster.worker_pids().items())
        os.kill(pid, signal.SIGKILL)
        poll_for(lambda: cluster.worker_pids().get(slot) not in (None, pid), timeout=30,
                 message=f"worker on {slot} restarted")
        progress(counted, "commits after a worker was killed")
        assert events.errors > 0, "the generator never saw Redis down: the outage was too short to test"
    # Then every event is counted exactly once, in total and per key
    assert_exact(counted, events)
    # and the chaos hit transactions in flight: emitters found Redis down, the coordinator replayed
    logs_text = "".join(p.read_text(errors="replace") for p in cluster.root.glob("**/worker.log"))
    assert "did not answer reading stream" in logs_text
    assert "transactions replayed" in logs_text
