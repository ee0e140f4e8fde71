"""The bolt every bolt of a checkpointed topology runs inside (Storm's
StatefulBoltExecutor and CheckpointTupleForwarder in one).

It feeds the task's tuples through a
:class:`~squall.state.alignment.BarrierAligner` and carries out what it
decides: run the user's bolt on a tuple, hold or drop it, act on a completed
barrier and forward it downstream on ``$checkpoint``.  For a
:class:`~squall.state.bolts.StatefulBolt` it also owns the
:class:`~squall.state.kv.KeyValueState` and defers each tuple's ack until the
checkpoint after it commits.  A plain bolt keeps its own ack behaviour.
"""

from __future__ import annotations

import copy
from typing import Any

from squall.errors import FailedException, SerializationError
from squall.state.alignment import BarrierAligner, Complete, Fail, Process, Reset
from squall.state.checkpoint import CHECKPOINT_STREAM, COMMIT, PREPARE, RESETS
from squall.state.providers import worker_store
from squall.topology.component import DEFAULT_STREAM, Bolt
from squall.topology.loading import resolve_class
from squall.topology.wrapper import WrapperBolt


class CheckpointedBolt(WrapperBolt):
    @classmethod
    def check_definition(cls, cdef: Any, conf: Any, where: str) -> None:
        """The wrapped class checks its own settings (a window against the timeout)."""
        wrapped = _wrapped_check(cdef, "check_definition")
        if wrapped is not None:
            check, inner = wrapped
            check(inner, conf, where)

    @classmethod
    def check_inputs(cls, cdef: Any, declared: Any, where: str) -> None:
        """The wrapped class checks its inputs too, the checkpoint streams left out (its own)."""
        wrapped = _wrapped_check(cdef, "check_inputs")
        if wrapped is not None:
            check, inner = wrapped
            inner.inputs = [i for i in cdef.inputs if i.stream != CHECKPOINT_STREAM]
            check(inner, {k: v for k, v in declared.items() if k[1] != CHECKPOINT_STREAM}, where)

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        opts = self.options
        user_cls = resolve_class(opts["bolt"])
        self.stateful = bool(getattr(user_cls, "_checkpointed", False))  # a StatefulBolt (squall.state.bolts)
        channels = [(comp, task) for (comp, stream) in context.sources if stream == CHECKPOINT_STREAM
                    for task in context.component_tasks[comp]]
        self.core = BarrierAligner(channels, hold_until_initialized=self.stateful)
        self.state: Any = None
        if self.stateful:
            from squall.state.kv import KeyValueState

            prefix = f"{context.component_id}/{context.task_id}"
            self.state = KeyValueState(worker_store(conf, context), prefix)
        self.acked: list[Any] = []  # acked by the user since the last prepare (stateful only)
        self.prepared: list[Any] = []  # acked before the last prepare: acked for real at its commit
        self.user_initialized = False
        self.current: Any = None
        user = self.build_inner(user_cls, opts.get("bolt_options"), _data_context(context))
        self.user = user
        self.user_process = user.process
        self.user_auto_ack, self.user_auto_fail = bool(user.auto_ack), bool(user.auto_fail)
        self.user_auto_anchor = bool(user.auto_anchor)
        user.emit = self._user_emitter()
        user.ack = self._user_ack
        user.fail = self._user_fail
        # A tuple of a checkpointed spout (untracked) failed since the last reset: the
        # acker cannot replay it, so the next checkpoint must fail and rewind instead.
        self.lost_untracked = False
        user.initialize(conf, user.context)

    # -- what the user's bolt calls ----------------------------------------------

    def _user_emitter(self) -> Any:
        """The user's emit: anchored to the tuple being processed, as the user's class asks.

        A closure, not a method: it runs for every tuple emitted, and the wrapper's
        cost over the plain word count is mostly calls like this one.
        """
        emit = self.emit
        if not self.user_auto_anchor:
            return emit
        wrapper = self

        def user_emit(values: Any, anchors: Any = None, stream: str = DEFAULT_STREAM,
                      direct_task: Any = None) -> Any:
            if anchors is None:
                current = wrapper.current
                if current is not None and current.anchors:  # untracked: nothing to anchor to
                    anchors = current
            return emit(values, anchors, stream, direct_task)

        return user_emit

    def _user_ack(self, tup: Any) -> None:
        if self.stateful:
            if tup.anchors:  # untracked (a checkpointed spout's): nothing to ack, nothing to keep
                self.acked.append(tup)  # its effect is in the state only once that is committed
        else:
            self.ack(tup)

    def _user_fail(self, tup: Any) -> None:
        if not tup.anchors:
            self.lost_untracked = True
        self.fail(tup)

    # -- arrivals ----------------------------------------------------------------

    def process(self, tup: Any) -> None:
        if tup.stream == CHECKPOINT_STREAM:
            txid, action, barrier = tup.values
            self._run(self.core.barrier((tup.component, tup.task), barrier, action, txid, tup))
            return
        if not self.core.passthrough:
            self._run(self.core.data((tup.component, tup.task), tup))
        elif tup.anchors:
            self._process_user(tup)
        else:
            # The common case of a checkpointed spout's topology: nothing to align, nothing to
            # anchor to or keep for a deferred ack.  Inlined: this runs for every tuple.
            try:
                self.user_process(tup)
            except Exception as e:  # noqa: BLE001 - user code: the tuple fails, the worker lives
                self._user_error(tup, e)
                return
            if self.user_auto_ack and not self.stateful:
                self.ack(tup)

    def process_tick(self, tup: Any) -> None:
        if self.user_initialized or not self.stateful:
            self.user.process_tick(tup)

    def _run(self, instructions: list[Any]) -> None:
        for ins in instructions:
            if type(ins) is Process:
                self._process_user(ins.item)
            elif type(ins) is Fail:
                self.fail(ins.item)
            elif type(ins) is Reset:
                self._reset()
            elif type(ins) is Complete:
                self._complete(ins)

    def _process_user(self, tup: Any) -> None:
        self.current = tup
        try:
            self.user_process(tup)
        except Exception as e:  # noqa: BLE001 - user code: the tuple fails, the worker lives
            self.current = None
            self._user_error(tup, e)
            return
        self.current = None
        if self.user_auto_ack:
            self._user_ack(tup)

    def _user_error(self, tup: Any, error: Exception) -> None:
        if isinstance(error, SerializationError):
            raise error
        if not isinstance(error, FailedException):
            self.report_error(error)
        if self.user_auto_fail:
            self._user_fail(tup)

    # -- barriers ----------------------------------------------------------------

    def _reset(self) -> None:
        self.lost_untracked = False
        if not self.stateful:
            return
        if self.user_initialized:
            self.user.pre_rollback()
        for tup in self.prepared + self.acked:
            self.fail(tup)  # their effect is gone with the rollback: replay them
        self.prepared, self.acked = [], []
        txid = self.state.load()
        self.logger.info("state restored", committed_txid=txid, keys=len(self.state))

    def _complete(self, done: Complete) -> None:
        action, txid = done.action, done.txid
        try:
            if action == PREPARE:
                if not done.initialized or self.lost_untracked:
                    # Started since the last reset (a restarted worker), or a checkpointed
                    # spout's tuple failed here: what was lost is in no state, so this
                    # checkpoint must not commit; the rollback rewinds the spout.
                    for tup in done.items:
                        self.fail(tup)
                    return
                if self.stateful:
                    self.user.pre_prepare(txid)
                    self.state.prepare(txid)
                    self.prepared.extend(self.acked)
                    self.acked = []
            elif action == COMMIT:
                if self.stateful:
                    if self.user_initialized:
                        self.user.pre_commit(txid)
                    self.state.commit(txid)
                    for tup in self.prepared:
                        self.ack(tup)
                    self.prepared = []
            elif action in RESETS and self.stateful and not self.user_initialized:
                self.user.init_state(self.state)
                self.user_initialized = True
        except SerializationError:
            raise  # a value the store refuses is a bug: the worker dies, loudly
        except Exception as e:  # noqa: BLE001 - a store outage or user hook: this checkpoint fails
            self.report_error(e)
            for tup in done.items:
                self.fail(tup)
            return
        self.emit([txid, action, done.barrier], anchors=done.items, stream=CHECKPOINT_STREAM)
        for tup in done.items:
            self.ack(tup)


