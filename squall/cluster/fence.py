"""Fencing: one coordinator of a transactional id acts at a time.

A worker whose slot was moved may run for a few seconds beside its
replacement (its supervisor restarted it from an assignment that was stale
by then), and ZeroMQ may hand a restarted worker what was queued for its
address long ago.  So two coordinators of one transactional id can run at
once, and a commit can arrive after later ones.  Storm's txid rule ("skip a
txid already stored") is exact only if commits reach the user's state in
txid order, once per txid's content; two coordinators break both.

Each coordinator claims an **epoch** when it starts (and again when it takes
over), a number in the transactional state that only grows; it reads the
current txid and metadata *after* claiming, and every attempt it emits
carries its epoch.  A :class:`Fence` is the condition a write or a commit
must hold:

- the coordinator's own writes (current txid, metadata, rotation) need its
  epoch to be the current one, checked atomically with the write: a
  superseded coordinator can no longer move the current txid, in either
  direction;
- a commit needs, besides, the transaction to be the current txid: a commit
  delivered late, after the txid committed and the coordinator moved on, is
  refused (the same txid again is harmless: its content is fixed, and
  committers skip it).  Squall's own writes at commit (an opaque emitter's
  committed metadata) are checked atomically; a user's committer is checked
  just before its ``finish_batch`` runs.

A coordinator that finds itself superseded stops emitting and waits in
standby until the epoch that superseded it is no longer held (its worker
stopped, or its ZooKeeper session ended), then claims a new one.
"""

from __future__ import annotations

from dataclasses import dataclass

from squall.errors import SquallError


@dataclass(frozen=True)
class Fence:
    """Holds while the transactional id's epoch is ``epoch`` and, when
    ``txid`` is set, its current (first uncommitted) txid is ``txid``."""

    epoch: int
    txid: int | None = None


class FencedOut(SquallError):
    """A newer coordinator of this transactional id has taken over, or the
    transaction is no longer the one to commit: the write was not made."""

    def __init__(self, fence: Fence, epoch: int, current: int | None) -> None:
        self.fence = fence
        self.epoch = epoch
        self.current = current
        if epoch != fence.epoch:
            why = f"epoch {fence.epoch} was superseded by epoch {epoch}"
        else:
            why = f"txid {fence.txid} is not the transaction to commit (the current txid is {current})"
        super().__init__(f"fenced out: {why}")


def holds(fence: Fence, epoch: int, current: int | None) -> bool:
    """Does ``fence`` hold against the stored ``epoch`` and current txid?"""
    return epoch == fence.epoch and (fence.txid is None or fence.txid == current)
