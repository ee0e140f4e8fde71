"""The emitter bolt: the user's transactional spout, on the batch stream.

Each emitter task gets every batch tuple (all grouping), emits its share of
the batch through the spout, reports its counts downstream anchored to the
batch tuple, and acks it.  How it finds what to emit depends on the kind:

- transactional: the coordinator's metadata says it all;
- partitioned: each owned partition's metadata per txid is stored here
  (made by ``emit_new_batch`` once, replayed by ``emit_batch`` ever after);
- opaque: each owned partition starts from the previous txid's metadata as
  this task produced it, or the last committed one; the metadata of a
  transaction is stored when it commits (this task also gets the commit
  tuple), so that a restarted task resumes from what was committed.

A ``FailedException`` (or a ZooKeeper outage) fails the batch, which is
replayed; any other error is reported and fails it too.

Every attempt carries its coordinator's epoch (squall.cluster.fence).
A task refuses a batch from an epoch older than one it has seen, and on a
newer epoch drops what it cached from the old one: a coordinator that took
over starts again from what is stored.
"""

from __future__ import annotations

from typing import Any

from squall.cluster.fence import Fence, FencedOut
from squall.cluster.fenced_state import decode_value, encode_value
from squall.errors import CoordinationError, FailedException, SerializationError, TopologyValidationError
from squall.topology.wrapper import WrapperBolt
from squall.transactional.output import BATCH_STREAM, COMMIT_STREAM, BatchOutput, count_targets
from squall.transactional.rotating import MetadataConflict, MissingPredecessor, RotatingState
from squall.transactional.state import open_backend


class _Batch:
    """What BatchOutput counts against while the spout emits one batch."""

    __slots__ = ("attempt", "sent")

    def __init__(self, attempt: Any) -> None:
        self.attempt = attempt
        self.sent: dict[int, int] = {}


