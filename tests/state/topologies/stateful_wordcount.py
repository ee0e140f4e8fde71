"""Stateful word counts for the cluster tests: SQLite state, workers killed mid-run.

``squall.test.dir`` holds ``sentences.json``; the counts live in the
topology's checkpointed state (``<squall.state.dir>/<definition name>.sqlite``), which
the test reads.  The counter reads two splitters, one of them slow, so its
two inputs deliver each checkpoint far apart.  A file ``kill-in-prepare`` in
the test directory makes a counter task SIGKILL its own worker in
``pre_prepare`` once another task has prepared that txid: a checkpoint
prepared and never committed.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import time
from contextlib import closing
from typing import Any

from squall import Bolt, Grouping, Spout, Topology
from squall.state import CheckpointedSpout, StatefulBolt


def _sentences(conf: dict[str, Any]) -> list[list[Any]]:
    with open(os.path.join(conf["squall.test.dir"], "sentences.json")) as f:
        return json.load(f)


class Paced:
    """Emit at most squall.test.rate sentences a second, so that kills land mid-run."""

    def start_pacing(self, conf: dict[str, Any]) -> None:
        self.rate = conf.get("squall.test.rate")
        self.started = time.monotonic()
        self.sent = 0

    def may_send(self) -> bool:
        if self.rate and self.sent >= (time.monotonic() - self.started) * self.rate:
            return False
        self.sent += 1
        return True


class RewindingSentences(CheckpointedSpout, Paced):
    """A rewindable source: the position is an index into the file."""

    outputs = ["id", "sentence"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.sentences = _sentences(conf)
        self.pos = 0
        self.restores = open(os.path.join(conf["squall.test.dir"], "restores.log"), "a", buffering=1)  # noqa: SIM115
        self.start_pacing(conf)

    def snapshot(self) -> int:
        return self.pos

    def restore(self, position: Any) -> None:
        self.restores.write(f"{position}\n")
        self.pos = position or 0

    def next_tuple(self) -> None:
        if self.pos < len(self.sentences) and self.may_send():
            key, sentence = self.sentences[self.pos]
            self.emit([int(key), sentence])
            self.pos += 1


class ReliableSentences(Spout, Paced):
    """A plain reliable spout: replays what fails, remembers what was acked."""

    outputs = ["id", "sentence"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.sentences = dict(_sentences(conf))
        path = os.path.join(conf["squall.test.dir"], "acked.log")
        done = set()
        if os.path.exists(path):
            with open(path) as f:
                done = {line.strip() for line in f if line.strip()}
        self.todo = [k for k in sorted(self.sentences, key=int) if k not in done]
        self.acked = open(path, "a", buffering=1)  # noqa: SIM115
        self.start_pacing(conf)

    def next_tuple(self) -> None:
        if self.todo and self.may_send():
            key = self.todo.pop(0)
            self.emit([int(key), self.sentences[key]], tup_id=key)

    def ack(self, tup_id: Any) -> None:
        self.acked.write(f"{tup_id}\n")

    def fail(self, tup_id: Any) -> None:
        self.todo.append(tup_id)


class SplitEven(Bolt):
    outputs = ["word"]
    parity = 0

    def process(self, tup: Any) -> None:
        if tup.values.id % 2 == self.parity:
            for word in tup.values.sentence.split():
                self.emit([word])


class SplitOddSlowly(SplitEven):
    parity = 1

    def process(self, tup: Any) -> None:
        time.sleep(0.003)  # simulated work: this input's checkpoints arrive late
        super().process(tup)


class CountWords(StatefulBolt):
    outputs = ["word", "count"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.dir = conf["squall.test.dir"]
        self.db = os.path.join(conf["squall.state.dir"], f"{context.definition_name}.sqlite")
        self.me = f"{context.component_id}/{context.task_id}"

    def init_state(self, state: Any) -> None:
        self.counts = state

    def process(self, tup: Any) -> None:
        word = tup.values.word
        n = self.counts.get(word, 0) + 1
        self.counts.put(word, n)
        self.emit([word, n])

    def pre_prepare(self, txid: int) -> None:
        marker = os.path.join(self.dir, "kill-in-prepare")
        if os.path.exists(marker) and self._another_prepared(txid):
            os.unlink(marker)
            # Written whole, then renamed: the test reads it the moment it appears.
            done = os.path.join(self.dir, "killed-in-prepare")
            with open(done + ".tmp", "w") as f:
                f.write(str(txid))
            os.replace(done + ".tmp", done)
            os.kill(os.getpid(), signal.SIGKILL)

    def _another_prepared(self, txid: int) -> bool:
        with closing(sqlite3.connect(self.db, timeout=5)) as conn:
            rows = conn.execute("SELECT key, value FROM squall_state WHERE key LIKE '%/prepared'").fetchall()
        return any(key != f"{self.me}/prepared" and value != "null" and json.loads(value)["txid"] == txid
                   for key, value in rows)


_CONFIG = {"topology.message.timeout.secs": 6, "topology.state.checkpoint.interval.ms": 300,
           "topology.max.spout.pending": 400}


class ExactWordCount(Topology):
    config = _CONFIG
    sentences = RewindingSentences.spec()
    even = SplitEven.spec(inputs=[sentences], par=2)
    odd = SplitOddSlowly.spec(inputs=[sentences])
    count = CountWords.spec(inputs={even: Grouping.fields("word"), odd: Grouping.fields("word")}, par=2)


class ReliableWordCount(Topology):
    config = _CONFIG
    sentences = ReliableSentences.spec()
    even = SplitEven.spec(inputs=[sentences], par=2)
    odd = SplitOddSlowly.spec(inputs=[sentences])
    count = CountWords.spec(inputs={even: Grouping.fields("word"), odd: Grouping.fields("word")}, par=2)
