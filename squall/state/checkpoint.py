"""The checkpoint coordinator's state machine (Storm's CheckpointSpout and
CheckPointState), as a pure core: no I/O, the time passed in.

A checkpoint goes through two phases, each one barrier emitted on the
``$checkpoint`` stream and tracked by the acker as one tuple tree through
every bolt (all grouping):

- ``prepare k``: each stateful bolt writes its state as prepared for ``k``;
- ``commit k``: each makes its prepared ``k`` the committed state.

Before emitting a phase the coordinator stores it (``Save``): txid, phase and,
with a :class:`~squall.state.bolts.CheckpointedSpout`, the spout's position
at the prepare barrier.  A failed or timed-out tree starts recovery: a
``commit`` that may have reached some bolts is finished first, then a reset
barrier (``rollback`` after an unfinished prepare, else ``initstate``) brings
every bolt back to the last committed state, and the spout back to the
position committed with it.  While recovering, the spout emits no data.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

CHECKPOINT_STREAM = "$checkpoint"
CHECKPOINT_COMPONENT = "$checkpointspout"
CHECKPOINT_FIELDS = ("txid", "action", "barrier")

INIT = "initstate"
PREPARE = "prepare"
COMMIT = "commit"
ROLLBACK = "rollback"
ACTIONS = frozenset({INIT, PREPARE, COMMIT, ROLLBACK})
# Barriers after which every bolt holds its last committed state, and nothing else.
RESETS = frozenset({INIT, ROLLBACK})

COMMITTED = "committed"
PREPARING = "preparing"
COMMITTING = "committing"
PHASES = frozenset({COMMITTED, PREPARING, COMMITTING})


def initial_record() -> dict[str, Any]:
    return {"txid": 0, "phase": COMMITTED, "position": None, "prepared": None}


def check_record(record: Any) -> dict[str, Any]:
    """A stored record, or a ValueError saying what is wrong with it."""
    if record is None:
        return initial_record()
    ok = (isinstance(record, dict) and isinstance(record.get("txid"), int) and record["txid"] >= 0
          and record.get("phase") in PHASES)
    if not ok:
        msg = (f"the stored checkpoint state {record!r} is not a checkpoint record "
               f"(a dict with an int txid >= 0 and a phase among {sorted(PHASES)})")
        raise ValueError(msg)
    return {"txid": record["txid"], "phase": record["phase"], "position": record.get("position"),
            "prepared": record.get("prepared")}


@dataclass(frozen=True)
class Save:
    """Store this record (the txid, its phase, the positions) before what follows."""

    record: dict[str, Any]


@dataclass(frozen=True)
class Emit:
    """Emit barrier ``barrier`` (``action`` of ``txid``) on the checkpoint stream, tracked."""

    txid: int
    action: str
    barrier: int


@dataclass(frozen=True)
class Restore:
    """Rewind the checkpointed spout to ``position`` (the committed one)."""

    position: Any


Instruction = Save | Emit | Restore


class CheckpointCoordinator:
    """Decides which barrier goes out next; one per topology (one task).

    ``new_id`` makes barrier ids (random 63-bit: a restarted coordinator's
    ids must not match a barrier still travelling from its predecessor).
    """

    def __init__(self, record: Any, interval: float, now: float, new_id: Callable[[], int]) -> None:
        if interval <= 0:
            msg = f"the checkpoint interval must be > 0 seconds, got {interval!r}"
            raise ValueError(msg)
        self.record = check_record(record)
        self.interval = interval
        self.new_id = new_id
        self.recovering = True  # every start recovers: bolts start uninitialized
        self.in_flight: Emit | None = None
        self.last_checkpoint = now

    @property
    def txid(self) -> int:
        return self.record["txid"]

    @property
    def phase(self) -> str:
        return self.record["phase"]

    @property
    def committed_txid(self) -> int:
        return self.txid if self.phase == COMMITTED else self.txid - 1

    @property
    def may_emit_data(self) -> bool:
        """Whether the checkpointed spout may emit now: not while recovering,
        when what it emits would be replayed from the committed position anyway."""
        return not self.recovering

    def _emit(self, txid: int, action: str) -> Emit:
        self.in_flight = Emit(txid, action, self.new_id())
        return self.in_flight

    def _save(self, **changes: Any) -> Save:
        self.record = {**self.record, **changes}
        return Save(dict(self.record))

    def step(self, now: float, snapshot: Callable[[], Any] | None = None) -> list[Instruction]:
        """What to do now; ``snapshot()`` gives the spout's position at a prepare barrier."""
        if self.in_flight is not None:
            return []
        if self.recovering:
            if self.phase == COMMITTING:
                return [self._emit(self.txid, COMMIT)]  # some bolts may have committed: all must
            action = ROLLBACK if self.phase == PREPARING else INIT
            return [Restore(self.record["position"]), self._emit(self.committed_txid, action)]
        if now - self.last_checkpoint < self.interval:
            return []
        self.last_checkpoint = now
        position = snapshot() if snapshot is not None else None
        txid = self.txid + 1
        return [self._save(txid=txid, phase=PREPARING, prepared=position), self._emit(txid, PREPARE)]

    def ack(self, barrier: int, now: float) -> list[Instruction]:
        done = self.in_flight
        if done is None or done.barrier != barrier:
            return []  # a barrier of an abandoned step: nothing to do
        self.in_flight = None
        if done.action == PREPARE:
            return [self._save(phase=COMMITTING), self._emit(done.txid, COMMIT)]
        if done.action == COMMIT:
            save = self._save(phase=COMMITTED, position=self.record["prepared"], prepared=None)
            self.last_checkpoint = now
            return [save]
        # A reset completed: every bolt holds the committed state.
        self.recovering = False
        self.last_checkpoint = now
        if self.phase == PREPARING:
            return [self._save(txid=self.txid - 1, phase=COMMITTED, prepared=None)]
        return []

    def fail(self, barrier: int) -> list[Instruction]:
        failed = self.in_flight
        if failed is None or failed.barrier != barrier:
            return []
        self.in_flight = None
        self.recovering = True
        return []

    def abort(self) -> None:
        """The last step could not be stored or emitted: recover (it is retried from the record)."""
        self.in_flight = None
        self.recovering = True
