"""The Storm@Twitter paper's sample topology (§3.4, Figure 8), scaled down.

    spout --shuffle--> distributor --fields(user_id)--> user_count --fields(ts)--> aggregator

The spout stands in for the paper's Kafka "client_event" spout: it emits
``(user_id, ts, event)`` tuples at a fixed offered rate (``paper.rate``
tuples per second in total, shared by its tasks), reliably, with message
ids, and replays what fails.  Like a Kafka consumer it catches up on what
it could not emit while it was stalled (bounded by max spout pending).
The distributor passes events on, partitioned by user; the user count
bolt keeps the unique users it has seen in each one-second bucket and
sends ``(ts, new)`` on, partitioned by the timestamp; the aggregator adds
the counts up per second.  Every bolt anchors and acks (Squall's
auto-anchoring), so a tuple tree spans all three bolts and the spout's
complete latency is the end-to-end latency the paper plots in Figure 10.

Parallelism keeps the paper's proportions (200 / 200 / 300 / 20 tasks),
divided down for a small machine: 2 / 2 / 3 / 1.
"""

from __future__ import annotations

import collections
import random
import time
from typing import Any

from squall import Bolt, Grouping, Spout, Topology

EVENTS = ["following", "unfollowing", "view_tweet", "impression", "click", "favorite"]
USERS = 100_000
BUCKETS_KEPT = 10  # one-second buckets a user count task remembers


class ClientEventSpout(Spout):
    outputs = ["user_id", "ts", "event"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.rng = random.Random(context.task_id * 7919 + int(time.time()))
        tasks = len(context.this_component_tasks)
        self.rate = float(conf.get("paper.rate", 200)) / tasks
        self.started = time.monotonic()
        self.offered = 0  # new tuples emitted (replays not counted: the offered load stays fixed)
        self.next_id = 0
        self.pending: dict[int, list[Any]] = {}
        self.replay: collections.deque[int] = collections.deque()

    def next_tuple(self) -> None:
        if self.replay:
            msg_id = self.replay.popleft()
            values = self.pending.get(msg_id)
            if values is not None:
                self.emit(values, tup_id=msg_id)
                return
        if self.offered >= (time.monotonic() - self.started) * self.rate:
            return
        self.offered += 1
        self.next_id += 1
        values = [self.rng.randrange(USERS), int(time.time()), self.rng.choice(EVENTS)]
        self.pending[self.next_id] = values
        self.emit(values, tup_id=self.next_id)

    def ack(self, tup_id: Any) -> None:
        self.pending.pop(tup_id, None)

    def fail(self, tup_id: Any) -> None:
        if tup_id in self.pending:
            self.replay.append(tup_id)


class Distributor(Bolt):
    outputs = ["user_id", "ts", "event"]

    def process(self, tup: Any) -> None:
        self.emit(list(tup.values))


class UserCount(Bolt):
    outputs = ["ts", "new_users"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.seen: dict[int, set[int]] = {}

    def process(self, tup: Any) -> None:
        user_id, ts = tup.values[0], tup.values[1]
        users = self.seen.get(ts)
        if users is None:
            users = self.seen[ts] = set()
            for old in [t for t in self.seen if t < ts - BUCKETS_KEPT]:
                del self.seen[old]
        new = user_id not in users
        users.add(user_id)
        self.emit([ts, int(new)])


class Aggregator(Bolt):
    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.unique: collections.Counter[int] = collections.Counter()

    def process(self, tup: Any) -> None:
        ts = tup.values[0]
        self.unique[ts] += tup.values[1]
        if len(self.unique) > 2 * BUCKETS_KEPT:
            for old in sorted(self.unique)[:BUCKETS_KEPT]:
                del self.unique[old]


class PaperTopology(Topology):
    config = {"topology.max.spout.pending": 1000, "topology.message.timeout.secs": 10}
    client_events = ClientEventSpout.spec(par=2)
    distributor = Distributor.spec(inputs={client_events: Grouping.shuffle()}, par=2)
    user_count = UserCount.spec(inputs={distributor: Grouping.fields("user_id")}, par=3)
    aggregator = Aggregator.spec(inputs={user_count: Grouping.fields("ts")}, par=1)
