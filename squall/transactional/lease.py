"""One instance's hold on an epoch (see squall.cluster.fence): the shell
the transactional coordinator and the checkpoint spout share.

It claims an epoch when the instance starts, learns from a :class:`FencedOut`
that a newer instance claimed one since (and then stands by), and tells a
standing-by instance when it may take over again: once the epoch that
superseded it is no longer held, because that instance stopped or its
ZooKeeper session ended.  Its ``epoch`` and ``standby`` gauges and
``superseded`` counter show operators which instance acts.
"""

from __future__ import annotations

from typing import Any

from squall.cluster.fence import Fence, FencedOut
from squall.errors import CoordinationError

# How often an instance standing by looks whether the one that superseded it is gone.
LOOK_SECS = 1.0


class EpochLease:
    def __init__(self, state: Any, clock: Any, logger: Any, metrics: Any, what: str) -> None:
        self.state = state  # a TransactionalState: claims, checks and holders of its owner's epoch
        self.clock = clock
        self.logger = logger
        self.what = what  # "transactional coordinator", "checkpoint spout": for the log
        self.fence: Fence | None = None  # None until an epoch is claimed
        self.standby = True
        self.next_look = 0.0
        metrics.gauge("epoch", lambda: self.fence.epoch if self.fence else 0)
        metrics.gauge("standby", lambda: int(self.standby))
        self.superseded = metrics.counter("superseded")

    def claim(self) -> Fence:
        """A new epoch, above every one before: the caller reads its state after this.
        CoordinationError when ZooKeeper cannot be reached (then try again later)."""
        try:
            self.fence = Fence(self.state.claim_epoch())
        except CoordinationError:
            self.stand_by()
            raise
        self.standby = False
        return self.fence

    def stand_by(self) -> None:
        """Act no more for now; look again in LOOK_SECS."""
        self.standby = True
        self.next_look = self.clock.now() + LOOK_SECS

    def lost(self, error: FencedOut) -> None:
        """A write or check found a newer epoch: act no more, stand by."""
        if self.standby:
            return
        self.stand_by()
        self.superseded.inc()
        self.logger.warning(f"{self.what} superseded, standing by", epoch=error.fence.epoch,
                            by_epoch=error.epoch)

    def holds(self) -> bool:
        """Is this still the latest epoch?  (Read now: for a step that writes nothing
        that would find out.)  CoordinationError when it cannot be told."""
        assert self.fence is not None
        try:
            self.state.check(self.fence)
        except FencedOut as e:
            self.lost(e)
            return False
        return True

    def may_take_over(self) -> bool:
        """Standing by: is it time to look, and is the epoch that superseded this one gone?"""
        now = self.clock.now()
        if now < self.next_look:
            return False
        self.next_look = now + LOOK_SECS
        if self.fence is None:
            return True  # never claimed one (ZooKeeper was down at the start)
        try:
            latest = self.state.epoch()
            return not (latest > self.fence.epoch and self.state.epoch_held(latest))
        except CoordinationError:
            return False

    def release(self) -> None:
        """The instance stops in order: its epoch is no longer held."""
        if self.fence is None or self.standby:
            return
        try:
            self.state.release_epoch(self.fence.epoch)
        except CoordinationError as e:  # its session's end releases it all the same
            self.logger.warning(f"cannot release the {self.what}'s epoch", error=str(e))
