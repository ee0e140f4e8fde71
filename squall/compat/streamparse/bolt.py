"""streamparse's bolts, run in the worker's executor thread instead of a pystorm subprocess.

pystorm's rules hold: ``auto_anchor`` anchors an emit to the tuple being processed
(a BatchingBolt's: to its whole batch), ``auto_ack`` acks after ``process`` (a
batch's tuples after ``process_batch``), ``auto_fail`` fails on an exception,
which is reported as the component's error.  Unlike pystorm the worker does not
exit then: the next tuple is processed (docs/streamparse.md).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, ClassVar

from squall.compat.streamparse import dsl
from squall.compat.streamparse.component import TICK_KEY, Component
from squall.topology.component import DEFAULT_STREAM, ComponentSpec
from squall.topology.component import Bolt as SquallBolt
from squall.topology.tuple import TICK_STREAM, Tuple


def _tuple(tup: Any, what: str) -> Tuple:
    if isinstance(tup, Tuple):
        return tup
    msg = (f"{what} takes the Tuple a bolt received, got {tup!r} (in Squall a tuple's id is "
           "not a string to look it up by)")
    raise TypeError(msg)


class Bolt(Component, SquallBolt):
    """pystorm's Bolt: ``process(tup)``, ``process_tick(tup)``, ``emit``, ``ack``, ``fail``."""

    hooked: ClassVar[tuple[str, ...]] = ("emit", "ack", "fail")

    @classmethod
    def spec(cls, name: str | None = None, inputs: Any = None, par: Any = None, config: Any = None,
             **options: Any) -> ComponentSpec:
        """streamparse's ``Bolt.spec``; Squall's own options (``tasks=``...) pass through."""
        return super().spec(name=name, inputs=dsl.inputs_of(inputs), par=dsl.par_of(cls, par),
                            config=dsl.config_of(cls, config), **options)

    @staticmethod
    def is_tick(tup: Any) -> bool:
        return tup.stream == TICK_STREAM

    def process_tick(self, tup: Any) -> None:
        """A tick tuple (``topology.tick.tuple.freq.secs``); ignored unless overridden."""

    def emit(self, tup: Any, stream: str | None = None, anchors: Any = None, direct_task: int | None = None,
             need_task_ids: bool = False) -> list[int] | None:
        """Emit ``tup`` (a list or tuple); anchored to ``anchors`` (Tuples), or with
        ``auto_anchor`` to the tuple being processed.  The task ids it went to if
        ``need_task_ids``."""
        if anchors is not None:
            anchors = [_tuple(a, "emit(anchors=...)") for a in anchors]
        tasks = self._raw("emit")(tup, anchors, stream or DEFAULT_STREAM, direct_task)
        return list(tasks) if need_task_ids else None

    def ack(self, tup: Any) -> None:
        tup = _tuple(tup, "ack")
        if tup.stream != TICK_STREAM:  # pystorm acks ticks; nothing tracks them here
            self._raw("ack")(tup)

    def fail(self, tup: Any) -> None:
        tup = _tuple(tup, "fail")
        if tup.stream != TICK_STREAM:
            self._raw("fail")(tup)

    def _warn_without_ticks(self, what: str) -> None:
        if not self.storm_conf.get(TICK_KEY):
            self.logger.warning("%s gets no tick tuples: set %r in the topology's or the bolt's "
                                "config, or nothing will %s", type(self).__name__, TICK_KEY, what)


class TicksBolt(Bolt):
    """A bolt whose work is done on ticks (``process_tick``).  streamparse never shipped
    this name; projects that defined it get a Bolt that warns when no tick frequency
    is configured."""

    def _after_initialize(self) -> None:
        super()._after_initialize()
        self._warn_without_ticks("call process_tick")

    def process(self, tup: Any) -> None:
        """Tuples are acked as they come; override to use them."""


