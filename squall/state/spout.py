"""The checkpoint spout: the I/O shell of
:class:`~squall.state.checkpoint.CheckpointCoordinator` (Storm's CheckpointSpout).

One task per topology.  It keeps the coordinator's record (txid, phase, the
checkpointed spout's positions) where transactional coordinators keep theirs
(ZooKeeper on a cluster, memory in local mode: squall.cluster.fenced_state),
under ``<topology>/checkpoint``, and emits each barrier with its id as the
message id, so that the acker tells it when every bolt has dealt with it.

When the topology has a :class:`~squall.state.bolts.CheckpointedSpout`, this
spout *is* that spout's task: barriers and data leave through the same
executor, in order, so a barrier marks an exact position in the data.  Data
go out untracked; a failure anywhere fails a barrier, and recovery rewinds.

On a cluster it is fenced as transactional coordinators are
(squall.cluster.fence): it claims an epoch under ``<topology>/checkpoint``
before it reads its record, and stores the record only while that epoch is
the latest.  A second instance (a worker whose slot moved, still running
beside its replacement) is superseded by the newer one: it emits no barrier
and no data, and stands by until the newer one's epoch is no longer held.
"""

from __future__ import annotations

import os
import random
from typing import Any

from squall.cluster.fence import Fence, FencedOut
from squall.errors import CoordinationError
from squall.state.checkpoint import (
    CHECKPOINT_FIELDS,
    CHECKPOINT_STREAM,
    COMMIT,
    RESETS,
    CheckpointCoordinator,
    Emit,
    Restore,
    Save,
)
from squall.state.providers import check_state_conf, state_key, worker_store
from squall.state.store import StoreError
from squall.topology.component import DEFAULT_STREAM, Spout, Stream
from squall.transactional.lease import EpochLease

RECORD = "record"
CHECKPOINT_SUBDIR = "checkpoint"


