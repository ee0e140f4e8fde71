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
LOOKS_BELOW = 2  # a latency-targeted tuner's looks below a value before it stops looking


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
        self.value = self._bounded(max(self.value + 1, math.ceil(self.value * (1 + self.step))))
        self.action = Action.INCREASE
        self.no_change_turns = 0

    def _decrease(self, last: float, current: float) -> None:
        drop = (last - current) / last if last > 0 else 0.0
        cut = max(self.step, drop)
        # (1e-9: 1250 x (1 - 0.9) is 124.99999... in floating point, and means 125.)
        self.value = self._bounded(min(self.value - 1, math.floor(self.value * (1 - cut) + 1e-9)))
        self.action = Action.DECREASE
        self.no_change_turns = 0

    def _no_change(self) -> None:
        self.action = Action.NO_CHANGE
        self.no_change_turns = 0

    def _bounded(self, value: int) -> int:
        value = max(self.minimum, value)
        return value if self.maximum is None else min(self.maximum, value)


class LatencyTargetTuner(PaperTuner):
    """Beyond the paper (``topology.max.spout.pending.autotune.latency.ms``): the paper's
    tuner chases throughput only, and past the knee more pending buys no throughput, just
    queueing (Little's law).  This one remembers, per value it ran at, the progress and
    the mean complete latency it saw (each an exponential moving average).  When the
    latency of the last period is over ``target_ms``, or the paper's step leads to a
    value already seen over it, it moves to the lowest value it has seen whose progress
    is within ``within`` (5%) of the best seen, if that value is lower than the paper's
    choice.

    The paper's tuner never goes down a plateau (a Decrease needs a drop in progress),
    so a tuner started high would stay there, over the target, for ever.  Over the
    target at a value near the best, it therefore looks below: one Decrease step.  If
    the period there loses more than ``within`` of the progress it had, it goes back,
    and after :data:`LOOKS_BELOW` such looks from a value it looks no lower than it.
    """

    def __init__(self, initial: int, *, target_ms: float, within: float = 0.05, smoothing: float = 0.5,
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
        self._explored_from: int | None = None  # the value a look below started from
        self._costly_looks: dict[int, int] = {}  # value -> looks below it that cost throughput

    def observe_latency(self, mean_ms: float | None) -> None:
        """The mean complete latency of the period about to be handed to :meth:`auto_tune`."""
        self._latency_ms = mean_ms

    def auto_tune(self, delta_progress: float) -> None:
        ran_at, latency = self.value, self._latency_ms
        if latency is not None:
            old = self.seen.get(ran_at)
            a = self.smoothing
            self.seen[ran_at] = ((delta_progress, latency) if old is None else
                                 (a * delta_progress + (1 - a) * old[0], a * latency + (1 - a) * old[1]))
        explored_from, self._explored_from = self._explored_from, None
        super().auto_tune(delta_progress)
        if explored_from is not None:
            base = self.seen.get(explored_from)
            if base is not None and delta_progress < (1 - self.within) * base[0]:
                # Going lower cost throughput: back, and after LOOKS_BELOW such looks (one period
                # can be noise) no more from there.
                self._costly_looks[explored_from] = self._costly_looks.get(explored_from, 0) + 1
                self.value = self._bounded(explored_from)
                self._no_change()
                return
        if not self.seen:
            return
        best = max(progress for progress, _ in self.seen.values())
        near_best = {v for v, (progress, _) in self.seen.items() if progress >= (1 - self.within) * best}
        lowest = min(near_best)
        over = latency is not None and latency > self.target_ms
        # Where the paper's step leads may be known already: over the target, for no more throughput.
        known = self.seen.get(self.value)
        known_over = known is not None and known[1] > self.target_ms
        if (over or known_over) and lowest < self.value:
            self.value = self._bounded(lowest)
        if (over and self.value >= ran_at and ran_at in near_best
                and self._costly_looks.get(ran_at, 0) < LOOKS_BELOW):
            self._explored_from = ran_at
            self.value = ran_at
            self._decrease(1.0, 1.0)  # one step, as if progress held
