"""Transactional topologies for the tests, with failures injected on demand.

A test makes a :class:`Run` (what the components report, and which failures
to inject), registers it under a name and passes ``test.run=<name>`` in the
topology config; the components find it through that key.  Local mode only:
everything lives in this process.
"""

from __future__ import annotations

import random
import threading
from collections import Counter, defaultdict
from typing import Any

from squall import Bolt, FailedException, Grouping
from squall.state import MemoryStore, OpaqueValue, TransactionalMap
from squall.transactional import (
    BatchBolt,
    Committer,
    MemoryTransactionalSpout,
    OpaqueMemoryTransactionalSpout,
    TransactionalTopology,
)

RUNS: dict[str, Run] = {}
VOCAB = [f"w{i}" for i in range(40)]


def sentences(partitions: int, per_partition: int, seed: int = 1) -> list[list[list[str]]]:
    rng = random.Random(seed)
    return [[[" ".join(rng.choices(VOCAB, k=5))] for _ in range(per_partition)] for _ in range(partitions)]


class Run:
    """One test's shared record and knobs."""

    def __init__(self, name: str, **knobs: Any) -> None:
        self.name = name
        self.lock = threading.Lock()
        self.store = MemoryStore(name)
        self.knobs = knobs
        self.commits: list[tuple[int, int]] = []  # (txid, attempt id) of each successful finish_batch
        self.partials: list[int] = []  # txids whose partial (processing-phase) batches finished
        self.emitted: dict[tuple[int, int], list[Any]] = defaultdict(list)  # (txid, attempt) -> values
        self.injected: Counter[str] = Counter()
        self.forced: set[tuple[str, int]] = set()
        self.commit_gate = threading.Event()
        self.commit_gate.set()
        RUNS[name] = self

    def chance(self, knob: str, attempt: Any, task: int) -> bool:
        """Inject failure ``knob`` for this attempt at this task?  Decided per
        attempt, so a replay (a new attempt) decides again.  A knob given as
        ``{"p": probability, "txids": [...]}`` also fails the first attempt of
        those txids for sure, so that a test sees every kind of failure."""
        p = self.knobs.get(knob, 0.0)
        if not p:
            return False
        forced = set(p.get("txids", ())) if isinstance(p, dict) else set()
        if isinstance(p, dict):
            p = p.get("p", 0.0)
        with self.lock:
            must = attempt.txid in forced and (knob, attempt.txid) not in self.forced
            if must:
                self.forced.add((knob, attempt.txid))
        hit = must or random.Random(f"{knob}-{attempt.attempt_id}-{task}").random() < p
        if hit:
            with self.lock:
                self.injected[knob] += 1
        return hit

    def record(self, kind: str, item: Any) -> None:
        with self.lock:
            getattr(self, kind).append(item)

    def counts(self) -> dict[str, int]:
        m = TransactionalMap(self.store)
        return {w: n for w, n in zip(VOCAB, m.get_many(VOCAB), strict=True) if n}

    def committed_txids(self) -> list[int]:
        with self.lock:
            return [t for t, _a in self.commits]


def run_of(conf: dict[str, Any]) -> Run:
    return RUNS[conf["test.run"]]


class Sentences(MemoryTransactionalSpout):
    """The memory spout, recording what each attempt emitted; may raise."""

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        super().initialize(conf, context)
        self.run = run_of(conf)

    def _emit_range(self, attempt: Any, emit: Any, partition: int, start: int, end: int) -> None:
        if self.run.chance("emitter_error", attempt, partition):
            msg = f"injected emitter error in partition {partition}"
            raise RuntimeError(msg)
        for values in self.partitions[partition][start:end]:
            with self.run.lock:
                self.run.emitted[(attempt.txid, attempt.attempt_id)].append((partition, *values))
            emit([attempt, *values])


class Split(Bolt):
    """A plain bolt inside the transactional topology (the seed's BasicBolt kind)."""

    outputs = ["tx", "word"]

    def process(self, tup: Any) -> None:
        for word in tup.values.sentence.split():
            self.emit([tup.values[0], word])


class PartialCount(BatchBolt):
    outputs = ["tx", "word", "count"]

    def initialize(self, conf: dict[str, Any], context: Any, attempt: Any) -> None:
        self.run = run_of(conf)
        self.attempt = attempt
        self.task = context.task_id
        self.counts: Counter[str] = Counter()

    def process(self, tup: Any) -> None:
        if self.run.chance("process_failure", self.attempt, self.task) and not self.counts:
            raise FailedException("injected")
        self.counts[tup.values.word] += 1

    def finish_batch(self) -> None:
        if self.run.chance("finish_failure", self.attempt, self.task):
            raise FailedException("injected")
        for word, n in self.counts.items():
            self.emit([self.attempt, word, n])
        self.run.record("partials", self.attempt.txid)