class CheckpointSpout(Spout):
    outputs = [Stream(list(CHECKPOINT_FIELDS), name=CHECKPOINT_STREAM)]
    throttled_by_pending = False  # one barrier in flight at a time; data untracked

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        from squall.cluster.fenced_state import MemoryBackend
        from squall.transactional.state import open_backend

        if not context.plan.tracking:
            msg = ("checkpointed state needs ackers: the acker tells the checkpoint spout when every "
                   "bolt has prepared or committed (topology.acker.executors must not be 0)")
            raise CoordinationError(msg)
        check_state_conf(conf)  # as run: a submit's overrides may have changed the interval or timeout
        backend = open_backend(conf, context.resources)
        self.lease: EpochLease | None = None  # none in local mode: one process, no second instance
        if isinstance(backend, MemoryBackend):
            # Local mode: the record goes with the bolts' state, so that a durable store
            # (SQLite) resumes where it was in the next `squall local` run too.
            self.store: Any = RecordInStore(worker_store(conf, context))
        else:
            self.store = backend.open(state_key(context), CHECKPOINT_SUBDIR, owner=CHECKPOINT_SUBDIR)
            # Claimed before the record is read: whatever an instance before this one
            # stored is in it, and from now on nothing that instance stores can be.
            self.lease = EpochLease(self.store, self.clock, self.logger, self.metrics, "checkpoint spout")
            self.lease.claim()
        rng = random.Random(int.from_bytes(os.urandom(16), "little"))
        self.new_id = lambda: rng.getrandbits(63)
        self.interval = conf.get("topology.state.checkpoint.interval.ms", 1000) / 1000.0
        self.core = CheckpointCoordinator(self.store.get_data(RECORD), self.interval, self.clock.now(),
                                          self.new_id)
        self.user: Any = None
        if self.options.get("spout"):
            user = self.build_inner(self.options["spout"], self.options.get("spout_options"))
            user.emit = self._user_emit
            user.initialize(conf, context)
            self.user = user
        self.active = False
        self.logger.info("checkpoint spout started", txid=self.core.txid, phase=self.core.phase,
                         interval_secs=self.interval, spout=type(self.user).__name__ if self.user else None,
                         epoch=self.fence.epoch if self.fence else None)

    @property
    def standby(self) -> bool:
        return self.lease is not None and self.lease.standby

    @property
    def fence(self) -> Fence | None:
        return None if self.lease is None else self.lease.fence

    def _user_emit(self, values: Any, tup_id: Any = None, stream: str = DEFAULT_STREAM,
                   direct_task: Any = None) -> Any:
        # Untracked: completeness comes from the barriers, replay from the rewind.
        return self.emit(values, stream=stream, direct_task=direct_task)

    def next_tuple(self) -> None:
        if self.standby:
            self._look_for_takeover()
            return
        core = self.core
        user = self.user
        self._run(core.step(self.clock.now(), user.snapshot if user is not None else None))
        if user is not None and self.active and core.may_emit_data and not self.standby:
            user.next_tuple()

    def _look_for_takeover(self) -> None:
        """Standing by: once the newer instance's epoch is no longer held, claim one
        and start again from the stored record, recovering as any start does."""
        assert self.lease is not None
        if not self.lease.may_take_over():
            return
        try:
            self.lease.claim()
            record = self.store.get_data(RECORD)
        except CoordinationError:
            self.lease.stand_by()
            return
        self.core = CheckpointCoordinator(record, self.interval, self.clock.now(), self.new_id)
        self.logger.info("checkpoint spout took over", epoch=self.lease.fence.epoch, txid=self.core.txid)

    def ack(self, tup_id: Any) -> None:
        if self.standby:
            return
        self._run(self.core.ack(tup_id, self.clock.now()))

    def fail(self, tup_id: Any) -> None:
        if self.standby:
            return
        if self.core.in_flight is not None and self.core.in_flight.barrier == tup_id:
            self.logger.warning("checkpoint failed; recovering", txid=self.core.in_flight.txid,
                                action=self.core.in_flight.action)
        self._run(self.core.fail(tup_id))

    def _run(self, instructions: list[Any]) -> None:
        for ins in instructions:
            if type(ins) is Save:
                try:
                    self.store.set_data(RECORD, ins.record, self.fence)
                except FencedOut as e:
                    assert self.lease is not None
                    self.lease.lost(e)
                    return
                except (CoordinationError, StoreError) as e:
                    self.logger.warning("cannot store the checkpoint state; recovering", error=str(e))
                    self.core.abort()
                    return
            elif type(ins) is Restore:
                if self.user is not None:
                    self.user.restore(ins.position)
            elif type(ins) is Emit:
                # A recovery barrier follows no write that would have found this
                # instance superseded: look first.
                recovery = ins.action in RESETS or (ins.action == COMMIT and self.core.recovering)
                if recovery and not self._holds_epoch():
                    return
                self.logger.debug("barrier", txid=ins.txid, action=ins.action)
                self.emit([ins.txid, ins.action, ins.barrier], tup_id=ins.barrier, stream=CHECKPOINT_STREAM)

    def _holds_epoch(self) -> bool:
        if self.lease is None:
            return True
        try:
            return self.lease.holds()
        except CoordinationError as e:
            self.logger.warning("cannot check the epoch before a recovery barrier; recovering", error=str(e))
            self.core.abort()
            return False

    def activate(self) -> None:
        self.active = True
        if self.user is not None:
            self.user.activate()

    def deactivate(self) -> None:
        self.active = False
        if self.user is not None:
            self.user.deactivate()

    def close(self) -> None:
        if self.lease is not None:
            self.lease.release()
        if self.user is not None:
            self.user.close()

    def progress(self) -> float | None:
        return None if self.user is None else self.user.progress()


class RecordInStore:
    """The coordinator's record as one key of the topology's state store (local mode)."""

    KEY = "$checkpoint/record"

    def __init__(self, store: Any) -> None:
        self.store = store

    def get_data(self, path: str) -> Any:
        return self.store.get_many([self.KEY])[0]

    def set_data(self, path: str, value: Any, fence: Any = None) -> None:
        self.store.update([self.KEY], lambda _current: {self.KEY: value})
