"""Events enriched in Spark by a join with a static Parquet table, aggregated per window.

    squall local examples/spark/enrich.py --duration 60 --conf example.dir=/tmp/squall-spark
    squall submit examples/spark/enrich.py --conf example.dir=/shared/dir --conf topology.workers=2
    python examples/spark/enrich.py [--events 20000] [--dir DIR]     # runs to completion, prints totals

* ``events`` (spout): purchase events ``(event_id, user_id, amount_cents, ts)``,
  with message ids, replayed when they fail;
* ``enrich`` (a :class:`~squall.spark.SparkBolt`, 2 tasks): each micro-batch is joined
  with ``users.parquet`` (``user_id -> region``, written here on first use and
  cached on the Spark server) and aggregated per one-minute window and
  region; each aggregate keeps the row indices it came from
  (``collect_list("__squall_row")``), so it is anchored to exactly those
  events;
* ``write`` (a plain bolt): appends every aggregate to
  ``<example.dir>/results-<task>.jsonl``.

The aggregates are partial (per batch): :func:`read_totals` merges them.
The Spark session comes from ``spark.remote`` if set, otherwise from the
node's server (cluster) or a server this process starts (local mode).
"""

from __future__ import annotations

import json
import os
import random
import tempfile
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

from squall import Bolt, Grouping, Spout, Topology
from squall.spark import SparkBolt

REGIONS = ["eu", "us", "apac", "latam"]
WINDOW_SECS = 60
T0 = 1_700_000_000  # the events' first timestamp (epoch seconds)


def example_dir(conf: dict[str, Any]) -> Path:
    return Path(conf.get("example.dir") or Path(tempfile.gettempdir()) / "squall-spark-example")


def users_table(n_users: int) -> dict[str, list[Any]]:
    """The static dimension table: user -> region, deterministic."""
    rng = random.Random(7)
    return {"user_id": list(range(n_users)), "region": [rng.choice(REGIONS) for _ in range(n_users)]}


