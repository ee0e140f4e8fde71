"""The paper's transition table (Storm@Twitter §3.3.3), one row at a time."""

from __future__ import annotations

from collections import Counter

import pytest

from squall.tuning.autotune import Action, PaperTuner


def tuner_after(*deltas: float, initial: int = 1000) -> PaperTuner:
    tuner = PaperTuner(initial)
    for delta in deltas:
        tuner.auto_tune(delta)
    return tuner


def test_first_call_increases_by_a_quarter() -> None:
    tuner = tuner_after(100)
    assert tuner.action is Action.INCREASE and tuner.get() == 1250


@pytest.mark.parametrize(("deltas", "action", "value"), [
    # last action Increase (after the first call: 1000 -> 1250)
    ((100, 200), Action.INCREASE, 1563),        # more progress: increase again
    ((100, 50), Action.DECREASE, 625),          # 50% less progress: cut by max(25%, 50%)
    ((100, 90), Action.DECREASE, 937),          # 10% less: cut by 25%
    ((100, 102), Action.NO_CHANGE, 1000),       # similar: back to the value before the increase
    # last action Decrease (1250 -> 937 after a 10% drop)
    ((100, 90, 120), Action.INCREASE, 1172),    # better: increase
    ((100, 90, 80), Action.NO_CHANGE, 937),     # worse again: no change
    ((100, 90, 91), Action.NO_CHANGE, 937),     # similar: no change
    # last action No Change (reached through Increase then similar: value 1000)
    ((100, 102, 80), Action.DECREASE, 750),     # lower: decrease by max(25%, 21.6%)
    ((100, 102, 130), Action.INCREASE, 1250),   # higher: increase
    ((100, 102, 101), Action.NO_CHANGE, 1000),  # similar: stay, count the turn
])
def test_transitions(deltas: tuple[float, ...], action: Action, value: int) -> None:
    tuner = tuner_after(*deltas)
    assert (tuner.action, tuner.get()) == (action, value)


def test_five_similar_turns_in_no_change_increase() -> None:
    tuner = tuner_after(100, 102)  # No Change at 1000
    for turn in range(1, 5):
        tuner.auto_tune(101)
        assert tuner.action is Action.NO_CHANGE and tuner.no_change_turns == turn and tuner.get() == 1000
    tuner.auto_tune(101)
    assert tuner.action is Action.INCREASE and tuner.get() == 1250


def test_a_big_drop_cuts_by_the_drop_not_a_quarter() -> None:
    tuner = tuner_after(1000, 100)  # 90% less progress after the first increase
    assert tuner.action is Action.DECREASE and tuner.get() == 125


def test_bounds_hold_and_small_values_still_move() -> None:
    tuner = PaperTuner(1, minimum=1, maximum=3)
    tuner.auto_tune(10)
    assert tuner.get() == 2  # 1.25 rounds up: a value of 1 can still grow
    tuner.auto_tune(20)
    tuner.auto_tune(40)
    assert tuner.get() == 3  # the maximum
    tuner.auto_tune(1)
    assert tuner.get() == 1  # the minimum
    with pytest.raises(ValueError, match="bounds"):
        PaperTuner(0)


def test_it_follows_capacity_down_and_back_up() -> None:
    """A topology whose throughput peaks at pending 2000: the tuner climbs to it,
    backs off when a bolt slows down, and climbs again when it recovers."""
    def progress(pending: int, capacity: int) -> float:
        return min(pending, capacity) - max(0, pending - capacity) * 0.5  # overload costs replays

    tuner = PaperTuner(100)
    for _ in range(30):
        tuner.auto_tune(progress(tuner.get(), 2000))
    assert 1000 <= tuner.get() <= 3000
    for _ in range(30):
        tuner.auto_tune(progress(tuner.get(), 500))  # a bolt slows down
    assert tuner.get() <= 1000
    for _ in range(40):
        tuner.auto_tune(progress(tuner.get(), 2000))  # and recovers
    assert tuner.get() >= 1000


