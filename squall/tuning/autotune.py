"""The max spout pending auto-tuner of the Storm@Twitter paper, §3.3.3, as written there.

Every ``t`` seconds a spout task hands :meth:`PaperTuner.auto_tune` the
progress it made since the last call (acked trees, or the spout's own
``progress()``), and :meth:`PaperTuner.get` is its max spout pending from then
on.  The tuner remembers its last action and the last delta:

=================  ===============================  ==========================================
last action        delta against the last one       action taken
=================  ===============================  ==========================================
No Change          first call ever                  Increase
No Change          lower                            Decrease
No Change          higher                           Increase
No Change          similar                          No Change; the 5th in a row: Increase
Increase           lower                            Decrease
Increase           higher                           Increase
Increase           similar                          No Change, back to the value before the
                                                    last increase
Decrease           higher                           Increase
Decrease           lower or similar                 No Change
=================  ===============================  ==========================================

Increase multiplies the value by 1.25; Decrease takes away max(25%, the
relative drop in progress); the value stays within [minimum, maximum].
"Similar" is the one thing the paper leaves open: here, within ``tolerance``
(5%) of the last delta.  No clock and no I/O: the spout executor calls it.
"""

from __future__ import annotations

import enum
import math
from typing import Protocol

STEP = 0.25
TOLERANCE = 0.05
NO_CHANGE_LIMIT = 5


class Action(enum.Enum):
    INCREASE = "increase"
    DECREASE = "decrease"
    NO_CHANGE = "no change"


class Tuner(Protocol):
    """The pluggable tuner class (``topology.max.spout.pending.autotune.class``): the paper's two calls."""

    def auto_tune(self, delta_progress: float) -> None: ...

    def get(self) -> int: ...


class PaperTuner:
    def __init__(self, initial: int, *, minimum: int = 1, maximum: int | None = None,
                 step: float = STEP, tolerance: float = TOLERANCE,
                 no_change_limit: int = NO_CHANGE_LIMIT) -> None:
        if initial < 1 or minimum < 1 or (maximum is not None and maximum < minimum):
            msg = (f"max spout pending bounds must be 1 <= minimum <= maximum, initial >= 1: "
                   f"initial={initial}, minimum={minimum}, maximum={maximum}")
            raise ValueError(msg)
        self.minimum = minimum
        self.maximum = maximum
        self.step = step
        self.tolerance = tolerance
        self.no_change_limit = no_change_limit
        self.value = self._bounded(initial)
        self.action = Action.NO_CHANGE
        self.last_delta: float | None = None
        self.no_change_turns = 0
        self._before_increase = self.value

    def get(self) -> int:
        return self.value

    def auto_tune(self, delta_progress: float) -> None:
        last, current = self.last_delta, float(delta_progress)
        self.last_delta = current
        if last is None:  # the first call: whatever the last action, increase
            self._increase()
            return
        trend = self._trend(last, current)
        if self.action is Action.NO_CHANGE:
            if trend == "similar":
                self.no_change_turns += 1
                if self.no_change_turns >= self.no_change_limit:
                    self._increase()
                return
            self._decrease(last, current) if trend == "lower" else self._increase()
        elif self.action is Action.INCREASE:
            if trend == "similar":
                self.value = self._before_increase  # the last increase bought nothing
                self._no_change()
            else:
                self._decrease(last, current) if trend == "lower" else self._increase()
        elif trend == "higher":  # after a decrease
            self._increase()
        else:
            self._no_change()

    def _trend(self, last: float, current: float) -> str:
        if abs(current - last) <= self.tolerance * max(abs(last), 1.0):
            return "similar"
        return "higher" if current > last else "lower"

    def _increase(self) -> None:
        self._before_increase = self.value
        self.value = self._grown(self.value)
        self.action = Action.INCREASE
        self.no_change_turns = 0

    def _decrease(self, last: float, current: float) -> None:
        drop = (last - current) / last if last > 0 else 0.0
        self.value = self._cut(self.value, max(self.step, drop))
        self.action = Action.DECREASE
        self.no_change_turns = 0

    def _grown(self, value: int) -> int:
        """An Increase from ``value``: by the step, and by one at least."""
        return self._bounded(max(value + 1, math.ceil(value * (1 + self.step))))

    def _cut(self, value: int, cut: float) -> int:
        """A Decrease from ``value`` by the fraction ``cut``, and by one at least."""
        # (1e-9: 1250 x (1 - 0.9) is 124.99999... in floating point, and means 125.)
        return self._bounded(min(value - 1, math.floor(value * (1 - cut) + 1e-9)))

    def _no_change(self) -> None:
        self.action = Action.NO_CHANGE
        self.no_change_turns = 0

    def _bounded(self, value: int) -> int:
        value = max(self.minimum, value)
        return value if self.maximum is None else min(self.maximum, value)


