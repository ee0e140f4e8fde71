"""The transaction state machine, a pure core: which transactions process,
which may commit, what to replay.  The coordinator spout is its I/O shell.

Storm's TransactionalSpoutCoordinator, kept to its rules:

- ``current`` is the first uncommitted txid.  At most ``max_active``
  transactions are active at once, all within ``current .. current +
  max_active - 1``; each has one live attempt.
- A processed transaction commits only when it is ``current``: commits are
  strictly ordered; processing is pipelined.
- An ack or fail of an attempt that is not the live one of its txid is stale
  and ignored.
- A failure, in either phase, drops that transaction and every later active
  one: they are all started again with new attempts, so that a spout that
  emits "from where the last transaction left off" skips nothing.

New transactions start strictly in txid order: txid t is started only after
t - 1 was, so its metadata can be made from t - 1's.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from squall.transactional.attempt import TransactionAttempt

# Returned by a start callback: this txid cannot start now (not ready, or its
# metadata could not be stored); later ones wait too.
NOT_READY = object()


class Phase(enum.Enum):
    PROCESSING = "processing"
    PROCESSED = "processed"
    COMMITTING = "committing"


@dataclass
class Active:
    attempt: TransactionAttempt
    phase: Phase


@dataclass(frozen=True)
class StartBatch:
    attempt: TransactionAttempt
    metadata: Any


@dataclass(frozen=True)
class StartCommit:
    attempt: TransactionAttempt


class TransactionCoordinator:
    def __init__(self, current: int, max_active: int, new_attempt_id: Callable[[], int],
                 epoch: int = 0) -> None:
        if current < 1:
            msg = f"txids start at 1, got {current}"
            raise ValueError(msg)
        self.current = current
        self.epoch = epoch  # carried by every attempt (see squall.cluster.fence)
        self.max_active = max(1, max_active)
        self.active: dict[int, Active] = {}
        self._new_id = new_attempt_id

    def sync(self, start: Callable[[int], Any], may_start: bool = True) -> list[StartBatch | StartCommit]:
        """What to emit now.  ``start(txid)`` gives the metadata of a
        transaction that is not active (stored, or made now), or NOT_READY."""
        out: list[StartBatch | StartCommit] = []
        head = self.active.get(self.current)
        if head is not None and head.phase is Phase.PROCESSED:
            head.phase = Phase.COMMITTING
            out.append(StartCommit(head.attempt))
        if not may_start:
            return out
        for txid in range(self.current, self.current + self.max_active):
            if txid in self.active:
                continue
            metadata = start(txid)
            if metadata is NOT_READY:
                break  # strict order: t + 1 never starts before t
            attempt = TransactionAttempt(txid, self._new_id(), self.epoch)
            self.active[txid] = Active(attempt, Phase.PROCESSING)
            out.append(StartBatch(attempt, metadata))
        return out

    def commit_due(self) -> bool:
        """Would the next sync start a commit?"""
        head = self.active.get(self.current)
        return head is not None and head.phase is Phase.PROCESSED

    def _live(self, attempt: TransactionAttempt) -> Active | None:
        entry = self.active.get(attempt.txid)
        if entry is None or entry.attempt != attempt:
            return None
        return entry

    def ack(self, attempt: TransactionAttempt) -> int | None:
        """A phase of ``attempt`` succeeded; the txid it committed, if any."""
        entry = self._live(attempt)
        if entry is None:
            return None
        if entry.phase is Phase.PROCESSING:
            entry.phase = Phase.PROCESSED
            return None
        if entry.phase is Phase.COMMITTING:
            del self.active[attempt.txid]
            self.current = attempt.txid + 1
            return attempt.txid
        return None  # an ack of a processed attempt twice: nothing new

    def fail(self, attempt: TransactionAttempt) -> list[int]:
        """A phase of ``attempt`` failed or timed out: it and every later active
        transaction start again.  The txids dropped."""
        if self._live(attempt) is None:
            return []
        dropped = sorted(t for t in self.active if t >= attempt.txid)
        for txid in dropped:
            del self.active[txid]
        return dropped

    def phases(self) -> dict[int, str]:
        """txid -> phase of every active transaction (for logs and tests)."""
        return {t: a.phase.value for t, a in sorted(self.active.items())}