class EmitterBolt(WrapperBolt):
    wrapped_option = "spout"  # on self.spout, not self.user: a spout takes no ticks
    wrapped_refusal = "is not a transactional spout"

    @classmethod
    def wrapped_kinds(cls) -> tuple[type, ...]:
        from squall.transactional.spouts import SPOUT_KINDS

        return SPOUT_KINDS

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        opts = self.options
        self.spout = make_user_spout(self, opts, conf, context)
        self.kind = self.spout.transactional_kind
        self.out = BatchOutput(context.component_id, self.emit, count_targets(context))
        self.index = context.this_task_index
        self.ntasks = len(context.this_component_tasks)
        self.state: Any = None
        if self.kind != "transactional":
            self.state = open_backend(conf, context.resources).open(state_id(opts, conf, context), "user")
        self.partitions: dict[int, RotatingState] = {}  # partitioned: per owned partition
        # opaque: partition -> txid -> (attempt id, metadata it started from, metadata it made)
        self.cache: dict[int, dict[int, tuple[int, Any, Any]]] = {}
        # opaque: partition -> the last committed {"txid", "meta", "prev"} stored (None: nothing yet)
        self.committed: dict[int, dict[str, Any] | None] = {}
        self.emitted: dict[int, int] = {}  # txid -> attempt id this task last emitted
        self.epoch = 0  # the newest coordinator epoch seen

    def current_epoch(self, attempt: Any) -> bool:
        """Is ``attempt`` from the newest coordinator seen?  A newer one resets what
        this task cached of the old one's transactions."""
        if attempt.epoch < self.epoch:
            return False
        if attempt.epoch > self.epoch:
            self.epoch = attempt.epoch
            self.cache.clear()
            self.emitted.clear()
            self.partitions.clear()  # reloaded from the store on the next batch
            self.committed.clear()
        return True

    def owned(self, num_partitions: int) -> range:
        return range(self.index, num_partitions, self.ntasks)

    def process(self, tup: Any) -> None:
        if tup.stream == BATCH_STREAM:
            self.on_batch(tup)
        elif tup.stream == COMMIT_STREAM:
            self.on_commit(tup)

    def on_batch(self, tup: Any) -> None:
        attempt, metadata, committed = tup.values
        if not self.current_epoch(attempt):
            self.logger.info("batch of a superseded coordinator refused", txid=attempt.txid,
                             epoch=attempt.epoch, current_epoch=self.epoch)
            self.fail(tup)
            return
        if committed is not None and attempt.txid <= committed:
            # A batch tuple delivered late, of a txid committed since: nothing may
            # be made for it (its predecessor's metadata may be rotated away).
            self.fail(tup)
            return
        batch = _Batch(attempt)
        self.out.current = batch
        try:
            if self.kind == "transactional":
                self.spout.emit_batch(attempt, metadata, self.out.emit)
            elif self.kind == "partitioned":
                self.emit_partitioned(attempt, metadata, committed)
            else:
                self.emit_opaque(attempt, metadata, committed)
        except Exception as e:  # noqa: BLE001 - user code or state: the batch fails, the worker lives
            if isinstance(e, SerializationError):
                raise
            if not isinstance(e, (FailedException, MissingPredecessor, MetadataConflict, CoordinationError)):
                self.report_error(e)
            else:
                self.logger.debug("batch failed at the emitter", txid=attempt.txid, reason=str(e))
            self.fail(tup)
            return
        finally:
            self.out.current = None
        self.out.send_counts(attempt, batch.sent, tup)
        self.ack(tup)
        self.emitted[attempt.txid] = attempt.attempt_id
        if committed:
            self.forget_before(committed)

    def forget_before(self, committed: int) -> None:
        try:
            if self.kind == "transactional":
                self.spout.cleanup_before(committed)
            for rs in self.partitions.values():
                rs.cleanup_before(committed)
        except CoordinationError as e:
            self.logger.warning("cleanup of committed state failed; retried later", error=str(e))
        except Exception as e:  # noqa: BLE001 - the user's cleanup_before: reported, the worker lives
            self.report_error(e)
        for cache in self.cache.values():
            for txid in [t for t in cache if t < committed]:
                del cache[txid]
        for txid in [t for t in self.emitted if t < committed]:
            del self.emitted[txid]

    # -- partitioned: exact replays from stored per-partition metadata ----------

    def emit_partitioned(self, attempt: Any, num_partitions: int, committed: int) -> None:
        spout, emit, txid = self.spout, self.out.emit, attempt.txid
        for p in self.owned(num_partitions):
            rs = self.partitions.get(p)
            if rs is None:
                rs = self.partitions[p] = RotatingState(self.state, f"partition_{p}", f"partition {p}")

            def new_batch(prev: Any, p: int = p) -> Any:
                return spout.emit_new_batch(attempt, emit, p, prev)

            # Stored (here or by another instance of this task): an exact replay.
            # Made now: stored once, and a batch that lost that race fails.
            metadata, stored = rs.get_or_make(txid, new_batch, committed)
            if stored:
                spout.emit_batch(attempt, emit, p, metadata)

    # -- opaque: from the previous txid's metadata; committed metadata stored on commit

    def emit_opaque(self, attempt: Any, num_partitions: int, committed: int | None) -> None:
        spout, emit, txid = self.spout, self.out.emit, attempt.txid
        for p in self.owned(num_partitions):
            cache = self.cache.setdefault(p, {})
            prev = cache.get(txid - 1)
            if prev is not None:
                last = prev[2]
            elif committed == txid - 1:
                # txid - 1 is committed (0: nothing is yet): start from what was stored.
                # A commit of txid itself may be stored already (its commit phase
                # failed after this task wrote): then start from what it started from.
                stored = self.stored(p)
                if stored is None:
                    last = None
                elif stored["txid"] >= txid:
                    last = stored["prev"]
                else:
                    last = stored["meta"]
            else:
                # txid - 1 is in flight but this task never made it (restarted, or its
                # batch tuple was lost): starting from older metadata would overlap it.
                msg = f"partition {p}: txid {txid - 1} is not known here; txid {txid} waits for its replay"
                raise FailedException(msg)
            meta = spout.emit_batch(attempt, emit, p, last)
            made = decode_value(encode_value(meta, f"partition {p} metadata"))
            cache[txid] = (attempt.attempt_id, last, made)

    def stored(self, p: int) -> dict[str, Any] | None:
        if p not in self.committed:
            self.committed[p] = self.state.get_data(f"partition_{p}")
        return self.committed[p]

    def on_commit(self, tup: Any) -> None:
        attempt = tup.values[0]
        if self.kind != "opaque":
            self.ack(tup)
            return
        txid = attempt.txid
        if not self.current_epoch(attempt) or self.emitted.get(txid) != attempt.attempt_id:
            # This task did not emit this attempt (it restarted since): the
            # transaction is replayed, and its batch made here anew.
            self.logger.info("commit of a batch this task did not emit; replayed", txid=txid)
            self.fail(tup)
            return
        # Written only while this is the coordinator's epoch and txid is the one to
        # commit, atomically: a commit delivered late (ZeroMQ held it for a worker
        # that came back) must not put an older txid's metadata over a newer one's.
        fence = Fence(attempt.epoch, txid)
        try:
            for p, cache in self.cache.items():
                if txid not in cache:
                    continue  # a partition this transaction did not read
                _attempt, base, meta = cache[txid]
                record = {"txid": txid, "meta": meta, "prev": base}
                self.state.set_data(f"partition_{p}", record, fence)
                self.committed[p] = record
        except FencedOut as e:
            self.logger.info("commit refused", txid=txid, reason=str(e))
            self.fail(tup)
            return
        except CoordinationError as e:
            self.logger.warning("storing committed metadata failed; replayed", error=str(e))
            self.fail(tup)
            return
        self.ack(tup)

    def cleanup(self) -> None:  # type: ignore[override]
        self.spout.close()


def state_id(opts: dict[str, Any], conf: dict[str, Any], context: Any) -> str:
    """The transactional id keying this topology's state: the class's
    ``transactional_id``, else ``topology.transactional.id``, else the
    name the topology was submitted under (Storm's ``topology.name``, which
    nimbus sets; a LocalCluster's context has it as the topology's name).
    Not the class's name: two submissions of one class would share, and
    fight over, one transaction state."""
    tid = (opts.get("transactional_id") or conf.get("topology.transactional.id") or conf.get("topology.name")
           or context.topology_name)
    if not isinstance(tid, str) or not tid or "/" in tid or tid in (".", ".."):
        msg = f"transactional id {tid!r} must be a non-empty name without '/'"
        raise TopologyValidationError(msg)
    return tid


def make_user_spout(host: Any, opts: dict[str, Any], conf: dict[str, Any], context: Any) -> Any:
    """The user's transactional spout, set up like any component of the task."""
    spout = host.build_inner(opts["spout"], opts.get("spout_options"))
    spout.initialize(conf, context)
    return spout
