"""RedisStreamSpout on a real dev cluster: workers SIGKILLed and Redis restarted (AOF on) mid-run;
at the end every entry is acked by the group and was processed at least once."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import redis

from squall.contrib.redis.devserver import DevRedis
from squall.testing import poll_for
from tests.cluster.conftest import make_cluster, squall_cli  # noqa: F401 - make_cluster: the fixture

TOPOLOGY = Path(__file__).resolve().parent / "topologies" / "stream_ack.py"
N = 4000


def settled(r: redis.Redis) -> bool:
    groups = {g["name"]: g for g in r.xinfo_groups("events")}
    g = groups.get(b"g")
    return (g is not None and g["pending"] == 0
            and g["last-delivered-id"] == r.xinfo_stream("events")["last-generated-id"])


def processed(r: redis.Redis) -> set[str]:
    return {f[b"id"].decode() for _, f in r.xrange("processed")} if r.exists("processed") else set()


def pending_by_consumer(r: redis.Redis) -> dict[str, int]:
    try:
        return {c["name"].decode(): c["pending"] for c in r.xinfo_consumers("events", "g")}
    except redis.ResponseError:
        return {}


def test_every_entry_is_acked_through_worker_kills_and_a_redis_restart(
        make_cluster: Any, redis_server: DevRedis) -> None:  # noqa: F811 - the imported fixture
    # Given 4000 numbered entries in a Redis whose AOF is fsynced on every write
    r = redis.Redis.from_url(redis_server.url)
    pipe = r.pipeline(transaction=False)
    for i in range(N):
        pipe.xadd("events", {"n": str(i)})
    added = {entry_id.decode() for entry_id in pipe.execute()}
    # and a topology reading them on 2 workers, paced so that it runs for a few seconds
    cluster = make_cluster(supervisors=1, slots=2)
    conf = [f"redis.url={redis_server.url}", "topology.workers=2", "squall.test.pace.ms=2"]
    args = [a for kv in conf for a in ("--conf", kv)]
    squall_cli(cluster, "submit", str(TOPOLOGY), "--name", "redis-ack", *args)
    poll_for(lambda: len(cluster.worker_pids()) == 2, timeout=30, message="2 workers up")

    # When a worker is SIGKILLed with entries in flight,
    poll_for(lambda: len(processed(r)) > 500, timeout=30, message="processing started")
    slot, pid = min(cluster.worker_pids().items())
    os.kill(pid, signal.SIGKILL)
    held = {name: n for name, n in pending_by_consumer(r).items() if n}
    poll_for(lambda: cluster.worker_pids().get(slot) not in (None, pid), timeout=30,
             message=f"worker on {slot} restarted")
    # Redis is SIGKILLed and restarted,
    before = len(processed(r))
    poll_for(lambda: len(processed(r)) > before + 300, timeout=30, message="processing goes on")
    redis_server.kill()
    redis_server.restart()
    r = redis.Redis.from_url(redis_server.url)
    # and the other worker is SIGKILLed too
    before = len(processed(r))
    poll_for(lambda: len(processed(r)) > before + 300, timeout=30, message="processing after the restart")
    slot, pid = max(cluster.worker_pids().items())
    os.kill(pid, signal.SIGKILL)

    # Then every entry is eventually acked by the group (nothing pending, the last id delivered)
    poll_for(lambda: settled(r) and processed(r) >= added, timeout=60, message="every entry acked")
    # and each was processed at least once, recorded durably in Redis
    assert processed(r) == added
    # the entries the killed task held were taken back by its successor (same consumer name)
    assert held, "the first kill caught no entries in flight"
    consumers = pending_by_consumer(r)
    assert set(consumers) == {"events-0", "events-1"}
    assert all(n == 0 for n in consumers.values())
    r.close()