class LatencyTargetTuner(PaperTuner):
    """Beyond the paper (``topology.max.spout.pending.autotune.latency.ms``): the paper's
    tuner chases throughput only, and past the knee more pending buys no throughput, just
    queueing.  This one keeps the period's complete latency (the spout executor hands it
    the p99) under ``target_ms`` first, and chases throughput within that.  It remembers,
    per value it ran at, the progress and the latency it saw (exponential moving
    averages), and each period:

    * **over the target**: scales the value down by Little's law.  At a given throughput
      the time a tree waits grows with the trees in flight, so ``value * target /
      latency`` (with a margin) is where the latency would meet it: one jump from any
      start.  A quarter at a time took a tuner started at 1,000 a dozen periods to come
      down and, with noise, it never arrived (p99 227 ms against a 20 ms target);
    * **under it, with no knee yet** (the *knee*: the lowest value seen under the target
      whose progress is within ``within``, 3%, of the best seen at any value, that share
      scaled by its latency's share of the target: far under the target latency is
      cheap, and a plateau that falls slowly toward low values must not be walked down
      by 3% a step; the slow bolt's tuner ended 6% short of the best fixed value): a step
      up, a quarter, or half way to the lowest value seen over the target; so with no
      value under the target near the best it climbs as high as the target allows;
    * **under it, off the knee**: back to the knee (above it, more in flight bought only
      latency; below, less cost throughput);
    * **at the knee**: a step to a neighbour not yet measured, up (the knee moves with
      the load; twice as high while the latency is under a quarter of the target) or
      down (the plateau may reach lower: a tuner that came down from 10,000 by Little's
      law lands on the plateau, not at its edge); with both known, it stays, and after
      :data:`NO_CHANGE_LIMIT` periods forgets them and looks again.  It looks up only
      where Little's law puts the latency under the target (with the margin): a knee
      close to the target would otherwise take every look up over it.

    After a step down the trees a higher value put in flight drain first, and a period
    then measures their wait and their burst of acks, not the new value.  While the
    trees in flight (:meth:`observe_in_flight`) exceed the value by more than a
    ``DRAIN_SHARE`` of a period's, and for ``SETTLE_PERIODS`` periods after, nothing is
    recorded: a drain's latency had a tuner come down from 10,000 mark the next values
    it tried over the target, and stay far below them (0.92x of the best throughput).

    The paper's own steps are not used: they answer a drop in throughput with a
    Decrease, which under a latency target is noise more often than overload, and the
    latency already says when there are too many trees in flight.
    """

    MARGIN = 0.9  # below the value Little's law gives: the latency measured is noisy
    HEADROOM = 0.25  # a knee whose latency is under this share of the target looks twice as high
    # Periods not recorded once a drain is over: the one it ended in, and the next, whose
    # first acks are still the oldest trees' (the last of the backlog is in flight then).
    SETTLE_PERIODS = 2
    # A drain counts when the excess trees are more than this share of a period's: a p99
    # moves once more than 1% of the samples are another value's (a fast topology stepping
    # down its plateau drains in milliseconds, and must not wait three periods a step).
    DRAIN_SHARE = 0.005

    def __init__(self, initial: int, *, target_ms: float, within: float = 0.03, smoothing: float = 0.5,
                 **kwargs: float | int | None) -> None:
        super().__init__(initial, **kwargs)  # type: ignore[arg-type]
        if target_ms <= 0:
            msg = f"a latency target must be > 0 ms, got {target_ms}"
            raise ValueError(msg)
        self.target_ms = target_ms
        self.within = within
        self.smoothing = smoothing
        self.seen: dict[int, tuple[float, float]] = {}  # value -> (progress, latency ms)
        self._latency_ms: float | None = None
        self._in_flight: int | None = None
        self._settling = 0  # periods still to pass unrecorded after a drain

    def observe_in_flight(self, trees: int) -> None:
        """The trees in flight at the end of the period about to be handed to :meth:`auto_tune`."""
        self._in_flight = trees

    def observe_latency(self, latency_ms: float | None) -> None:
        """The complete latency (the executor gives its p99) of the period about to be
        handed to :meth:`auto_tune`; None when no tree completed."""
        self._latency_ms = latency_ms

    def auto_tune(self, delta_progress: float) -> None:
        if self._draining(delta_progress):
            self._settling = self.SETTLE_PERIODS
        if self._settling:
            self._settling -= 1
            self.action = Action.NO_CHANGE
            return
        self._decide(delta_progress)
        if self._draining(delta_progress):  # a step down, under more trees than the new value
            self._settling = self.SETTLE_PERIODS

    def _draining(self, per_period: float) -> bool:
        """More trees in flight than the value, a higher value's still completing, and
        enough of them to move the next period's p99."""
        if self._in_flight is None:
            return False
        return self._in_flight - self.value > self.DRAIN_SHARE * max(per_period, 0.0)

    def _decide(self, delta_progress: float) -> None:
        ran_at, latency = self.value, self._latency_ms
        if latency is None:  # nothing completed: no measure of this value; the paper decides
            super().auto_tune(delta_progress)
            return
        old = self.seen.get(ran_at)
        a = self.smoothing
        self.seen[ran_at] = ((delta_progress, latency) if old is None else
                             (a * delta_progress + (1 - a) * old[0], a * latency + (1 - a) * old[1]))
        self.last_delta = delta_progress
        latency = self.seen[ran_at][1]  # smoothed: one slow period is not a trend
        if latency > self.target_ms:
            scaled = math.floor(ran_at * self.target_ms / latency * self.MARGIN)
            self._move(min(scaled, ran_at - 1), Action.DECREASE)
            return
        best = max(p for p, _lat in self.seen.values())  # at any value, over the target or not
        near = [v for v, (p, lat) in self.seen.items()
                if lat <= self.target_ms and p >= (1 - self.within * lat / self.target_ms) * best]
        if not near:  # nothing under the target has the best throughput yet: up, toward the target
            up = self._step_up(ran_at)
            if up > ran_at:
                self._move(up, Action.INCREASE)
            else:
                self._move(ran_at, Action.NO_CHANGE)
            return
        knee = min(near)
        if ran_at != knee:  # above it: more in flight bought only latency; below: less cost throughput
            self._move(knee, Action.NO_CHANGE)
            return
        # At the knee: look at its neighbours not yet measured, up (a bolt may have got
        # faster) and down (the plateau may reach lower); with both known, stay.  Far under
        # the target the neighbour up is twice the knee: a step's gain is lost in the noise
        # on a plateau that still rises (the word count's: +10% from 100 to 1,000 pending).
        knee_ms = self.seen[ran_at][1]
        far_under = knee_ms < self.HEADROOM * self.target_ms
        up, down = self._step_up(ran_at, double=far_under), self._cut(ran_at, self.step)
        # Only a look up that Little's law says stays under the target (with the margin):
        # next to it, every look up took the period's p99 over it.
        if up > ran_at and up not in self.seen and knee_ms * up / ran_at <= self.target_ms * self.MARGIN:
            self._move(up, Action.INCREASE)
            return
        if down < ran_at and down not in self.seen:
            self._move(down, Action.DECREASE)
            return
        self.no_change_turns += 1
        if self.no_change_turns >= self.no_change_limit:
            self.seen.pop(up, None)  # and now and then look again: the knee moves with the load
            self.seen.pop(down, None)
            self.no_change_turns = 0
        self.value = ran_at
        self.action = Action.NO_CHANGE

    def _step_up(self, value: int, double: bool = False) -> int:
        step = self._bounded(2 * value) if double else self._grown(value)
        over = [v for v, (_p, lat) in self.seen.items() if v > value and lat > self.target_ms]
        if over and step >= min(over):
            step = (value + min(over)) // 2  # half way to where it was over: a bisection
        return step

    def _move(self, value: int, action: Action) -> None:
        self.value = self._bounded(value)
        self.action = action
        self.no_change_turns = 0