def write_users(path: Path, n_users: int) -> None:
    """users.parquet, written once (atomically: several tasks may race)."""
    if path.exists():
        return
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.table({k: pa.array(v, pa.int64() if k == "user_id" else pa.string())
                      for k, v in users_table(n_users).items()})
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    pq.write_table(table, tmp)
    # Readable by the node's Spark server, which reads it: as root, a supervisor runs it
    # as a user of its own, not as this topology's (docs/security.md).
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def make_events(n: int, n_users: int, seed: int = 1) -> list[tuple[int, int, int, int]]:
    """``(event_id, user_id, amount_cents, ts)``: ~40 events per second of event time."""
    rng = random.Random(seed)
    return [(i, rng.randrange(n_users), rng.randrange(100, 100_000), T0 + i // 40) for i in range(n)]


def reference_totals(events: list[tuple[int, int, int, int]],
                     n_users: int) -> dict[tuple[int, str], list[int]]:
    """The same enrichment and aggregation in plain Python: (window, region) -> [events, cents]."""
    region = users_table(n_users)["region"]
    totals: dict[tuple[int, str], list[int]] = defaultdict(lambda: [0, 0])
    for _event_id, user_id, cents, ts in events:
        t = totals[(ts - ts % WINDOW_SECS, region[user_id])]
        t[0] += 1
        t[1] += cents
    return dict(totals)


class Events(Spout):
    outputs = ["event_id", "user_id", "amount_cents", "ts"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        n = conf.get("example.events", 20_000)
        every = len(context.this_component_tasks)
        mine = context.this_task_index
        events = make_events(n, conf.get("example.users", 1000), conf.get("example.seed", 1))
        self.events = {e[0]: e for e in events if e[0] % every == mine}
        self.todo = sorted(self.events, reverse=True)
        self.replay: list[int] = []
        self.acked = 0

    def next_tuple(self) -> None:
        if self.replay:
            event_id = self.replay.pop()
        elif self.todo:
            event_id = self.todo.pop()
        else:
            return
        self.emit(list(self.events[event_id]), tup_id=event_id)

    def ack(self, tup_id: Any) -> None:
        self.acked += 1

    def fail(self, tup_id: Any) -> None:
        self.replay.append(tup_id)


class EnrichAndAggregate(SparkBolt):
    schema = "event_id bigint, user_id bigint, amount_cents bigint, ts bigint"
    outputs = ["window", "region", "events", "amount_cents", "event_ids"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        super().initialize(conf, context)
        self.users_path = example_dir(conf) / "users.parquet"
        write_users(self.users_path, conf.get("example.users", 1000))

    def setup_session(self, spark: Any) -> None:
        # Every new session (first, or after the server restarted): the static
        # table, cached server-side (shared by every session on the server).
        self.users = spark.read.parquet(str(self.users_path)).cache()

    def process_batch(self, df: Any) -> Any:
        from pyspark.sql import functions as F

        window = (F.col("ts") - F.col("ts") % WINDOW_SECS).alias("window")
        return (df.join(self.users, "user_id")
                  .groupBy(window, "region")
                  .agg(F.count("*").alias("events"),
                       F.sum("amount_cents").alias("amount_cents"),
                       F.sort_array(F.collect_list("event_id")).alias("event_ids"),
                       F.collect_list("__squall_row").alias("__squall_rows")))


class WriteResults(Bolt):
    outputs: list[str] = []

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        out = example_dir(conf)
        out.mkdir(parents=True, exist_ok=True)
        self.path = out / f"results-{context.task_id}.jsonl"

    def process(self, tup: Any) -> None:
        v = tup.values
        line = json.dumps({"window": v.window, "region": v.region, "events": v.events,
                           "amount_cents": v.amount_cents, "event_ids": v.event_ids})
        # Written before the ack (the auto-ack after process): a crash replays, never loses.
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


class SparkEnrich(Topology):
    # The enrich tasks wait on Spark, not on a core of their own: a load-aware shuffle (the default)
    # would keep every event with the task beside the spout, so the events are spread evenly.
    config = {"topology.max.spout.pending": 5000, "spark.bolt.batch.size": 2000, "spark.bolt.batch.ms": 500,
              "topology.disable.loadaware.messaging": True}
    events = Events.spec()
    # Two tasks: with topology.workers=2 they run in two workers, sharing the node's server.
    enrich = EnrichAndAggregate.spec(inputs=[events], par=2)
    write = WriteResults.spec(inputs={enrich: Grouping.fields("window")})


def read_results(directory: Path) -> list[dict[str, Any]]:
    """Every complete line written so far (a writer may be midway through the last one)."""
    rows = []
    for path in sorted(Path(directory).glob("results-*.jsonl")):
        text = path.read_text()
        complete = text[: text.rfind("\n") + 1]
        for line in complete.splitlines():
            if line.strip():
                rows.append(json.loads(line))
    return rows


def read_totals(directory: Path) -> tuple[dict[tuple[int, str], list[int]], list[int]]:
    """Merged (window, region) -> [events, cents], and every event id written (duplicates kept)."""
    totals: dict[tuple[int, str], list[int]] = defaultdict(lambda: [0, 0])
    ids: list[int] = []
    for row in read_results(directory):
        t = totals[(row["window"], row["region"])]
        t[0] += row["events"]
        t[1] += row["amount_cents"]
        ids.extend(row["event_ids"])
    return dict(totals), ids


def main() -> int:
    import argparse
    import time

    from squall import LocalCluster
    from squall.testing import poll_for

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--remote", default=None, help="an existing Spark Connect server (sc://...)")
    args = parser.parse_args()
    directory = args.dir or Path(tempfile.mkdtemp(prefix="squall-spark-example-"))
    conf: dict[str, Any] = {"example.dir": str(directory), "example.events": args.events}
    if args.remote:
        conf["spark.remote"] = args.remote
    start = time.monotonic()
    with LocalCluster() as cluster:
        cluster.submit("spark-enrich", SparkEnrich, conf)
        poll_for(lambda: len(set(read_totals(directory)[1])) >= args.events, timeout=600,
                 message=f"all {args.events} events to be written")
    totals, ids = read_totals(directory)
    expected = reference_totals(make_events(args.events, 1000), 1000)
    for (window, region), (events, cents) in sorted(totals.items())[:12]:
        print(f"{window} {region:<6} {events:>6} events {cents / 100:>14,.2f}")
    print(f"{len(totals)} (window, region) totals from {len(ids)} events in {time.monotonic() - start:.1f}s; "
          f"{'exact' if totals == expected else 'DIFFERENT from'} the plain-Python reference; "
          f"results in {directory}")
    return 0 if totals == expected else 1


if __name__ == "__main__":
    raise SystemExit(main())