class CommitCounts(Committer, BatchBolt):
    """Adds a batch's word counts to the store, once per txid.  May fail
    before writing, or after (a replay must then skip the write)."""

    outputs = []

    def initialize(self, conf: dict[str, Any], context: Any, attempt: Any) -> None:
        self.run = run_of(conf)
        self.attempt = attempt
        self.task = context.task_id
        self.counts: Counter[str] = Counter()

    def process(self, tup: Any) -> None:
        self.counts[tup.values.word] += tup.values.count

    def finish_batch(self) -> None:
        run = self.run
        run.commit_gate.wait(30)
        if run.chance("commit_failure_before", self.attempt, self.task):
            raise FailedException("injected before the write")
        TransactionalMap(run.store).increment(self.attempt.txid, dict(self.counts))
        if run.chance("commit_failure_after", self.attempt, self.task):
            raise RuntimeError("injected after the write")  # reported, the batch fails all the same
        run.record("commits", (self.attempt.txid, self.attempt.attempt_id))


class WordCount(TransactionalTopology):
    config = {"topology.max.spout.pending": 3}
    spout = Sentences.spec(data=sentences(4, 30), fields=["sentence"], take_per_batch=4, par=2)
    split = Split.spec(inputs=[spout], par=2)
    partial = PartialCount.spec(inputs={split: Grouping.fields("word")}, par=3)
    commit = CommitCounts.spec(inputs={partial: Grouping.fields("word")}, par=2)


def expected_counts(data: list[list[list[str]]]) -> dict[str, int]:
    return dict(Counter(w for part in data for (s,) in part for w in s.split()))


# -- the seed's global count, on an opaque spout whose batches change on replay --


class ShiftingNumbers(OpaqueMemoryTransactionalSpout):
    """Each attempt takes a different number of tuples (1..take_per_batch): a
    replayed transaction carries a different batch, as an opaque spout may."""

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        super().initialize(conf, context)
        self.run = run_of(conf)
        self.batches_left *= self.take  # batches may be as small as 1 tuple

    def batch_size(self, attempt: Any, partition: int) -> int:
        return random.Random(f"{attempt.attempt_id}-{partition}").randint(1, self.take)

    def _emit_range(self, attempt: Any, emit: Any, partition: int, start: int, end: int) -> None:
        for values in self.partitions[partition][start:end]:
            with self.run.lock:
                self.run.emitted[(attempt.txid, attempt.attempt_id)].append((partition, *values))
            emit([attempt, *values])


class BatchSum(BatchBolt):
    outputs = ["tx", "sum"]

    def initialize(self, conf: dict[str, Any], context: Any, attempt: Any) -> None:
        self.run = run_of(conf)
        self.attempt, self.task, self.sum = attempt, context.task_id, 0

    def process(self, tup: Any) -> None:
        self.sum += tup.values.n

    def finish_batch(self) -> None:
        self.emit([self.attempt, self.sum])
        self.run.record("partials", self.attempt.txid)


class OpaqueTotal(Committer, BatchBolt):
    outputs = []

    def initialize(self, conf: dict[str, Any], context: Any, attempt: Any) -> None:
        self.run = run_of(conf)
        self.attempt, self.task, self.sum = attempt, context.task_id, 0

    def process(self, tup: Any) -> None:
        self.sum += tup.values.sum

    def finish_batch(self) -> None:
        run = self.run
        run.commit_gate.wait(30)
        if run.chance("commit_failure_before", self.attempt, self.task):
            raise FailedException("injected")
        OpaqueValue(run.store, "total").increment(self.attempt, self.sum)
        if run.chance("commit_failure_after", self.attempt, self.task):
            raise FailedException("injected after the write")
        run.record("commits", (self.attempt.txid, self.attempt.attempt_id))


NUMBERS = [[[p * 1000 + i] for i in range(1, 41)] for p in range(3)]


class OpaqueSum(TransactionalTopology):
    config = {"topology.max.spout.pending": 4}
    spout = ShiftingNumbers.spec(data=NUMBERS, fields=["n"], take_per_batch=5, par=2)
    partial = BatchSum.spec(inputs=[spout], par=2)
    total = OpaqueTotal.spec(inputs={partial: Grouping.global_()})


class GlobalTotal(TransactionalTopology):
    """The same sum over the partitioned (exactly replayable) memory spout."""

    config = {"topology.max.spout.pending": 3}
    spout = MemoryTransactionalSpout.spec(data=NUMBERS, fields=["n"], take_per_batch=5, par=2)
    partial = BatchSum.spec(inputs=[spout], par=2)
    total = OpaqueTotal.spec(inputs={partial: Grouping.global_()})