class BatchingBolt(Bolt):
    """pystorm's BatchingBolt: tuples gathered by ``group_key`` between ticks, handed to
    ``process_batch(key, tups)`` once more than ``ticks_between_batches`` ticks passed
    (pystorm's count: with 1, every second tick), then acked (``auto_ack``) or, if it
    raised, failed (``auto_fail``; with ``exit_on_exception``, the default, every
    batch held is failed, as pystorm's dying process would have them replayed).

    ``secs_between_batches`` (older streamparse, and TicklessBatchingBolt) instead sets
    this bolt's tick frequency to that many seconds and processes the batches on
    every tick: no timer thread.
    """

    ticks_between_batches = 1
    secs_between_batches: float | None = None

    @classmethod
    def spec(cls, name: str | None = None, inputs: Any = None, par: Any = None, config: Any = None,
             **options: Any) -> ComponentSpec:
        config = dsl.config_of(cls, config)
        if cls.secs_between_batches is not None:
            config.setdefault(TICK_KEY, cls.secs_between_batches)
        return super().spec(name=name, inputs=inputs, par=par, config=config, **options)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._batches: dict[Any, list[Tuple]] = defaultdict(list)
        self._tick_counter = 0
        self._current_key: Any = None
        self._current_tups: list[Tuple] = []

    def _after_initialize(self) -> None:
        super()._after_initialize()
        self._warn_without_ticks("process the batches")
        self._ticks_per_batch = 0 if self.secs_between_batches is not None else self.ticks_between_batches
        # The user's flags govern whole batches; the executor must not ack a tuple when
        # process() returns, as it has only been put in a batch by then.
        self._acks_batches = bool(self.auto_ack)
        self._fails_batches = bool(self.auto_fail)
        self.auto_ack = False

    def group_key(self, tup: Any) -> Any:
        """The key of ``tup``'s batch: None (the default) puts every tuple in one batch."""
        return None

    def process_batch(self, key: Any, tups: list[Any]) -> None:
        raise NotImplementedError

    def process(self, tup: Any) -> None:
        """Put ``tup`` in its batch (override group_key, not this)."""
        self._batches[self.group_key(tup)].append(tup)

    def process_tick(self, tup: Any) -> None:
        """Count the tick; process the batches once enough have passed (override group_key
        or process_batch, not this)."""
        self._tick_counter += 1
        if self._tick_counter > self._ticks_per_batch and self._batches:
            self.process_batches()
            self._tick_counter = 0

    def process_batches(self) -> None:
        """``process_batch`` on every batch held, then ack its tuples (``auto_ack``)."""
        for key in list(self._batches):
            batch = self._batches[key]
            self._current_key, self._current_tups = key, batch
            try:
                self.process_batch(key, batch)
            except Exception:
                self._fail_batches(key)
                raise  # the executor reports it as this component's error
            if self._acks_batches:
                for tup in batch:
                    self.ack(tup)
            del self._batches[key]
        self._current_key, self._current_tups = None, []

    def _fail_batches(self, key: Any) -> None:
        failing = list(self._batches) if self.exit_on_exception else [key]
        for k in failing:
            batch = self._batches.pop(k)
            if self._fails_batches:
                for tup in batch:
                    self.fail(tup)
        self._current_key, self._current_tups = None, []

    def emit(self, tup: Any, stream: str | None = None, anchors: Any = None, direct_task: int | None = None,
             need_task_ids: bool = False) -> None:
        """As Bolt.emit, anchored (``auto_anchor``) to every tuple of the batch being
        processed; never returns task ids (pystorm's BatchingBolt does not either)."""
        if anchors is None and self.auto_anchor and self._current_tups:
            anchors = self._current_tups
        super().emit(tup, stream=stream, anchors=anchors, direct_task=direct_task)


class TicklessBatchingBolt(BatchingBolt):
    """pystorm's TicklessBatchingBolt: batches every ``secs_between_batches`` seconds.
    pystorm times them with a thread; here this bolt's own ticks do (see BatchingBolt)."""

    secs_between_batches: float | None = 2


class ShellBolt(Component, SquallBolt):
    """A bolt run as a multilang child: ``ShellBolt.spec(command=..., script=...)``."""

    @classmethod
    def spec(cls, name: str | None = None, command: Any = None, script: Any = None, inputs: Any = None,
             par: Any = None, config: Any = None, outputs: Any = None, **options: Any) -> ComponentSpec:
        """streamparse's ShellBolt.spec, as Squall's ``squall.multilang.ShellBolt``: ``script``
        holds the command's arguments, separated by spaces."""
        from squall.multilang.bolt import ShellBolt as MultilangBolt
        from squall.multilang.settings import caller_dir

        options.setdefault("defined_in", caller_dir())
        return MultilangBolt.spec(name=name, inputs=dsl.inputs_of(inputs), par=dsl.par_of(cls, par),
                                  config=dsl.config_of(cls, config),
                                  **shell_options(cls.__name__, command, script, outputs), **options)


def shell_options(kind: str, command: Any, script: Any, outputs: Any) -> dict[str, Any]:
    """streamparse's ``command``/``script`` as Squall's multilang options."""
    import shlex

    from squall.errors import TopologyValidationError

    if not command:
        msg = f"{kind}.spec: command is required (e.g. command='node', script='splitsentence.js')"
        raise TopologyValidationError(msg)
    if script is None:
        msg = (f"{kind}.spec: script must not be None. If your command does not take arguments, "
               "specify the empty string for script.")
        raise TopologyValidationError(msg)
    words = shlex.split(script) if isinstance(script, str) else [str(script)]
    out: dict[str, Any] = {"command": command, "outputs": outputs or []}
    if words:
        out["script"] = words[0]
        out["args"] = words[1:]
    return out


class JavaBolt(Component, SquallBolt):
    """Refused: ``JavaBolt.spec(...)`` raises when the topology is defined (no JVM here)."""

    @classmethod
    def spec(cls, name: str | None = None, serialized_java: Any = None, full_class_name: Any = None,
             args_list: Any = None, inputs: Any = None, par: Any = 1, config: Any = None,
             outputs: Any = None, **options: Any) -> ComponentSpec:
        dsl.refuse_java("JavaBolt", full_class_name, serialized_java)
