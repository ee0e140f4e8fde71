"""What the supervisor does with each slot's worker, decided apart from processes and files.

A pure core, as dask-distributed's worker state machine is: the supervisor
(:meth:`squall.supervisor.daemon.Supervisor.sync_processes`) looks at a slot
(is its worker alive, what do its assignment file, heartbeat and pid record
say), passes that in with what the slot should run and the time, and carries
out the actions that come back, in order (the launcher,
:mod:`squall.supervisor.launcher`, does what they say).  What each slot should run
comes from the assignments by :func:`squall.supervisor.assignments.workers_of_node`,
pure as well.

Storm's classification of a slot's worker:

* **disallowed**: nothing should run on the slot, or the worker's heartbeat
  (one of this launch: it carries the launch's token) names another topology or other executors than
  assigned: killed (and the assigned one launched);
* **not started**: no live worker where one is assigned: launched;
* **timed out**: no heartbeat within ``supervisor.worker.start.timeout.secs``
  of its launch, or none within ``supervisor.worker.timeout.secs`` of its last
  one: killed and launched again;
* **valid**: left alone, its assignment file brought up to date (a change of
  ``active``, of the version, of where the other tasks run, of the log levels).

Ages are measured on the supervisor's monotonic clock (``local``): a heartbeat is
as old as the time since it last *changed*, a launch as old as the time since the
supervisor first saw its record.  Comparing the times written in them with the wall
clock made a forward step of the machine's clock (NTP stepping it, a VM resumed)
past the worker timeout kill every healthy worker on the node at once
(docs/partitions.md, "Heartbeats judged by a skewed clock").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from squall.clock import LastChange

# Why a worker is killed, or launched.
DISALLOWED = "disallowed"
TIMED_OUT = "timed-out"
NOT_RUNNING = "not-running"


@dataclass(frozen=True)
class SlotState:
    """What the supervisor sees of one slot."""

    port: int
    running: bool  # a live worker process of ours is on the slot
    assignment: Any = None  # what the slot's assignment.json holds
    beat: Mapping[str, Any] | None = None  # the worker's heartbeat.json
    launched: float = 0.0  # when the worker was launched (wall seconds; 0: unknown)
    launch: str | None = None  # the token of this launch, which the worker's heartbeats carry


@dataclass(frozen=True)
class Kill:
    port: int
    reason: str
    # What the reason rests on, for the log (what heartbeat was seen, how old): not compared.
    detail: Mapping[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class Launch:
    """Launch the worker of ``want`` (if the slot is still assigned so when the shell asks)."""

    port: int
    want: dict[str, Any]
    reason: str


@dataclass(frozen=True)
class WriteAssignment:
    port: int
    want: dict[str, Any]


Action = Kill | Launch | WriteAssignment


class ProcessSync:
    """The supervisor's decisions about its workers; its only memory is when, on its own
    clock, it saw each slot's heartbeat change and each launch first."""

    def __init__(self, worker_timeout_secs: float, start_timeout_secs: float) -> None:
        self.beats = LastChange()  # port -> when the worker's heartbeat last changed
        self.launches = LastChange()  # port -> when the worker's launch record was first seen
        self.worker_timeout_secs = worker_timeout_secs
        self.start_timeout_secs = start_timeout_secs

    def slot(self, want: dict[str, Any] | None, slot: SlotState, now: float,
             local: float | None = None) -> list[Action]:
        """One slot's actions, given what it should run (None: nothing).  Only once the
        supervisor has synced its assignments: a freshly restarted one must not take its
        workers for strays.  ``now`` is the wall clock, ``local`` the monotonic one that
        ages are measured on (``now`` when not given)."""
        local = now if local is None else local
        if not slot.running:
            self.beats.forget(slot.port)
            self.launches.forget(slot.port)
        if want is None:
            return [Kill(slot.port, DISALLOWED)] if slot.running else []
        if not slot.running:
            return [Launch(slot.port, want, NOT_RUNNING)]
        actions: list[Action] = []
        if slot.assignment != want:
            actions.append(WriteAssignment(slot.port, want))
        beat = slot.beat
        # A heartbeat of another launch (the predecessor's) says nothing of this worker.  Told by
        # the launch's token, not by comparing the beat's time with the launch's: the two are
        # read from the wall clock by two processes, and a step of it in between (NTP, a
        # resumed VM) made a new worker's beats look older than its launch until it was killed.
        current = bool(beat and beat.get("launch") == slot.launch)
        mine = bool(current and beat and beat.get("topology_id") == want["topology_id"]
                    and beat.get("executors") == want["executors"])
        # A launch seen for the first time (this supervisor just started) is as old as the wall
        # clock says; from then on, a step of the wall clock changes nothing.  A heartbeat seen
        # for the first time is no older than its launch: the wall clock may have stepped
        # between the worker's write and this look.
        launch_age = self.launches.age(slot.port, slot.launched, local,
                                       first_age=max(0.0, now - slot.launched))
        if mine and beat:
            age = self.beats.age(slot.port, beat["time"], local,
                                 first_age=max(0.0, min(now - beat["time"], launch_age)))
        else:
            age = launch_age
        if current and not mine:
            reason = DISALLOWED  # runs something else than assigned
        elif age > (self.worker_timeout_secs if mine else self.start_timeout_secs):
            reason = TIMED_OUT
        else:
            return actions
        detail = {"heartbeat": "none" if not beat else "this worker's" if mine else
                  "of another assignment" if current else "of another launch",
                  ("heartbeat_age_secs" if mine else "launch_age_secs"): round(age, 1)}
        return [*actions, Kill(slot.port, reason, detail), Launch(slot.port, want, reason)]