def test_a_latency_target_settles_at_the_lowest_value_near_the_best_throughput() -> None:
    """Throughput flat past 1,000 pending, latency growing with it (Little's law): the
    paper's tuner wanders up the plateau; with a target it comes back to the knee."""
    from squall.tuning.autotune import LatencyTargetTuner

    def period(pending: int) -> tuple[float, float]:
        throughput = min(pending, 1000) * 10.0
        return throughput, pending / 10.0  # ms: pending over a rate of 10 per ms

    plain, targeted = PaperTuner(100), LatencyTargetTuner(100, target_ms=120)
    for _ in range(60):
        plain.auto_tune(period(plain.get())[0])
        progress, latency = period(targeted.get())
        targeted.observe_latency(latency)
        targeted.auto_tune(progress)
    assert period(targeted.get())[0] >= 0.95 * 10_000  # within 5% of the best throughput
    assert targeted.get() <= 1250
    assert period(targeted.get())[1] <= period(max(plain.get(), 1000))[1]
    with pytest.raises(ValueError, match="latency target"):
        LatencyTargetTuner(100, target_ms=0)


class OneArgTuner:
    """A user's tuner in the paper's shape: a constructor of one argument, auto_tune and get."""

    def __init__(self, initial: int) -> None:
        self.value = initial

    def auto_tune(self, delta_progress: float) -> None:
        self.value += 1

    def get(self) -> int:
        return self.value


def test_the_executor_makes_the_configured_tuner() -> None:
    from squall import config
    from squall.tuning.autotune import LatencyTargetTuner
    from squall.worker.executors.spout import make_tuner

    conf = {**config.DEFAULTS, "topology.max.spout.pending.autotune.tolerance": 0.2}
    paper = make_tuner(conf, None)
    assert isinstance(paper, PaperTuner) and paper.get() == 1000 and paper.tolerance == 0.2
    targeted = make_tuner({**conf, "topology.max.spout.pending.autotune.latency.ms": 50}, 300)
    assert isinstance(targeted, LatencyTargetTuner) and targeted.get() == 300
    own = make_tuner({**conf, "topology.max.spout.pending.autotune.class": f"{__name__}:OneArgTuner"}, 7)
    assert isinstance(own, OneArgTuner) and own.get() == 7


@pytest.mark.parametrize(("target_ms", "best_under"), [(120.0, 1200), (50.0, 500)])
def test_a_latency_target_started_high_comes_down_the_plateau(target_ms: float, best_under: int) -> None:
    """Started at 10,000 on the plateau the paper's tuner never leaves it (no progress drop,
    no Decrease); over the target, the targeted one comes down by Little's law to where the
    target is met, and there has the throughput of the best fixed value that meets it
    (for 50 ms, below the knee: the target first, then throughput)."""
    from squall.tuning.autotune import LatencyTargetTuner

    def period(pending: int) -> tuple[float, float]:
        return min(pending, 1000) * 10.0, pending / 10.0

    plain, targeted = PaperTuner(10_000), LatencyTargetTuner(10_000, target_ms=target_ms)
    for _ in range(60):
        plain.auto_tune(period(plain.get())[0])
        progress, latency = period(targeted.get())
        targeted.observe_latency(latency)
        targeted.auto_tune(progress)
    assert plain.get() >= 10_000
    assert period(targeted.get())[1] <= target_ms
    assert period(targeted.get())[0] >= 0.95 * period(best_under)[0]


@pytest.mark.parametrize("start", [1, 42, 1000, 10_000])
def test_a_latency_target_is_met_from_any_start_under_noise(start: int) -> None:
    """benchmarks/autotune.py's slow count in miniature: throughput flat from 40 pending,
    p99 growing with pending past it, each period's p99 and progress off by up to 20% and
    5%.  From any start the tuner ends under the target, at the knee's throughput."""
    import random

    from squall.tuning.autotune import LatencyTargetTuner

    rng = random.Random(start)

    def period(pending: int) -> tuple[float, float]:
        throughput = min(pending, 40) * 500.0
        p99 = 2.0 + max(0, pending - 40) * 0.5 + min(pending, 40) * 0.3
        return throughput * rng.uniform(0.95, 1.05), p99 * rng.uniform(0.8, 1.2)

    targeted = LatencyTargetTuner(start, target_ms=20)
    settled = []
    for turn in range(80):
        progress, latency = period(targeted.get())
        targeted.observe_latency(latency)
        targeted.auto_tune(progress)
        if turn >= 60:
            settled.append(targeted.get())
    # Where it settled, the noiseless p99 meets the target (but for its looks a step up,
    # now and then: the knee may have moved), and the throughput is the knee's
    meets = [2.0 + max(0, v - 40) * 0.5 + min(v, 40) * 0.3 <= 20 for v in settled]
    assert sum(meets) >= 0.85 * len(settled), settled
    assert sum(min(v, 40) for v in settled) / len(settled) >= 0.95 * 40, settled


