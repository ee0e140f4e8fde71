"""The recovery measures on hand-made histories (tests/partitions/recovery.py)."""

from __future__ import annotations

import pytest

from tests.partitions.history import NEMESIS, History
from tests.partitions.recovery import episodes, percentile, rates


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _history(stall: tuple[float, float], fault: tuple[float, float], end: float = 60.0) -> History:
    """A message every 0.1 s, each ok 50 ms later, except those invoked in ``stall``: they
    complete together when it ends.  The nemesis plays one fault over ``fault``."""
    clock = Clock()
    history = History(clock)
    held = []
    events = sorted([(i / 10, "emit", i) for i in range(int(end * 10))]
                    + [(fault[0], "start", None), (fault[1], "stop", None)],
                    key=lambda e: (e[0], e[1] != "start"))
    for t, what, i in events:
        clock.t = t
        if what in ("start", "stop"):  # as nemesis.play records a fault: its value on the info
            value = {"fault": "partition-random-node", "phase": what, "node": "sup-1"}
            history.info(history.invoke(NEMESIS, "isolate" if what == "start" else "heal", value), value)
            continue
        op = history.invoke(i, "emit", {"id": i, "words": ["a"]})
        if stall[0] <= t < stall[1]:
            held.append(op)
            continue
        if held and t >= stall[1]:
            for h in held:
                history.ok(h)
            held.clear()
        clock.t = t + 0.05
        history.ok(op)
    return history


def test_a_stall_that_ends_with_the_fault_recovers_at_once_and_its_latency_is_its_length() -> None:
    history = _history(stall=(20.0, 30.0), fault=(20.0, 30.0))
    [episode] = episodes(history.ops, history.ops)
    assert episode.baseline == pytest.approx(10, rel=0.05)
    assert episode.lowest < 1  # nothing completed while it held
    assert episode.recovery is not None and episode.recovery <= 0.5  # the held ones all complete at the heal
    assert episode.slowest_ms == pytest.approx(10_000, abs=200)
    assert episode.p99_ms is not None and episode.p99_ms > 9_000
    assert episode.messages == 101


def test_a_stall_that_outlasts_the_fault_counts_its_tail() -> None:
    history = _history(stall=(20.0, 38.0), fault=(20.0, 30.0))
    [episode] = episodes(history.ops, history.ops)
    assert episode.recovery == pytest.approx(8, abs=0.5)  # the stall ran 8 s past the heal


def test_a_fault_that_changes_nothing_costs_nothing() -> None:
    history = _history(stall=(0.0, 0.0), fault=(20.0, 30.0))
    [episode] = episodes(history.ops, history.ops)
    assert episode.recovery == 0 and episode.lowest >= 9
    assert episode.p99_ms == pytest.approx(50, abs=1)


def test_rates_and_percentiles() -> None:
    assert rates([0.1, 0.2, 1.5, 9.0], 0.0, 3.0) == [(0.0, 2), (1.0, 1), (2.0, 0)]
    assert percentile([], 0.99) is None
    assert percentile(list(range(1, 101)), 0.99) == 99
