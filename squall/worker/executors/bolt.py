"""Bolt executors: run ``process`` over each input batch and ack/fail into
one combined XOR per tuple tree per turn.

Acks of one turn are combined per root before they go to the acker: XOR is
associative, so the acker sees the same value it would from one message per
tuple, in far fewer messages.
"""

from __future__ import annotations

from typing import Any

from squall.errors import FailedException, SerializationError
from squall.topology.component import Bolt
from squall.topology.tuple import Tuple
from squall.worker.executors.acks import AckTable, run_batch
from squall.worker.executors.component import ComponentExecutor
from squall.worker.executors.emit import TaskState, bolt_emitter

# A stopping executor notices within this many tuples of a long batch; a
# check per tuple would cost ~10% of the word count's throughput.
STOP_CHECK_EVERY = 256
# Executed tuples per input stream are sampled, one in this many (Storm samples
# 5% by default, topology.stats.sample.rate); the executor's totals are exact.
SAMPLE_EVERY = 20


class BoltTask:
    __slots__ = ("auto_ack", "auto_fail", "batch_done", "bolt", "process", "state", "task")

    def __init__(self, task: int, bolt: Any, state: TaskState) -> None:
        self.task = task
        self.bolt = bolt
        self.process = bolt.process
        # Only an overridden hook is called: most bolts have nothing to flush.
        self.batch_done = bolt.batch_done if type(bolt).batch_done is not Bolt.batch_done else None
        self.state = state
        self.auto_ack = bool(bolt.auto_ack)
        self.auto_fail = bool(bolt.auto_fail)


class BoltExecutor(ComponentExecutor):
    def setup(self) -> None:
        self.acks = AckTable()
        self.fails: list[int] = []
        self.executed = 0
        self.acked = 0
        self.failed = 0
        self.executed_by: dict[tuple[str, str], int] = {}  # (source, stream) -> sampled count
        self.sample_at = 0
        self.bolts: dict[int, BoltTask] = {}
        capture = self.host.capture
        for task in self.tasks:
            bolt, context, state = self.make_instance(task)
            streams = self.build_streams(task, context)
            bolt.emit = bolt_emitter(self.component, task, streams, self.appends, self.tracking,
                                     self.rand64, self.check, self.always_check, capture,
                                     bool(bolt.auto_anchor), state)
            if self.host.events is not None:
                self.host.events.attach(self.component, task, bolt.emit)
            bolt.ack = self.ack
            bolt.fail = self.fail
            bolt.initialize(self.conf, context)
            self.bolts[task] = BoltTask(task, bolt, state)

    def teardown(self) -> None:
        for bt in self.bolts.values():
            bt.bolt.cleanup()

    @property
    def emitted(self) -> int:
        return sum(bt.state.emitted for bt in self.bolts.values())

    def ack(self, tup: Tuple) -> None:
        self.acks.add(tup)
        self.acked += 1

    def fail(self, tup: Tuple) -> None:
        am = tup.anchors
        if am:
            self.fails.extend(am)
        self.failed += 1

    def on_data(self, task: int, tuples: list[Tuple]) -> None:
        bt = self.bolts[task]
        process = bt.process
        state = bt.state
        acking = bt.auto_ack and self.tracking
        errors = run_batch(self, bt, tuples, process, state, self.acks if acking else None, self.tracking,
                           STOP_CHECK_EVERY)
        if bt.auto_ack:
            self.acked += len(tuples) - errors
        state.current = None
        n = len(tuples)
        self.executed += n
        i = self.sample_at
        if i < n:
            by = self.executed_by
            while i < n:
                tup = tuples[i]
                key = (tup.component, tup.stream)
                by[key] = by.get(key, 0) + SAMPLE_EVERY
                i += SAMPLE_EVERY
        self.sample_at = i - n
        if bt.batch_done is not None:
            bt.batch_done()

    def stats_snapshot(self) -> dict[str, Any]:
        out = super().stats_snapshot()
        out.update(executed=self.executed, acked=self.acked, failed=self.failed,
                   executed_by={f"{c}:{s}": n for (c, s), n in list(self.executed_by.items())})
        return out

    def on_process_error(self, bt: BoltTask, tup: Tuple, exc: Exception) -> None:
        if isinstance(exc, SerializationError):
            raise exc
        if bt.auto_fail:
            self.fail(tup)
        if isinstance(exc, FailedException):
            self.log.debug("tuple failed by the bolt", reason=str(exc))
        else:
            self.report(exc, bt.task)

    def on_control(self, kind: str, task: int, payload: Any) -> None:
        if kind == "tick":
            bt = self.bolts[task]
            bt.state.current = None
            try:
                bt.bolt.process_tick(payload)
            except Exception as e:  # noqa: BLE001
                if isinstance(e, SerializationError):
                    raise
                self.report(e, task)
            if bt.batch_done is not None:
                bt.batch_done()
        else:
            super().on_control(kind, task, payload)

    def flush(self) -> None:
        if self.acks:  # grouped by acker in one pass
            ackers = self.acker_tasks
            for task, group in zip(ackers, self.acks.drain_by(len(ackers)), strict=True):
                if group:
                    self.control_out.append(("ack", task, group))
        if self.fails:
            self.send_to_ackers("fail", self.fails, lambda root: root)
            self.fails = []
        super().flush()

    def send_to_ackers(self, kind: str, items: list[Any], root_of: Any) -> None:
        ackers = self.acker_tasks
        if len(ackers) == 1:
            self.control_out.append((kind, ackers[0], items))
            return
        groups: dict[int, list[Any]] = {}
        n = len(ackers)
        for item in items:
            groups.setdefault(ackers[root_of(item) % n], []).append(item)
        self.control_out.extend((kind, task, group) for task, group in groups.items())