def test_under_the_target_more_in_flight_that_buys_nothing_is_not_kept() -> None:
    """benchmarks/autotune.py's word count pinned to one core: throughput is best at 100
    pending and a little lower above, latency grows with pending but stays under the
    target up to several thousand.  A step up that buys nothing is taken back."""
    from squall.tuning.autotune import LatencyTargetTuner

    def period(pending: int) -> tuple[float, float]:
        return (100.0 * pending if pending <= 100 else 9_000.0), pending / 300

    targeted = LatencyTargetTuner(100, target_ms=20)
    values = []
    for _ in range(60):
        progress, latency = period(targeted.get())
        targeted.observe_latency(latency)
        targeted.auto_tune(progress)
        values.append(targeted.get())
    # At 100, but for a look at a neighbour now and then (twice as high: the latency is
    # far under the target)
    assert Counter(values[10:]).most_common(1)[0][0] == 100 and min(values[10:]) >= 75, values
    assert max(values[10:]) <= 200 and values[10:].count(100) >= 0.7 * len(values[10:]), values


def test_far_under_the_target_a_plateau_that_still_rises_is_climbed() -> None:
    """benchmarks/autotune.py's word count with the typed core: 206K sentences/s at 100
    pending, 228K at 300, 231K at 1,000, 216K at 10,000, every p99 far under 20 ms, and
    periods 3% noisy.  A step up from 100 gains less than the noise; the tuner must still
    end within 5% of the best, under the target."""
    import itertools
    import random

    from squall.tuning.autotune import LatencyTargetTuner

    rng = random.Random(4)
    curve = [(100, 206.0), (300, 228.0), (1000, 231.0), (3000, 226.0), (10000, 216.0)]

    def throughput(pending: int) -> float:
        for (x0, y0), (x1, y1) in itertools.pairwise(curve):
            if pending <= x1:
                return y0 + (y1 - y0) * (max(pending, x0) - x0) / (x1 - x0)
        return curve[-1][1]

    for start in (100, 10_000):
        targeted = LatencyTargetTuner(start, target_ms=20)
        settled = []
        for turn in range(120):
            pending = targeted.get()
            targeted.observe_latency(pending / 200 + 0.3)  # 5 ms at 1,000, as measured
            targeted.auto_tune(throughput(pending) * rng.uniform(0.97, 1.03))
            if turn >= 60:
                settled.append(targeted.get())
        mean = sum(throughput(v) for v in settled) / len(settled)
        assert mean >= 0.95 * 231, (start, settled)
        assert all(v / 200 + 0.3 <= 20 for v in settled), (start, settled)


def test_a_tuner_that_fell_far_below_the_knee_climbs_back_under_the_target() -> None:
    """benchmarks/autotune.py's slow bolt started at 10,000: the period after the jump down
    still reports the old trees' latency, so it falls to 2, where throughput is 7% short
    of the best and each step up buys less than 5%.  It climbs back until the best seen,
    or the target, stops it."""
    from squall.tuning.autotune import LatencyTargetTuner

    def throughput(pending: int) -> float:
        return 2250 + 160 * min(pending, 18) / 18

    targeted = LatencyTargetTuner(10_000, target_ms=20)
    previous = targeted.get()
    values = []
    for _ in range(80):
        now = targeted.get()
        latency = max(now, previous) * 0.45  # after a fall, the period still sees the old trees
        targeted.observe_latency(latency)
        targeted.auto_tune(throughput(now))
        previous = now
        values.append(targeted.get())
    settled = values[-20:]
    assert all(v * 0.45 <= 20 for v in settled), values  # the target met
    assert min(throughput(v) for v in settled) >= 0.95 * throughput(44), values  # at the best under it


def test_the_tuner_is_handed_the_p99_of_the_period_s_trees_only() -> None:
    from collections import deque

    from squall.worker.executors.spout import period_p99_ms

    kept = deque([5.0] * 50 + [i / 1000 for i in range(1, 201)])  # an older period, then 200 trees
    assert period_p99_ms(kept, 200) == 0.198 * 1000  # the 99th percentile of 1..200 ms
    assert period_p99_ms(kept, 0) is None
    assert period_p99_ms(deque(), 10) is None
    assert period_p99_ms(kept, 10_000) == 5000.0  # more trees than kept: all that is kept


