"""A click generator for the clickstream example: events pushed into Redis streams.

    .venv/bin/python examples/redis/clickgen.py --redis-url redis://127.0.0.1:6379/0 --events 5000

Each event is an entry ``{page, ts, user}`` (``ts`` in epoch milliseconds,
increasing) in the stream ``clicks:<user mod partitions>``, so one user's
clicks stay in order in one partition.  The events are random but seeded;
:func:`push` returns its own tally per ``page|YYYY-MM-DDTHH:MM`` (UTC), the
exact count the topology must reach.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from typing import Any

STREAM = "clicks:{}"
PARTITIONS = 2
PAGES = ["/", "/pricing", "/docs", "/blog", "/signup", "/login"]
WEIGHTS = [30, 10, 25, 20, 5, 10]


def minute_key(page: str, ts_ms: int) -> str:
    """The state key an event counts under: ``page|YYYY-MM-DDTHH:MM`` in UTC."""
    minute = datetime.fromtimestamp(ts_ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M")
    return f"{page}|{minute}"


def push(conn: Any, events: int, *, partitions: int = PARTITIONS, seed: int = 1, start_ms: int | None = None,
         chunk: int = 500, rate: float | None = None) -> Counter[str]:
    """Push ``events`` clicks (spread over about 5 minutes of event time); their tally per key.

    ``rate``: at most that many events a second (None: as fast as Redis takes them).
    """
    rng = random.Random(seed)
    ts = start_ms if start_ms is not None else int(time.time() * 1000) - 300_000
    step = max(1, 600_000 // max(events, 1))  # mean step: half of it, so ~5 minutes in all
    tally: Counter[str] = Counter()
    began = time.monotonic()
    for first in range(0, events, chunk):
        pipe = conn.pipeline(transaction=False)
        for _ in range(first, min(first + chunk, events)):
            ts += rng.randrange(step)
            page = rng.choices(PAGES, WEIGHTS)[0]
            user = rng.randrange(1000)
            pipe.xadd(STREAM.format(user % partitions), {"page": page, "ts": str(ts), "user": f"u{user}"})
            tally[minute_key(page, ts)] += 1
        pipe.execute()
        if rate:
            ahead = (first + chunk) / rate - (time.monotonic() - began)
            if ahead > 0:
                time.sleep(ahead)
    return tally


def main(argv: list[str] | None = None) -> int:
    import redis

    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rate", type=float, default=None, help="events per second (default: no limit)")
    args = parser.parse_args(argv)
    with redis.Redis.from_url(args.redis_url) as conn:
        tally = push(conn, args.events, seed=args.seed, rate=args.rate)
    print(f"pushed {args.events} clicks into {PARTITIONS} streams ({len(tally)} page-minutes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
