"""Storm's StateQueryExample and JoinExample through the Streams API, for the dev-cluster
tests (tests/streams/test_streams_cluster.py).

``squall.test.dir`` holds the inputs (``words.json``; a ``queries.json`` the test writes
when it wants answers) and gets what the sinks and spouts saw, one JSON value a line:
``<component>-<task>.log`` per sink task, ``acked-<Spout>.log``, ``emitted-<Spout>.log``
(a replay, or a restarted task's emission of what was not acked, is there again),
``restores.log``.  Spouts pace themselves (``squall.test.rate`` a second) so that a worker
killed mid-run finds values flowing.
"""

from __future__ import annotations

import json
import os
import time
from collections import deque
from operator import add
from typing import Any

from squall import Bolt, Spout
from squall.state import CheckpointedSpout
from squall.streams import Duration, PairValueMapper, StreamBuilder, TumblingWindows, ValueMapper

_CONFIG = {"topology.message.timeout.secs": 6, "topology.state.checkpoint.interval.ms": 300,
           "topology.max.spout.pending": 400}


def _log(conf: dict[str, Any], name: str) -> Any:
    return open(os.path.join(conf["squall.test.dir"], name), "a", buffering=1)  # noqa: SIM115


class Paced:
    """At most ``squall.test.rate`` values a second."""

    def start_pacing(self, conf: dict[str, Any]) -> None:
        self.rate = conf.get("squall.test.rate")
        self.started = time.monotonic()
        self.sent = 0

    def may_send(self) -> bool:
        if self.rate and self.sent >= (time.monotonic() - self.started) * self.rate:
            return False
        self.sent += 1
        return True


# -- the state query example: words counted exactly once, queried ---------------------------


class Words(CheckpointedSpout, Paced):
    """A rewindable source of words: the position is an index into ``words.json``."""

    outputs = ["word"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        with open(os.path.join(conf["squall.test.dir"], "words.json")) as f:
            self.words = json.load(f)
        self.pos = 0
        self.restores = _log(conf, "restores.log")
        self.start_pacing(conf)

    def snapshot(self) -> int:
        return self.pos

    def restore(self, position: Any) -> None:
        self.restores.write(f"{json.dumps(position)}\n")
        self.pos = position or 0

    def next_tuple(self) -> None:
        if self.pos < len(self.words) and self.may_send():
            self.emit([self.words[self.pos]])
            self.pos += 1


class Queries(Spout):
    """A plain reliable spout: the words of ``queries.json`` once it appears, replayed on
    failure; each task its share (the i-th word goes to the task of index i mod tasks)."""

    outputs = ["word"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.path = os.path.join(conf["squall.test.dir"], "queries.json")
        self.share = (context.this_task_index, len(context.this_component_tasks))
        self.todo: deque[str] | None = None
        self.acked = _log(conf, "acked-Queries.log")

    def next_tuple(self) -> None:
        if self.todo is None:
            if not os.path.exists(self.path):
                return
            with open(self.path) as f:
                index, tasks = self.share
                self.todo = deque(w for i, w in enumerate(json.load(f)) if i % tasks == index)
        if self.todo:
            word = self.todo.popleft()
            self.emit([word], tup_id=word)

    def ack(self, tup_id: Any) -> None:
        self.acked.write(f"{json.dumps(tup_id)}\n")

    def fail(self, tup_id: Any) -> None:
        if self.todo is not None:
            self.todo.append(tup_id)


class Record(Bolt):
    """A ``to()`` sink: each tuple's values, a JSON line in ``<tag>-<task>.log``; the tag is
    the component's name unless an instance is given one (it travels by value)."""

    outputs = None

    def __init__(self, tag: str | None = None) -> None:
        super().__init__()
        self.tag = tag

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.out = _log(conf, f"{self.tag or context.component_id}-{context.task_id}.log")

    def process(self, tup: Any) -> None:
        self.out.write(json.dumps(list(tup.values)) + "\n")


def state_query_example() -> StreamBuilder:
    """Storm's StateQueryExample: word counts by ``update_state_by_key`` at parallelism 2
    (the CheckpointedSpout runs as one task), queried by ``state_query`` from 2 spout tasks;
    the answers sinked and printed (to the workers' logs)."""
    builder = StreamBuilder()
    counts = (builder.new_stream(Words, ValueMapper(0))
              .repartition(2)
              .map_to_pair(lambda w: (w, 1))
              .update_state_by_key(0, add))
    answers = builder.new_stream(Queries, ValueMapper(0), parallelism=2).state_query(counts)
    answers.to(Record.spec(name="answers"))
    answers.print()
    return builder


StreamsWordCount = state_query_example().build(name="StreamsWordCount", config=_CONFIG)


# -- the join example: (n, n*n) joined with (n, n**3) in event-time windows ----------------


class Squares(Spout, Paced):
    """A reliable spout of (n, n**power, ts = n * 1000) for n below ``squall.test.n``, replaying
    what fails; a restarted task skips what was acked."""

    outputs = ["n", "power", "ts"]
    power = 2

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        me = type(self).__name__
        path = os.path.join(conf["squall.test.dir"], f"acked-{me}.log")
        done: set[int] = set()
        if os.path.exists(path):
            with open(path) as f:
                done = {int(line) for line in f if line.strip()}
        self.todo = deque(n for n in range(conf["squall.test.n"]) if n not in done)
        self.acked = _log(conf, f"acked-{me}.log")
        self.emitted = _log(conf, f"emitted-{me}.log")
        self.start_pacing(conf)

    def next_tuple(self) -> None:
        if self.todo and self.may_send():
            n = self.todo.popleft()
            self.emitted.write(f"{n}\n")  # first: a kill between the two over-counts, never under
            self.emit([n, n**self.power, n * 1000], tup_id=n)

    def ack(self, tup_id: Any) -> None:
        self.acked.write(f"{tup_id}\n")

    def fail(self, tup_id: Any) -> None:
        self.todo.append(tup_id)


class Cubes(Squares):
    power = 3


WINDOW = (TumblingWindows.of(Duration.seconds(2)).with_timestamp_field("ts")
          .with_lag(Duration.seconds(1)).with_late_tuple_stream("late"))


def join_example() -> StreamBuilder:
    """Storm's JoinExample: squares windowed and joined with cubes; the late values sinked
    (the sinks given as instances, as Storm's users write ``new Bolt(...)``)."""
    builder = StreamBuilder()
    squares = builder.new_stream(Squares, PairValueMapper(0, 1))
    cubes = builder.new_stream(Cubes, PairValueMapper(0, 1))
    squares.window(WINDOW).join(cubes).to(Record("joined"))
    builder.late_tuples("late").to(Record("late"))
    return builder


# A shorter message timeout: what the killed worker held replays sooner.
StreamsJoin = join_example().build(name="StreamsJoin", config={**_CONFIG, "topology.message.timeout.secs": 5})
