"""docs/redis.md's clickstream example, run as the page says: one command, its own redis-server."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import redis

from examples.redis.clickgen import push
from examples.redis.clickstream import stored_counts
from squall.contrib.redis.devserver import DevRedis
from squall.testing import poll_for
from tests.cluster.conftest import make_cluster, squall_cli  # noqa: F401 - make_cluster is a fixture

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "redis" / "clickstream.py"


def test_clickstream_example_counts_every_click_exactly_once() -> None:
    # When the example runs with its own Redis
    proc = subprocess.run([sys.executable, str(EXAMPLE), "--events", "3000", "--timeout", "60"],
                          capture_output=True, text=True, timeout=110, cwd=REPO, check=False)
    # Then it exits 0, says the counts are exact, and how to look at them
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "exact: all 3000 clicks counted once each" in proc.stdout
    assert re.search(r"redis-cli -p \d+ HGETALL squall:state:clickstream", proc.stdout)


def test_clickstream_example_against_a_given_redis_leaves_the_counts_there(redis_server: DevRedis) -> None:
    # Given a Redis of the user's, holding stale clicks and counts from an earlier run
    with redis.Redis.from_url(redis_server.url) as conn:
        conn.xadd("clicks:0", {"page": "/old", "ts": "0", "user": "u1"})
        conn.hset("squall:state:clickstream", "/old|1970-01-01T00:00", '{"value": 5, "txid": 99}')
    # When the example runs against it
    proc = subprocess.run([sys.executable, str(EXAMPLE), "--events", "2000", "--redis-url", redis_server.url,
                           "--timeout", "60"],
                          capture_output=True, text=True, timeout=110, cwd=REPO, check=False)
    # Then it starts afresh, counts exactly, and leaves the counts in that Redis
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "exact: all 2000 clicks" in proc.stdout
    with redis.Redis.from_url(redis_server.url) as conn:
        stored = conn.hgetall("squall:state:clickstream")
    assert b"/old|1970-01-01T00:00" not in stored
    assert sum(int(v.split(b'"value":')[1].split(b",")[0]) for v in stored.values()) == 2000


def test_clickstream_example_is_submitted_to_a_cluster(make_cluster: Any,  # noqa: F811
                                                        redis_server: DevRedis) -> None:
    # Given clicks pushed by the example's generator, and a dev cluster
    with redis.Redis.from_url(redis_server.url) as conn:
        tally = push(conn, 1500, seed=4)
    cluster = make_cluster(supervisors=1, slots=2)
    # When docs/redis.md's command submits the example with the Redis URL
    squall_cli(cluster, "submit", str(EXAMPLE), "--conf", f"redis.url={redis_server.url}",
               "--conf", "topology.workers=2")
    # Then its workers count every click exactly once into the hash
    poll_for(lambda: stored_counts(redis_server.url, "clickstream") == tally, timeout=60,
             message="the clicks counted on the cluster")
