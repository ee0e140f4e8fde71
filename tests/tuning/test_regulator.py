"""Self-regulation's pure core: signals from cumulative counters, the policies, and the
loop that acts, judges and undoes (squall.tuning.signals, policies, regulator)."""

from __future__ import annotations

import dataclasses
import json

from squall.tuning.policies import Settings, Shape, scale_up
from squall.tuning.regulator import Regulator
from squall.tuning.signals import ComponentSignals, ExecutorReading, Reading, Signals, WorkerReading, signals

SETTINGS = Settings(rounds=2, quiet_rounds=3, settle_rounds=2, cooldown_secs=100, max_workers=3)


def comp(name: str, executors: int = 1, capacity: float = 0.5, congested: float = 0.0,
         executed: float = 100.0, acked: float = 0.0, p99: float | None = None, pending: int | None = None,
         cpu: float = 0.2,
         shares: tuple[float, ...] = (), mean: float | None = None) -> ComponentSignals:
    return ComponentSignals(name=name, executors=executors, capacity=capacity,
                            capacity_mean=capacity if mean is None else mean, congested=congested,
                            executed_rate=executed, acked_rate=acked, failed_rate=0.0, complete_ms=None,
                            p99_ms=p99, pending=pending, max_pending=None,
                            shares=shares or tuple(1 / executors for _ in range(executors)), worker_cpu=cpu)


def round_of(t: float, *components: ComponentSignals, cpu: float = 0.2) -> Signals:
    return Signals(time=t, components={c.name: c for c in components}, missing=[],
                   workers_cpu={("n", 1): cpu})


def shape(count: int = 1, tasks: int = 4, workers: int = 1, free: int = 2,
          pending: int | None = None) -> Shape:
    return Shape(executors={"spout": 1, "count": count}, tasks={"spout": 1, "count": tasks},
                 spouts=frozenset({"spout"}), workers=workers, free_slots=free, baseline_workers=workers,
                 max_pending={"spout": pending})


def busy(t: float, executors: int = 1, thr: float = 50.0, capacity: float = 0.97,
         cpu: float = 0.2) -> Signals:
    return round_of(t, comp("spout", acked=thr),
                    comp("count", executors, capacity=capacity, executed=thr, cpu=cpu))


def test_signals_are_rates_over_the_round_and_a_restarted_worker_is_missing() -> None:
    inc = ("n", "1", 10)
    before = Reading(0.0, {(1, 1): ExecutorReading("count", inc, 0.0, busy_secs=1.0, executed=100),
                           (2, 2): ExecutorReading("count", inc, 0.0, busy_secs=0.0, executed=0),
                           (3, 3): ExecutorReading("spout", inc, 0.0, acked=10, complete_secs=0.1, pending=5,
                                                   max_pending=8)},
                     {("n", 1): WorkerReading(inc, 0.0, 3.0, ((1, 1), (2, 2), (3, 3)))})
    after = Reading(2.0, {(1, 1): ExecutorReading("count", inc, 2.0, busy_secs=2.8, executed=300,
                                                  backpressure_secs=0.5),
                          (2, 2): ExecutorReading("count", inc, 2.0, busy_secs=0.2, executed=100),
                          (3, 3): ExecutorReading("spout", inc, 2.0, acked=30, complete_secs=0.5, pending=7,
                                                  max_pending=8)},
                    {("n", 1): WorkerReading(inc, 2.0, 4.0, ((1, 1), (2, 2), (3, 3)), {"spout": 12.5})})
    s = signals(before, after, {(1, 1): "count", (2, 2): "count", (3, 3): "spout"})
    assert s.complete
    count, spout = s.components["count"], s.components["spout"]
    assert abs(count.capacity - 0.9) < 1e-9 and abs(count.capacity_mean - 0.5) < 1e-9
    assert count.congested == 0.25 and count.executed_rate == 150.0
    assert count.shares == (2 / 3, 1 / 3) and count.worker_cpu == 0.5
    assert spout.acked_rate == 10.0 and abs(spout.complete_ms - 20.0) < 1e-9  # 0.4 s over 20 trees
    assert spout.p99_ms == 12.5 and spout.pending == 7 and spout.max_pending == 8
    later = {e: dataclasses.replace(r, time=3.0) for e, r in after.executors.items()}
    restarted = Reading(3.0, {**later, (1, 1): ExecutorReading("count", ("n", "1", 11), 3.0)}, after.workers)
    s2 = signals(after, restarted, {(1, 1): "count", (2, 2): "count", (3, 3): "spout"})
    assert s2.missing == [(1, 1)] and not s2.complete
    assert signals(after, after, {(2, 2): "count"}).missing == [(2, 2)]  # the same beat read twice
    timed = Reading(4.0, {(1, 1): ExecutorReading("count", inc, 4.0, busy_secs=4.8, cpu_secs=1.5)}, {})
    earlier = Reading(2.0, {(1, 1): ExecutorReading("count", inc, 2.0, busy_secs=2.8, cpu_secs=0.5)}, {})
    assert signals(earlier, timed, {(1, 1): "count"}).components["count"].cpu_share == 0.5


