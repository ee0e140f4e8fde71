"""The coordinator: a regular spout of one task, the I/O shell of
:class:`~squall.transactional.coordinator.TransactionCoordinator`.

It emits each transaction's batch tuple ``(attempt, metadata, committed
txid)`` on the batch stream (all-grouped to the emitters) and its commit
tuple on the commit stream (all-grouped to the committers), each with the
attempt as message id: the acker tells it when a phase succeeded or failed.
It stores the current txid and each transaction's metadata (a rotating
state) under ``<transactional.zookeeper.root>/<transactional id>/coordinator``
before anything that depends on them is emitted.

It claims an epoch before it reads that state, and writes it only while the
epoch is still the latest (squall.cluster.fence): a second coordinator
of the same transactional id (a worker whose slot moved, still running
beside its replacement) is superseded by the newer one and stands by.

``topology.max.spout.pending`` is the number of transactions in flight
(default 1, as in Storm); the core enforces it, so this spout is exempt
from the executor's own limit on pending tuple trees.
"""

from __future__ import annotations

import os
import random
from typing import Any

from squall.cluster.fence import Fence, FencedOut
from squall.cluster.fenced_state import COORDINATOR, CURRENT_TXID
from squall.errors import CoordinationError, SerializationError, TopologyValidationError
from squall.topology.component import Spout, Stream
from squall.transactional.coordinator import NOT_READY, StartBatch, TransactionCoordinator
from squall.transactional.emitter import make_user_spout, state_id
from squall.transactional.lease import EpochLease
from squall.transactional.output import BATCH_STREAM, COMMIT_STREAM
from squall.transactional.rotating import MetadataConflict, RotatingState
from squall.transactional.state import open_backend