def test_a_drain_after_a_step_down_is_not_taken_for_the_new_value() -> None:
    """benchmarks/autotune.py's slow bolt started at 10,000, with the drain modelled: after
    a step down the trees already in flight complete first, in order, so the next period's
    p99 is their wait and its progress their burst.  Measured as the new value's, that
    wait marked values under the target as over it, and the tuner stayed at 3, 8% short
    of the best throughput.  It must wait out the drain and end under the target, within
    5% of the best."""
    from squall.tuning.autotune import LatencyTargetTuner

    rate = 4_900.0  # trees a period, flat out; a period is 2,000 ms

    def throughput(pending: int) -> float:
        return rate * min(1.0, 0.88 + 0.12 * pending / 24)  # the plateau from 24 up

    def flight(value: int) -> float:
        return float(min(value, 2_000))  # the spout yields to its bolts: 2,000 trees at most

    tuner = LatencyTargetTuner(10_000, target_ms=20)
    in_flight = flight(tuner.get())
    values = []
    for _ in range(40):
        value = tuner.get()
        done = throughput(value)
        waited = max(in_flight, flight(value)) / done * 2_000  # ms: the oldest tree's wait, in order
        progress = done * (1.1 if in_flight > value else 1.0)  # a drain's burst of acks
        in_flight = max(flight(value), in_flight - done)
        tuner.observe_latency(waited)
        tuner.observe_in_flight(int(in_flight))
        tuner.auto_tune(progress)
        values.append(tuner.get())
    settled = values[-20:]
    assert all(v / throughput(v) * 2_000 <= 20 for v in settled), values  # the target met
    assert sum(throughput(v) for v in settled) / len(settled) >= 0.95 * rate, values


def test_far_under_the_target_the_knee_is_held_to_nearly_the_best() -> None:
    """benchmarks/autotune.py's slow bolt under a 20 ms target: throughput falls slowly
    below 40 in flight, 3% at 1, and p99 is 0.42 ms a tree.  With a flat 3% tolerance
    the knee walked down to a handful of trees, 3% short of what the target allows; the
    tolerance scales with the latency's share of the target, so it stays near the best."""
    import random

    from squall.tuning.autotune import LatencyTargetTuner

    rng = random.Random(7)

    def throughput(pending: int) -> float:
        return 4_900.0 * (1 - 0.03 * max(0, 40 - pending) / 40)

    for start in (100, 10_000):
        tuner = LatencyTargetTuner(start, target_ms=20)
        settled = []
        for turn in range(100):
            value = tuner.get()
            tuner.observe_latency(value * 0.42 * rng.uniform(0.95, 1.05))
            tuner.auto_tune(throughput(value) * rng.uniform(0.995, 1.005))
            if turn >= 60:
                settled.append(tuner.get())
        assert sum(throughput(v) for v in settled) / len(settled) >= 0.985 * 4_900, (start, settled)
        assert sum(v * 0.42 <= 20 for v in settled) >= 0.85 * len(settled), (start, settled)


def test_a_knee_near_the_target_never_looks_up_over_it() -> None:
    """The slow bolt's knee close to the target: 44 trees in flight at a p99 of 18 ms
    (0.41 ms a tree), throughput flat.  A look up 25% higher would take the p99 to 22.5
    ms; by Little's law it is not taken, and every value it runs at keeps the target."""
    from squall.tuning.autotune import LatencyTargetTuner

    tuner = LatencyTargetTuner(44, target_ms=20)
    values = []
    for _ in range(60):
        value = tuner.get()
        tuner.observe_latency(value * 0.41)
        tuner.auto_tune(4_900.0)
        values.append(tuner.get())
    assert all(v * 0.41 <= 20 for v in values), values


def test_the_period_p99_survives_another_thread_clearing_the_samples() -> None:
    """benchmarks/autotune.py clears the spout's latency samples from its own thread to
    start a measurement; the p99 of the period iterated them in Python, and a clear in
    between killed the worker ("deque mutated during iteration")."""
    import threading
    from collections import deque

    from squall.worker.executors.spout import period_p99_ms

    samples: deque[float] = deque([i / 1000 for i in range(50_000)], maxlen=200_000)
    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():
            samples.clear()
            samples.extend(i / 1000 for i in range(5_000))

    thread = threading.Thread(target=churn)
    thread.start()
    try:
        for _ in range(300):
            p99 = period_p99_ms(samples, 5_000)
            assert p99 is None or 0 <= p99 <= 50_000
    finally:
        stop.set()
        thread.join()
