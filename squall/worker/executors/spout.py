"""Spout executors: call next_tuple while allowed, track pending trees.

``next_tuple`` runs only while the spout is active, the worker is not under
backpressure, and fewer than ``topology.max.spout.pending`` trees are
pending.  Acks and fails from the ackers reach the task that emitted the
tree, with the user's message id.  The spout also times out its own pending
trees on ``__tick`` (2 buckets rotated every message timeout: a tree never
acked fails between T and 2T), so a lost acker cannot leak them.

A spout also yields to its own worker's bolts: while they have more than
``topology.spout.yield.queued.tuples`` tuples queued between them, it does
not call next_tuple.  The spout, the bolts and the transfer threads share one
GIL, so each tuple the spout adds to a queue that already holds work takes
a share of the core from the bolts and buys nothing but a longer wait.
Across workers this matters most.  The bolts also hold the other workers'
trees, and a worker whose spout keeps the core starves the peers waiting on
it for acks.  The workers then take turns sitting idle, a fifth of the time
each on the cluster benchmark.  Without acking, nothing but the queues'
high watermark bounds a spout, and the bolts' queues grow to it.  Three
rules keep the yield from starving anything:
- a spout with fewer than an eighth of its max spout pending in flight never
  yields, so its share of a saturated bolt is kept;
- a spout with no such bound (acking off, or no max spout pending) yields
  for :data:`YIELD_SECS_IN_A_ROW` (50 ms) at most, then emits a batch anyway;
- spouts that limit their own trees in flight (the checkpoint spout and the
  transactional coordinator) never yield.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Iterable
from typing import Any

from squall.topology.loading import resolve_class
from squall.worker.executors.component import ComponentExecutor
from squall.worker.executors.emit import SpoutTracker, TaskState, spout_emitter
from squall.worker.executors.pending import settle

LATENCY_SAMPLES = 200_000
SUMMARY_SAMPLES = 10_000  # summarise_latencies' subsample
# The p99 of the trees acked since the last snapshot (self-regulation's latency policy judges
# a change by it: the summary's 200,000 samples would take minutes to show one), over the
# newest of them at most.
RECENT_SAMPLES = 2_000
# A spout not bounded by its trees in flight yields for this long in a row at most, then
# emits a batch; while it yields it looks at the queues this often (no ack wakes it: with
# the 1 ms of an idle spout the bolts ran dry in between, pure-Python acking off lost a fifth).
YIELD_SECS_IN_A_ROW = 0.05
# A round of next_tuple calls longer than this ends the turn, so its tuples are sent at once.
SLOW_ROUND_SECS = 0.005
YIELD_WAIT_SECS = 0.0002
AUTOTUNE = "autotune"  # the control the worker's timer sends every autotune period
INITIAL_PENDING = 1000  # where the tuner starts when no max spout pending is set


def make_tuner(conf: dict[str, Any], initial: int | None) -> Any:
    """The configured tuner class (the paper's pluggable one), started at ``initial``; with a
    latency target, the paper's tuner that also keeps complete latency under it."""
    from squall.tuning.autotune import LatencyTargetTuner, PaperTuner

    target = conf.get("topology.max.spout.pending.autotune.latency.ms")
    tolerance = float(conf.get("topology.max.spout.pending.autotune.tolerance", 0.05))
    if target is not None:
        return LatencyTargetTuner(initial or INITIAL_PENDING, target_ms=float(target), tolerance=tolerance)
    cls = resolve_class(conf["topology.max.spout.pending.autotune.class"])
    if isinstance(cls, type) and issubclass(cls, PaperTuner):
        return cls(initial or INITIAL_PENDING, tolerance=tolerance)
    return cls(initial or INITIAL_PENDING)  # a tuner of the user's: the paper's one-argument shape


class SpoutTask:
    __slots__ = ("next_tuple", "spout", "state", "task")

    def __init__(self, task: int, spout: Any, state: TaskState) -> None:
        self.task = task
        self.spout = spout
        self.next_tuple = spout.next_tuple
        self.state = state


def period_p99_ms(latencies: deque[float], trees: int) -> float | None:
    """The p99 (ms) of the last ``trees`` complete latencies (as many as are kept); None if none."""
    n = min(trees, len(latencies))
    if n <= 0:
        return None
    # Copied in one C call, which no other thread can interleave with: iterated in Python
    # they could be cleared under it (a benchmark does) and the worker died of it.
    newest = list(itertools.islice(reversed(latencies), n))
    if not newest:
        return None
    k = len(newest) // 100 + 1  # the k-th largest of n is its p99
    return heapq.nlargest(k, newest)[-1] * 1000


def summarise_latencies(deques: Iterable[deque[float]]) -> dict[str, float] | None:
    """The spout tasks' complete latencies (seconds, one deque of the newest of each) as
    ms: ``count`` every sample kept, the rest (``mean``, ``p50``, ``p99``, ``max``) of an
    even subsample of at most SUMMARY_SAMPLES of them; None without a sample."""
    deques = list(deques)
    n = sum(len(d) for d in deques)
    if not n:
        return None
    # Every step-th sample, each deque read in one C call (the spout cannot append in the
    # middle of one; a deque changed under its iterator raises).  Sorting, or copying,
    # summing and taking the max of, all 200,000 held the GIL for 5-28 ms: every tree
    # in flight waited that long, and a paced spout then made up for it in a burst.
    step = max(1, n // SUMMARY_SAMPLES)
    ordered = sorted(itertools.chain.from_iterable([list(itertools.islice(d, 0, None, step))
                                                     for d in deques]))
    m = len(ordered)
    return {"count": n, "mean": sum(ordered) / m * 1000, "p50": ordered[m // 2] * 1000,
            "p99": ordered[min(m - 1, int(m * 0.99))] * 1000, "max": ordered[-1] * 1000}


class SpoutExecutor(ComponentExecutor):
    def setup(self) -> None:
        self.active = self.host.active
        self.acked = 0
        self.failed = 0
        self.timed_out = 0  # of failed: trees not acked within the message timeout (not a bolt's fail)
        self.latencies: deque[float] = deque(maxlen=LATENCY_SAMPLES)
        self.complete_secs = 0.0  # sum of complete latencies of acked trees (with self.acked: the mean)
        self.snapshot_acked = 0  # self.acked at the last stats_snapshot (recent_p99_ms)
        self.max_pending = self.conf["topology.max.spout.pending"]
        self.tuner: Any = None
        self.batch = self.conf["topology.spout.batch.size"]
        self.wait_secs = self.conf["topology.sleep.spout.wait.strategy.time.ms"] / 1000.0
        self.backpressure = self.host.backpressure
        self.tracker = SpoutTracker(self.acker_tasks, self.host.local_tasks)
        self.yield_above = self.conf["topology.spout.yield.queued.tuples"]
        self.bolt_queues: list[Any] = []
        self.yields_by_trees = False  # the floor of trees in flight applies (else the time limit)
        self.yield_since: float | None = None  # when a spout no trees bound began to yield
        self.spouts: list[SpoutTask] = []
        self.by_task: dict[int, SpoutTask] = {}
        now = self.now = self.host.clock.now
        for task in self.tasks:
            spout, context, state = self.make_instance(task)
            streams = self.build_streams(task, context)
            spout.emit = spout_emitter(self.component, task, streams, self.appends, self.rand64,
                                       self.check, self.always_check, self.host.capture, self.tracker,
                                       now, state)
            if self.host.events is not None:
                self.host.events.attach(self.component, task, spout.emit)
            spout.initialize(self.conf, context)
            st = SpoutTask(task, spout, state)
            self.spouts.append(st)
            self.by_task[task] = st
        self_limiting = any(not getattr(st.spout, "throttled_by_pending", True) for st in self.spouts)
        if self_limiting:
            self.max_pending = None  # the spout limits what it has in flight itself
        elif self.conf["topology.max.spout.pending.autotune"]:
            self.tuner = make_tuner(self.conf, self.max_pending)
            self.max_pending = int(self.tuner.get())
            self._tuned_progress = self.progress(0)
            self._tuned_acked = 0
            for st in self.spouts:  # seen per task by the API, Prometheus and the UI
                self.host.metrics_of(self.component, st.task).gauge(
                    "max_spout_pending", lambda: self.max_pending)
        if self.yield_above and not self_limiting:
            self.bolt_queues = self.host.bolt_queues()
            self.yields_by_trees = self.tracking and self.max_pending is not None
        if self.active:
            for st in self.spouts:
                st.spout.activate()

    def teardown(self) -> None:
        for st in self.spouts:
            st.spout.close()

    @property
    def emitted(self) -> int:
        return sum(st.state.emitted for st in self.spouts)

    @property
    def pending(self) -> int:
        return self.tracker.count

    def idle_wait(self) -> float:
        # Storm's sleep wait strategy: a spout with nothing to emit sleeps 1 ms,
        # but wakes at once for acks and fails.
        if self.yield_since is not None and not self.backpressure.active:
            return YIELD_WAIT_SECS  # no ack will wake it when the bolts catch up: look again soon
        return self.wait_secs if self.active else super().idle_wait()

    def turn(self) -> bool:
        if not self.active or self.backpressure.active:
            # Held back, not yielding: it waits at the idle spout's pace.  Backpressure does
            # not restart the yield's time limit, or its cycles could starve this spout.
            if not self.active:
                self.yield_since = None
            return False
        tracker = self.tracker
        max_pending = self.max_pending
        if self.bolt_queues:
            # Yield to the worker's bolts while they have work queued: see the module doc.
            if self.yields_by_trees:
                may_yield = tracker.count >= max_pending >> 3
            else:
                since = self.yield_since
                may_yield = since is None or self.now() - since < YIELD_SECS_IN_A_ROW
            if may_yield:
                queued = 0
                for q in self.bolt_queues:
                    queued += q.size
                if queued > self.yield_above:
                    if not self.yields_by_trees and self.yield_since is None:
                        self.yield_since = self.now()
                    return False
            self.yield_since = None
        emitted_any = False
        started = self.now()
        for i in range(self.batch):
            emitted = False
            for st in self.spouts:
                if max_pending is not None and tracker.count >= max_pending:
                    break
                before = st.state.emitted
                st.next_tuple()
                if st.state.emitted != before:
                    emitted = True
            if not emitted:
                break
            emitted_any = True
            if i == 0 and self.now() - started > SLOW_ROUND_SECS:
                # A spout that waits in next_tuple (a sleep, a blocking read): what it emitted
                # goes now, not after a whole batch of such waits.
                break
        if tracker.immediate:
            self.ack_immediately()
        return emitted_any

    def ack_immediately(self) -> None:
        immediate = self.tracker.immediate
        items = immediate[:]
        immediate.clear()
        for task, msg_id in items:
            self.acked += 1
            self.by_task[task].spout.ack(msg_id)

    def on_control(self, kind: str, task: int, payload: Any) -> None:
        if kind == AUTOTUNE:
            self.autotune()
        elif kind == "acked" or kind == "failed":
            self.settle(payload, kind == "acked")
        elif kind == "timedout":  # the acker's expiry (the spout's own is the tick's below)
            settled = self.settle(payload, False)
            if settled:
                self.timed_out += settled
                self._hint_timeouts(settled)
        elif kind == "tick":
            expired = self.tracker.pending.rotate()
            self.tracker.count -= len(expired)
            for task_id, msg_id, _t0 in expired.values():
                self.failed += 1
                self.by_task[task_id].spout.fail(msg_id)
            if expired:
                self.timed_out += len(expired)
                self._hint_timeouts(len(expired))
        elif kind == "activate":
            if not self.active:
                self.active = True
                for st in self.spouts:
                    st.spout.activate()
        elif kind == "deactivate":
            if self.active:
                self.active = False
                for st in self.spouts:
                    st.spout.deactivate()
        elif kind == "max_pending":
            self.set_max_pending(payload)
        else:
            super().on_control(kind, task, payload)

    def set_max_pending(self, value: Any) -> None:
        """Self-regulation's max spout pending (squall.tuning.regulator), applied live; it
        replaces the executor's own tuner, and ``None`` gives the conf's value back.  A
        spout that limits itself (throttled_by_pending false) keeps doing so."""
        if any(not getattr(st.spout, "throttled_by_pending", True) for st in self.spouts):
            return
        value = self.conf["topology.max.spout.pending"] if value is None else max(1, int(value))
        if value != self.max_pending:
            self.log.info("max spout pending set by self-regulation", max_spout_pending=value,
                          was=self.max_pending)
        self.tuner = None
        self.max_pending = value
        if self.bolt_queues:
            self.yields_by_trees = self.tracking and value is not None

    def _hint_timeouts(self, n: int) -> None:
        """Say it once a message timeout (the tick's period) at most: trees that time out
        are the symptom users otherwise never see the cause of."""
        cause = ("none was ever acked: does a bolt ack its input (a BasicBolt does), and anchor what "
                 "it emits?" if self.acked == 0 else
                 "a bolt too slow or stuck, or topology.max.spout.pending too high for the timeout")
        self.log.warning("tuple trees timed out", timed_out=n, total_timed_out=self.timed_out,
                         timeout_secs=self.conf["topology.message.timeout.secs"], likely=cause)

    def settle(self, roots: list[int], ok: bool) -> int:
        settled, waited = settle(self.tracker.pending, roots, ok, self.now(), self.latencies, self.by_task)
        self.tracker.count -= settled
        if ok:
            self.acked += settled
            self.complete_secs += waited
        else:
            self.failed += settled
        return settled

    def autotune(self) -> None:
        """The paper's step c): the progress of the last period to the tuner, its value in force."""
        if self.tuner is None:
            return
        acked = self.acked
        progress = self.progress(acked)
        delta, self._tuned_progress = progress - self._tuned_progress, progress
        observe = getattr(self.tuner, "observe_latency", None)
        if observe is not None:  # the period's p99 complete latency, for a latency-aware tuner
            observe(period_p99_ms(self.latencies, acked - self._tuned_acked))
        in_flight = getattr(self.tuner, "observe_in_flight", None)
        if in_flight is not None:  # whether a higher value's trees are still draining
            in_flight(self.tracker.count)
        self._tuned_acked = acked
        self.tuner.auto_tune(delta)
        tuned = max(1, int(self.tuner.get()))
        if tuned != self.max_pending:
            self.log.info("max spout pending tuned", max_spout_pending=tuned, was=self.max_pending,
                             delta_progress=delta)
        self.max_pending = tuned

    def stats_snapshot(self) -> dict[str, Any]:
        out = super().stats_snapshot()
        acked = self.acked  # read once: another thread is counting
        out.update(acked=acked, failed=self.failed, timed_out=self.timed_out, pending=self.tracker.count,
                   complete_secs=self.complete_secs, progress=self.progress(acked),
                   max_pending=self.max_pending)
        fresh = min(acked - self.snapshot_acked, len(self.latencies), RECENT_SAMPLES)
        self.snapshot_acked = acked
        if fresh > 0:
            # One C call over the deque's newest: the spout's thread cannot append meanwhile.
            recent = sorted(itertools.islice(reversed(self.latencies), fresh))
            out["recent_p99_ms"] = recent[min(fresh - 1, int(fresh * 0.99))] * 1000
        return out

    def progress(self, acked: int) -> float:
        """The spouts' own progress where they report one, else the trees they got acked."""
        total = 0.0
        for st in self.spouts:
            try:
                own = st.spout.progress()
            except Exception:  # noqa: BLE001 - a statistic never takes the worker down
                own = None
            total += acked / len(self.spouts) if own is None else own
        return total

    def flush(self) -> None:
        inits = self.tracker.inits
        for task, items in inits.items():
            if items:
                inits[task] = []
                self.control_out.append(("init", task, items))
        super().flush()