class CoordinatorSpout(Spout):
    outputs = [Stream(["tx", "meta", "committed"], name=BATCH_STREAM), Stream(["tx"], name=COMMIT_STREAM)]
    throttled_by_pending = False  # the core limits transactions in flight itself

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        if not context.plan.tracking:
            msg = ("a transactional topology needs ackers: the acker tells the coordinator when a "
                   "batch is processed or committed (topology.acker.executors must not be 0)")
            raise TopologyValidationError(msg)
        opts = self.options
        self.spout = make_user_spout(self, opts, conf, context)
        self.kind = self.spout.transactional_kind
        self.transactional_id = state_id(opts, conf, context)
        self.state = open_backend(conf, context.resources).open(self.transactional_id, COORDINATOR)
        self.max_active = conf["topology.max.spout.pending"] or 1
        rng = random.Random(int.from_bytes(os.urandom(16), "little"))
        self.new_attempt_id = lambda: rng.getrandbits(63)
        self.active = False  # the executor calls activate() when the topology is active
        self.lease = EpochLease(self.state, self.clock, self.logger, self.metrics,
                                "transactional coordinator")
        self.metrics.gauge("in_flight", lambda: 0 if self.standby else len(self.core.active))
        self.take_over()

    @property
    def standby(self) -> bool:
        return self.lease.standby

    @property
    def fence(self) -> Fence | None:
        return self.lease.fence

    def take_over(self) -> None:
        """Claim a new epoch, then read the state: whatever a coordinator before
        this one wrote is in it, and from now on nothing it writes can be."""
        try:
            epoch = self.lease.claim().epoch
            self.meta = RotatingState(self.state, "meta", "coordinator metadata")
            current = self.state.get_data(CURRENT_TXID) or 1
        except CoordinationError as e:
            self.lease.stand_by()
            self.logger.warning("cannot take over the transactional state; retried", error=str(e))
            return
        self.core = TransactionCoordinator(current, self.max_active, self.new_attempt_id, epoch)
        # Stored at once: the committers' fence compares a commit's txid with it.
        self.dirty_current = True
        self.store_current()
        self.logger.info("transactional coordinator started", transactional_id=self.transactional_id,
                         current_txid=current, max_active=self.core.max_active, epoch=epoch)

    # -- the spout callbacks: every one ends in sync() -----------------------------

    def next_tuple(self) -> None:
        self.sync()

    def ack(self, tup_id: Any) -> None:
        if self.standby:
            return
        committed = self.core.ack(tup_id)
        if committed is not None:
            self.on_committed(committed)
        self.sync()

    def fail(self, tup_id: Any) -> None:
        if self.standby:
            return
        dropped = self.core.fail(tup_id)
        if dropped:
            self.logger.info("transactions replayed", txids=dropped, failed_attempt=tup_id.attempt_id)
            failed = getattr(self.spout, "failed", None)  # a spout that tells someone (a DRPC client)
            if callable(failed):
                try:
                    failed(tup_id.txid)
                except Exception as e:  # noqa: BLE001 - user code: reported, the replay goes on
                    self.report_error(e)
        self.sync()

    def activate(self) -> None:
        self.active = True

    def deactivate(self) -> None:
        # In-flight transactions still commit; no new one starts.
        self.active = False

    def close(self) -> None:
        self.lease.release()
        self.spout.close()

    # -- the shell -----------------------------------------------------------------

    def sync(self) -> None:
        if self.standby:
            if self.lease.may_take_over():
                self.take_over()
            return
        if self.dirty_current:
            self.store_current()
        if self.core.commit_due() and not self.holds_epoch():
            return
        actions = self.core.sync(self.start, may_start=self.active and not self.dirty_current)
        if self.standby:
            return  # superseded while starting a transaction: emit nothing
        for action in actions:
            if isinstance(action, StartBatch):
                self.emit([action.attempt, action.metadata, self.core.current - 1],
                          tup_id=action.attempt, stream=BATCH_STREAM)
            else:
                self.emit([action.attempt], tup_id=action.attempt, stream=COMMIT_STREAM)

    def holds_epoch(self) -> bool:
        """Before a commit goes out: is this still the current coordinator?  (A
        superseded one that only replays stored metadata writes nothing that
        would tell it.)  The committers check again when the commit arrives."""
        try:
            return self.lease.holds()
        except CoordinationError as e:
            self.logger.warning("cannot check the epoch before a commit; retried", error=str(e))
            return False

    def start(self, txid: int) -> Any:
        """The metadata of ``txid``: stored (a replay), or made now and stored first."""
        if self.standby:
            return NOT_READY
        if txid not in self.meta and not self.spout.is_ready():
            return NOT_READY
        try:
            value, _existed = self.meta.get_or_make(txid, lambda prev: self.new_metadata(txid, prev),
                                                    self.core.current - 1, self.fence)
        except FencedOut as e:
            self.lease.lost(e)
            return NOT_READY
        except MetadataConflict:
            return NOT_READY  # the stored value is in memory now: the next sync uses it
        except CoordinationError as e:
            self.logger.warning("cannot store transaction metadata; retried", txid=txid, error=str(e))
            return NOT_READY
        except SerializationError:
            raise  # metadata that cannot be stored is a bug in the spout: the worker dies, loudly
        except Exception as e:  # noqa: BLE001 - user code: reported, tried again on the next call
            self.report_error(e)
            return NOT_READY
        return value

    def new_metadata(self, txid: int, prev: Any) -> Any:
        if self.kind == "transactional":
            return self.spout.initialize_transaction(txid, prev)
        n = self.spout.num_partitions()
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            msg = f"{type(self.spout).__name__}.num_partitions() must return an int >= 0, got {n!r}"
            raise TypeError(msg)
        return n

    def on_committed(self, txid: int) -> None:
        success = getattr(self.spout, "success", None)  # Storm's ITridentSpout coordinator's
        if callable(success):
            try:
                success(txid)
            except Exception as e:  # noqa: BLE001 - user code: reported, the commit stands
                self.report_error(e)
        self.store_current()
        if self.standby or self.dirty_current:
            return  # the rotation waits for the current txid to be stored
        try:
            self.meta.cleanup_before(txid, self.fence)
        except FencedOut as e:
            self.lease.lost(e)
        except CoordinationError as e:
            self.logger.warning("cleanup of committed metadata failed; retried later", error=str(e))

    def store_current(self) -> None:
        """Persist the first uncommitted txid, if this coordinator still holds
        the current epoch.  Until it is stored, nothing new starts: a restart
        would replay a committed txid, which committers skip, but the metadata
        of newer ones must not run ahead of it."""
        try:
            self.state.set_data(CURRENT_TXID, self.core.current, self.fence)
            self.dirty_current = False
        except FencedOut as e:
            self.lease.lost(e)
        except CoordinationError as e:
            self.dirty_current = True
            self.logger.warning("cannot store the current txid; retried", error=str(e))