class CheckpointedFlushingBolt(CheckpointedBolt):
    """The wrapper of a bolt that flushes per batch (a multilang bolt, a sink): the
    executor calls ``batch_done`` only on classes that define it, so this one does."""

    def batch_done(self) -> None:
        self.user.batch_done()


def wrapper_for(user_cls: type) -> type[CheckpointedBolt]:
    return CheckpointedFlushingBolt if user_cls.batch_done is not Bolt.batch_done else CheckpointedBolt


def _wrapped_check(cdef: Any, name: str) -> tuple[Any, Any] | None:
    """The wrapped class's ``name`` check, and the definition as that class sees it (its own
    options), or None when the class has no such check."""
    check = getattr(resolve_class(cdef.options["bolt"]), name, None)
    if check is None:
        return None
    inner = copy.copy(cdef)
    inner.options = cdef.options.get("bolt_options") or {}
    return check, inner


def _data_context(context: Any) -> Any:
    """The task's context as the wrapped bolt sees it: its sources without the checkpoint
    streams, which are the wrapper's and carry no data (an event-time window waits for a
    watermark from every source it is told of: it would wait for them for ever)."""
    inner = copy.copy(context)
    inner.sources = {key: grouping for key, grouping in context.sources.items()
                     if key[1] != CHECKPOINT_STREAM}
    return inner