def test_an_overloaded_waiting_bolt_gets_executors_for_the_target_capacity_then_is_judged_helped() -> None:
    r = Regulator(SETTINGS)
    assert r.round(0, shape(), busy(0)).kind == "none"  # one round is not a symptom
    step = r.round(1, shape(), busy(1))
    assert step.kind == "act"
    assert step.resolution == {"executors": {"count": 2}}  # ceil(0.97 / 0.6), never past 4 tasks
    assert "waiting" in step.entry["diagnosis"] and "overloaded" in step.entry["symptom"]
    # Until the new shape runs, nothing is judged.
    assert r.round(2, shape(), busy(2)).reason == "waiting for the new shape"
    assert r.round(3, shape(2), busy(3, 2, thr=90, capacity=0.55)).kind == "wait"
    done = r.round(4, shape(2), busy(4, 2, thr=92, capacity=0.5))
    assert done.kind == "none"
    assert r.actions[-1]["status"] == "helped" and "50.0 -> 91.0" in r.actions[-1]["outcome"]


def test_an_action_that_did_not_help_is_undone_and_not_retried_during_its_cool_down() -> None:
    r = Regulator(SETTINGS)
    r.round(0, shape(), busy(0))
    assert r.round(1, shape(), busy(1)).kind == "act"
    r.round(2, shape(2), busy(2, 2))
    undo = r.round(3, shape(2), busy(3, 2))  # the same throughput, still saturated
    assert undo.kind == "undo" and undo.resolution == {"executors": {"count": 1}}
    assert r.actions[-1]["status"] == "undone"
    r.round(4, shape(), busy(4))
    noted = r.round(5, shape(), busy(5))
    assert noted.kind == "none" and r.actions[-1]["status"] == "noted"
    assert "cool-down" in r.actions[-1]["outcome"]
    assert r.round(6, shape(), busy(6)).kind == "none" and r.actions[-1]["status"] == "noted"
    assert len(r.actions) == 2  # noted once while it lasts
    assert r.round(200, shape(), busy(200)).kind == "act"  # the cool-down is over


def test_a_cpu_bound_bolt_gets_a_worker_where_a_slot_is_free_and_says_when_none_is() -> None:
    window = [busy(0, cpu=0.98), busy(1, cpu=0.98)]
    p = scale_up(window, shape(), SETTINGS, "count")
    assert p.workers == 2 and p.executors == {"count": 2} and "CPU bound" in p.diagnosis
    full = scale_up(window, shape(free=0), SETTINGS, "count")
    assert full.workers is None and "no free slot" in full.diagnosis
    ceiling = scale_up(window, shape(workers=3), SETTINGS, "count")
    assert ceiling.workers is None and "ceiling of 3 workers" in ceiling.diagnosis
    # Where threads report their CPU time, that decides: a loaded machine may give a
    # computing worker much less than a core, and a waiting one may share a busy worker.
    computing = [round_of(t, comp("spout"), dataclasses.replace(comp("count", capacity=0.97, cpu=0.4),
                                                                cpu_share=0.9)) for t in (0, 1)]
    p = scale_up(computing, shape(), SETTINGS, "count")
    assert p.workers == 2 and "CPU bound: it computes 90% of its busy time" in p.diagnosis
    waiting = [round_of(t, comp("spout"), dataclasses.replace(comp("count", capacity=0.97, cpu=0.95),
                                                              cpu_share=0.05)) for t in (0, 1)]
    p = scale_up(waiting, shape(), SETTINGS, "count")
    assert p.workers is None and "waiting: it computes 5% of its busy time" in p.diagnosis


def test_a_bolt_at_its_task_count_and_a_skewed_bolt_are_noted_not_scaled() -> None:
    r = Regulator(SETTINGS)
    r.round(0, shape(4), busy(0, 4))
    assert r.round(1, shape(4), busy(1, 4)).kind == "none"
    assert "as many executors as it has tasks" in r.actions[-1]["diagnosis"]
    r.round(2, shape(4), busy(2, 4, cpu=0.31))  # the same finding, its numbers moved: not news
    assert len(r.actions) == 1
    skewed = [round_of(t, comp("spout"), comp("count", 4, capacity=0.95, shares=(0.85, 0.05, 0.05, 0.05),
                                              mean=0.3)) for t in (0, 1)]
    p = scale_up(skewed, shape(4, tasks=8), SETTINGS, "count")
    assert not p.acts and "data skew" in p.diagnosis


def test_an_idle_bolt_is_scaled_down_after_the_quiet_rounds_and_undone_when_that_overloads_it() -> None:
    r = Regulator(SETTINGS)
    idle = [round_of(t, comp("spout", acked=20), comp("count", 4, capacity=0.1, executed=20))
            for t in range(3)]
    assert r.round(0, shape(4), idle[0]).kind == "none"
    assert r.round(1, shape(4), idle[1]).kind == "none"  # not quiet long enough
    step = r.round(2, shape(4), idle[2])
    assert step.kind == "act" and step.resolution == {"executors": {"count": 1}}
    r.round(3, shape(1), busy(3, 1, thr=20))
    undo = r.round(4, shape(1), busy(4, 1, thr=20))
    assert undo.kind == "undo" and undo.resolution == {"executors": {"count": 4}}


