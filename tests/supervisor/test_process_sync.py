"""The supervisor's process sync as a pure core: what a slot should run and what
the supervisor sees of it in, with the time from a fake clock; actions out."""

from __future__ import annotations

from typing import Any

from squall.clock import FakeClock
from squall.supervisor.sync import (
    DISALLOWED,
    NOT_RUNNING,
    TIMED_OUT,
    Kill,
    Launch,
    ProcessSync,
    SlotState,
    WriteAssignment,
)

PORT = 6700
WORKER_TIMEOUT = 30.0
START_TIMEOUT = 120.0
WANT = {"topology_id": "t-1", "executors": [[1, 1], [2, 2]], "active": True, "version": 1}


def sync() -> ProcessSync:
    return ProcessSync(WORKER_TIMEOUT, START_TIMEOUT)


def running(launched: float, beat: dict[str, Any] | None = None, assignment: Any = WANT,
            launch: str = "L1") -> SlotState:
    return SlotState(PORT, running=True, assignment=assignment, beat=beat, launched=launched, launch=launch)


def beat(t: float, topology_id: str = "t-1", executors: Any = None, launch: str = "L1") -> dict[str, Any]:
    return {"topology_id": topology_id, "executors": WANT["executors"] if executors is None else executors,
            "time": t, "launch": launch}


def restart(reason: str) -> list[Any]:
    return [Kill(PORT, reason), Launch(PORT, WANT, reason)]


def test_a_slot_without_an_assignment_has_its_worker_killed_and_nothing_launched() -> None:
    assert sync().slot(None, SlotState(PORT, running=False), 1000.0) == []
    assert sync().slot(None, running(900.0, beat(999.0)), 1000.0) == [Kill(PORT, DISALLOWED)]


def test_an_assigned_slot_without_a_live_worker_gets_one() -> None:
    assert sync().slot(WANT, SlotState(PORT, running=False), 1000.0) == [Launch(PORT, WANT, NOT_RUNNING)]


def test_a_worker_beating_what_it_was_assigned_is_left_alone_its_file_kept_current() -> None:
    clock = FakeClock()
    launched = clock.now()
    clock.advance(START_TIMEOUT * 2)  # long since its launch: its beats count
    fresh = beat(clock.now() - 1)
    assert sync().slot(WANT, running(launched, fresh), clock.now()) == []
    deactivated = {**WANT, "active": False, "version": 2}
    assert sync().slot(deactivated, running(launched, fresh), clock.now()) == [
        WriteAssignment(PORT, deactivated)]


def test_a_worker_that_never_beats_is_restarted_after_the_start_timeout() -> None:
    clock = FakeClock()
    launched = clock.now()
    clock.advance(START_TIMEOUT)
    assert sync().slot(WANT, running(launched), clock.now()) == []
    clock.advance(0.5)
    assert sync().slot(WANT, running(launched), clock.now()) == restart(TIMED_OUT)


def test_a_worker_whose_beats_stopped_is_restarted_after_the_worker_timeout() -> None:
    clock = FakeClock()
    launched = clock.now()
    clock.advance(5)
    last = beat(clock.now())
    clock.advance(WORKER_TIMEOUT)
    assert sync().slot(WANT, running(launched, last), clock.now()) == []
    clock.advance(0.5)
    assert sync().slot(WANT, running(launched, last), clock.now()) == restart(TIMED_OUT)


def test_a_step_of_the_wall_clock_kills_no_worker_and_a_dead_one_still_dies_on_time() -> None:
    """docs/partitions.md, "Heartbeats judged by a skewed clock": the node's clock stepped
    18.5 s ahead (past the worker timeout) made the supervisor kill its beating workers."""
    wall, local = 5000.0, 1000.0  # the machine's wall clock, which NTP may step; its monotonic one
    keeper = sync()  # one supervisor, as the daemon keeps one
    launched = wall
    wall, local = wall + 5, local + 5
    assert keeper.slot(WANT, running(launched, beat(wall)), wall, local) == []
    # When the wall clock jumps ahead by more than the timeout, between two beats
    previous = wall
    wall, local = wall + 1 + 4 * WORKER_TIMEOUT, local + 1
    assert keeper.slot(WANT, running(launched, beat(previous)), wall, local) == []
    # Then the worker, beating on, stays; and when its beats stop it is restarted a
    # worker timeout later on the supervisor's own clock, whatever the wall clock says
    last = beat(wall)
    assert keeper.slot(WANT, running(launched, last), wall, local) == []
    wall, local = wall - 100, local + WORKER_TIMEOUT  # stepped back, meanwhile
    assert keeper.slot(WANT, running(launched, last), wall, local) == []
    local += 0.5
    assert keeper.slot(WANT, running(launched, last), wall, local) == restart(TIMED_OUT)


def test_a_worker_running_something_else_than_assigned_is_replaced_at_once() -> None:
    clock = FakeClock()
    launched = clock.now()
    clock.advance(1)
    for wrong in (beat(clock.now(), topology_id="t-0"), beat(clock.now(), executors=[[1, 1]])):
        assert sync().slot(WANT, running(launched, wrong), clock.now()) == restart(DISALLOWED)


def test_a_heartbeat_of_the_previous_launch_says_nothing_of_the_new_worker() -> None:
    clock = FakeClock()
    old = beat(clock.now(), topology_id="t-0", launch="L0")
    clock.advance(10)
    launched = clock.now()
    # Not disallowed: the new worker has not beaten yet; it gets its start timeout
    assert sync().slot(WANT, running(launched, old), clock.now()) == []
    clock.advance(START_TIMEOUT + 1)
    assert sync().slot(WANT, running(launched, old), clock.now()) == restart(TIMED_OUT)
    # Once this launch beats, what it says counts, whatever the time in it
    assert sync().slot(WANT, running(launched, beat(launched - 50, topology_id="t-0")), launched) == (
        restart(DISALLOWED))


def test_a_first_beat_looked_at_after_a_step_of_the_clock_is_no_older_than_its_launch() -> None:
    """CI, the clock-skew partition test: the clock stepped ahead between a new worker's
    first beat and the supervisor's first look at it, which took the beat for as old as the
    step, past the worker timeout, and killed the worker."""
    wall, local = 5000.0, 1000.0
    keeper = sync()
    assert keeper.slot(WANT, running(wall), wall, local) == []  # launched, not beating yet
    launched, first = wall, beat(wall + 1)
    wall, local = wall + 1.5 + 2 * WORKER_TIMEOUT, local + 1.5  # stepped ahead before the look
    assert keeper.slot(WANT, running(launched, first), wall, local) == []
    for _ in range(int(WORKER_TIMEOUT) * 2):
        wall, local = wall + 1, local + 1
        last = beat(wall)
        assert keeper.slot(WANT, running(launched, last), wall, local) == []
    # A worker that stops beating still dies a worker timeout later
    local += WORKER_TIMEOUT + 0.5
    assert keeper.slot(WANT, running(launched, last), wall, local) == restart(TIMED_OUT)


def test_the_assignment_file_is_written_before_a_restart() -> None:
    stale = {**WANT, "version": 0}
    assert sync().slot(WANT, running(1000.0, assignment=stale), 1000.0 + START_TIMEOUT + 1) == [
        WriteAssignment(PORT, WANT), *restart(TIMED_OUT)]
