"""StatefulWindowedBolt: a windowed bolt whose KeyValueState is checkpointed
(Storm's IStatefulWindowedBolt run by StatefulWindowedBoltExecutor).

    class Sums(StatefulWindowedBolt):
        outputs = ["sum"]
        def init_state(self, state):          # a KeyValueState, as of the last commit
            self.state = state
        def process_window(self, window):
            total = sum(t.values.n for t in window.tuples)
            self.state.put("total", self.state.get("total", 0) + total)
            self.emit([total])

It is a :class:`~squall.windowing.bolt.WindowedBolt` and a
:class:`~squall.state.bolts.StatefulBolt` at once, so a topology holding one is
rewritten like any checkpointed topology and the checkpoint wrapper runs it:
``init_state`` comes before the first tuple, and the wrapper holds the ack a
window gives a tuple on expiry until the checkpoint after it commits, as
Storm's executor does.  The window itself is not saved: tuples still in it when
a worker dies are replayed by the acker (tracked spouts), so window plus slide
must fit in ``topology.message.timeout.secs`` as for any windowed bolt.

``persist=True`` (Storm's PersistentWindowedBoltExecutor) also saves the
window's buffer with each checkpoint, under its own key next to the user's
state, and acks each tuple when the checkpoint that saved it commits, not on
expiry: the window may be longer than the message timeout, and after a worker
dies it is restored from the last commit while the spout replays what came
after.  The buffer is held in memory whole and written whole at each
checkpoint, unless ``max_events_in_memory=N`` (Storm's WindowState): then its
tuples live in partitions in the store, at most N in memory, checkpoints write
only the partitions that changed, and ``window.tuples`` is a view paging them in
(:mod:`squall.windowing.paged`).  A subclass that overrides
``pre_prepare`` / ``pre_commit`` / ``pre_rollback`` must call ``super()``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from squall.errors import TopologyValidationError
from squall.state.bolts import StatefulBolt
from squall.topology.component import ComponentSpec
from squall.windowing.bolt import TIMEOUT_KEY, WindowedBolt
from squall.windowing.core import WindowCore
from squall.windowing.persist import CODEC, restore, snapshot


class StatefulWindowedBolt(WindowedBolt, StatefulBolt):
    """Subclass, define ``init_state(state)`` and ``process_window(window)``."""

    @classmethod
    def spec(  # type: ignore[override]
        cls,
        name: str | None = None,
        inputs: Any = None,
        par: int = 1,
        tasks: int | None = None,
        config: Mapping[str, Any] | None = None,
        *,
        persist: bool = False,
        max_events_in_memory: Any = None,
        **window_args: Any,
    ) -> ComponentSpec:
        where = f"stateful windowed bolt {cls.__name__}"
        if not isinstance(persist, bool):
            msg = f"{where}: persist must be True or False, got {persist!r}"
            raise TopologyValidationError(msg)
        if max_events_in_memory is not None and (
                isinstance(max_events_in_memory, bool) or not isinstance(max_events_in_memory, int)
                or max_events_in_memory <= 0):
            msg = f"{where}: max_events_in_memory must be a positive int, got {max_events_in_memory!r}"
            raise TopologyValidationError(msg)
        if max_events_in_memory is not None and not persist:
            msg = (f"{where}: max_events_in_memory bounds a persisted window's tuples in memory; "
                   "it needs persist=True")
            raise TopologyValidationError(msg)
        conf = dict(config or {})
        # A persisted window outlives the message timeout: its tuples are acked on commit.
        timeout = conf.pop(TIMEOUT_KEY, None) if persist else None
        spec = super().spec(name, inputs, par, tasks, conf, **window_args)
        if timeout is not None:
            spec.config[TIMEOUT_KEY] = timeout
        spec.options["persist"] = persist
        if max_events_in_memory is not None:
            spec.options["max_events_in_memory"] = max_events_in_memory
        return spec

    @classmethod
    def check_definition(cls, cdef: Any, conf: Mapping[str, Any], where: str) -> None:
        if not cdef.options.get("persist"):
            super().check_definition(cdef, conf, where)
            return
        from squall.state.providers import provider_of

        if provider_of(dict(conf)).name == "memory":
            msg = (f"{where}: persist=True saves the window in the state store, but "
                   "topology.state.provider is 'memory', which dies with the worker; use sqlite or redis")
            raise TopologyValidationError(msg)

    # -- persist: the window saved with each checkpoint -----------------------------

    _window_state: Any = None
    _arrived: list[Any] | None = None  # since the last prepare: acked (on commit) by that checkpoint
    _ack_now: Any = None

    def _setup(self) -> WindowCore:
        core = super()._setup()
        if self.options.get("persist"):
            from squall.state.kv import KeyValueState
            from squall.state.providers import worker_store

            ctx = self.context
            self._window_state = KeyValueState(worker_store(self.conf, ctx),
                                               f"{ctx.component_id}/{ctx.task_id}/window")
            self._window_state.load()
            bound = self.options.get("max_events_in_memory")
            if bound is not None:
                from squall.windowing.paged import PagedTuples

                # Partitions go straight to the store, not through the KeyValueState
                # (which holds and writes all its keys): only the metadata is in it.
                core.tuples = PagedTuples(worker_store(self.conf, ctx),  # type: ignore[assignment]
                                          f"{ctx.component_id}/{ctx.task_id}/window/part", bound, CODEC)
            restore(core, self._window_state.get("buffer"))
            self._arrived = []
            # The checkpoint wrapper's ack holds a tuple until the next commit: call it
            # when a tuple is saved (prepare), never on expiry.
            self._ack_now, self.ack = self.ack, _no_ack
            self.logger.info("window restored", tuples=len(core))
        return core

    def process(self, tup: Any) -> None:
        super().process(tup)
        if self._arrived is not None:
            self._arrived.append(tup)

    def pre_prepare(self, txid: int) -> None:
        """Save the window with the state; subclasses overriding it call super()."""
        if not self.options.get("persist"):
            return
        core = self._core or self._setup()
        self._window_state.put("buffer", snapshot(core))
        self._window_state.prepare(txid)
        arrived, self._arrived = self._arrived or [], []
        for tup in arrived:
            self._ack_now(tup)

    def pre_commit(self, txid: int) -> None:
        if self._window_state is not None:
            self._window_state.commit(txid)
            if self._core is not None and not isinstance(self._core.tuples, list):
                self._core.tuples.committed()  # drop the partition versions it superseded

    def pre_rollback(self) -> None:
        # The replay after a rollback starts at the last commit: so does the window.
        if self._window_state is not None and self._core is not None:
            self._window_state.load()
            restore(self._core, self._window_state.get("buffer"))
            arrived, self._arrived = self._arrived or [], []
            for tup in arrived:  # in no checkpoint: replay them
                self.fail(tup)


def _no_ack(tup: Any) -> None:
    """Expiry acks nothing in a persisted window: its tuples were acked at a commit."""