def test_latency_over_target_lowers_max_spout_pending_by_littles_law() -> None:
    settings = Settings(rounds=2, quiet_rounds=5, settle_rounds=1, latency_p99_ms=20.0)
    r = Regulator(settings)
    slow = [round_of(t, comp("spout", acked=100, p99=80.0, pending=400), comp("count", capacity=0.5))
            for t in range(2)]
    r.round(0, shape(pending=400), slow[0])
    step = r.round(1, shape(pending=400), slow[1])
    assert step.kind == "act" and step.resolution == {"max_pending": {"spout": 90}}  # 400 * 20/80 * 0.9
    draining = round_of(2, comp("spout", acked=100, p99=70.0, pending=300), comp("count", capacity=0.5))
    assert r.round(2, shape(pending=90), draining).reason == "waiting for the new shape"
    drained = round_of(3, comp("spout", acked=100, p99=40.0, pending=90), comp("count", capacity=0.5))
    assert r.round(3, shape(pending=90), drained).reason == "waiting for the trees in flight to drain"
    fast = round_of(4, comp("spout", acked=100, p99=15.0, pending=90), comp("count", capacity=0.5))
    assert r.round(4, shape(pending=90), fast).kind == "none"
    assert r.actions[-1]["status"] == "helped"


def test_nothing_moves_while_blocked_or_while_executors_are_not_reporting() -> None:
    r = Regulator(SETTINGS)
    assert r.round(0, shape(), busy(0), blocked="rebalancing").kind == "wait"
    partial = busy(1)
    partial.missing.append((5, 5))
    assert r.round(1, shape(), partial).reason == "1 executors not reporting a whole round"
    assert not r.window


def test_the_state_survives_a_failover_as_json() -> None:
    r = Regulator(SETTINGS)
    r.round(0, shape(), busy(0))
    r.round(1, shape(), busy(1))
    saved = json.loads(json.dumps(r.to_dict()))
    again = Regulator(SETTINGS, saved)  # the new leader: judges the action the old one took
    again.round(2, shape(2), busy(2, 2, thr=90, capacity=0.5))
    again.round(3, shape(2), busy(3, 2, thr=90, capacity=0.5))
    assert again.actions[0]["status"] == "helped" and again.next_id == 2


def test_the_shell_failing_an_action_marks_it_and_frees_the_loop() -> None:
    r = Regulator(SETTINGS)
    r.round(0, shape(), busy(0))
    step = r.round(1, shape(), busy(1))
    assert step.entry is not None
    r.failed(step.entry["id"], "rebalance refused: the topology is being killed")
    assert r.actions[-1]["status"] == "failed" and r.evaluating is None


def test_a_bolt_at_its_task_count_leaves_the_latency_to_max_spout_pending() -> None:
    settings = Settings(rounds=2, quiet_rounds=5, settle_rounds=1, latency_p99_ms=50.0)
    r = Regulator(settings)
    jammed = [round_of(t, comp("spout", acked=1000, p99=400.0, pending=400),
                       comp("count", 4, capacity=0.99, executed=1000)) for t in range(2)]
    r.round(0, shape(4, pending=400), jammed[0])
    step = r.round(1, shape(4, pending=400), jammed[1])
    assert step.kind == "act" and step.resolution == {"max_pending": {"spout": 45}}
    assert step.entry is not None and step.entry["policy"] == "max spout pending"


def test_a_bolt_cooling_down_does_not_keep_another_idle_bolt_from_shrinking() -> None:
    r = Regulator(SETTINGS)
    r.cooldowns["scale down:count"] = 1000.0

    def idle(t: float) -> Signals:
        return round_of(t, comp("spout", acked=20), comp("count", 4, capacity=0.05, executed=20),
                        comp("split", 4, capacity=0.05, executed=20))

    wide = Shape(executors={"spout": 1, "count": 4, "split": 4}, tasks={"spout": 1, "count": 4, "split": 4},
                 spouts=frozenset({"spout"}), workers=1, free_slots=0, baseline_workers=1)
    r.round(0, wide, idle(0))
    r.round(1, wide, idle(1))
    step = r.round(2, wide, idle(2))
    assert step.kind == "act" and step.resolution == {"executors": {"split": 1}}


def test_a_scale_down_is_kept_when_the_input_keeps_falling() -> None:
    r = Regulator(SETTINGS)
    idle = [round_of(t, comp("spout", acked=200), comp("count", 4, capacity=0.1, executed=200))
            for t in range(3)]
    for t in range(3):
        step = r.round(t, shape(4), idle[t])
    assert step.kind == "act"
    quieter = [round_of(t, comp("spout", acked=20), comp("count", 1, capacity=0.1, executed=20))
               for t in (3, 4)]
    r.round(3, shape(1), quieter[0])
    assert r.round(4, shape(1), quieter[1]).kind == "none" and r.actions[-1]["status"] == "helped"
