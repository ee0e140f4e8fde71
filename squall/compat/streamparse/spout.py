"""streamparse's spouts, run in the worker's executor thread instead of a pystorm subprocess."""

from __future__ import annotations

from collections import Counter
from typing import Any

from squall.compat.streamparse import dsl
from squall.compat.streamparse.component import Component
from squall.topology.component import DEFAULT_STREAM, ComponentSpec
from squall.topology.component import Spout as SquallSpout


class Spout(Component, SquallSpout):
    """pystorm's Spout: ``next_tuple``, ``ack(tup_id)``, ``fail(tup_id)``, ``activate``,
    ``deactivate`` and ``emit(tup, tup_id=None, stream=None, direct_task=None,
    need_task_ids=False)``; an emit with a ``tup_id`` is tracked, without one it is not."""

    @classmethod
    def spec(cls, name: str | None = None, par: Any = None, config: Any = None,
             **options: Any) -> ComponentSpec:
        """streamparse's ``Spout.spec``; Squall's own options (``tasks=``...) pass through."""
        return super().spec(name=name, par=dsl.par_of(cls, par), config=dsl.config_of(cls, config),
                            **options)

    def emit(self, tup: Any, tup_id: Any = None, stream: str | None = None, direct_task: int | None = None,
             need_task_ids: bool = False) -> list[int] | None:
        tasks = self._raw("emit")(tup, tup_id, stream or DEFAULT_STREAM, direct_task)
        return list(tasks) if need_task_ids else None


class ReliableSpout(Spout):
    """pystorm's ReliableSpout: a failed tuple is emitted again, up to ``max_fails`` times,
    then taken as acked.  Every emit needs a ``tup_id``."""

    max_fails = 3

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.failed_tuples: Counter[Any] = Counter()
        self.unacked_tuples: dict[Any, tuple[Any, Any, Any, bool]] = {}

    def ack(self, tup_id: Any) -> None:
        self.failed_tuples.pop(tup_id, None)
        if self.unacked_tuples.pop(tup_id, None) is None:
            self.logger.error("Received ack for unknown tuple ID: %r", tup_id)

    def fail(self, tup_id: Any) -> None:
        saved = self.unacked_tuples.get(tup_id)
        if saved is None:
            self.logger.error("Received fail for unknown tuple ID: %r", tup_id)
            return
        tup, stream, direct_task, need_task_ids = saved
        if self.failed_tuples[tup_id] < self.max_fails:
            self.emit(tup, tup_id=tup_id, stream=stream, direct_task=direct_task, need_task_ids=need_task_ids)
            self.failed_tuples[tup_id] += 1
        else:
            self.logger.info("Acking tuple ID %r after it exceeded retry limit (%r)", tup_id, self.max_fails)
            self.ack(tup_id)

    def emit(self, tup: Any, tup_id: Any = None, stream: str | None = None, direct_task: int | None = None,
             need_task_ids: bool = False) -> list[int] | None:
        if tup_id is None:
            msg = "You must provide a tup_id to ReliableSpout.emit"
            raise ValueError(msg)
        self.unacked_tuples[tup_id] = (tup, stream, direct_task, need_task_ids)
        return super().emit(tup, tup_id=tup_id, stream=stream, direct_task=direct_task,
                            need_task_ids=need_task_ids)


class ShellSpout(Component, SquallSpout):
    """A spout run as a multilang child: ``ShellSpout.spec(command=..., script=...)``."""

    @classmethod
    def spec(cls, name: str | None = None, command: Any = None, script: Any = None, par: Any = None,
             config: Any = None, outputs: Any = None, **options: Any) -> ComponentSpec:
        """streamparse's ShellSpout.spec, as Squall's ``squall.multilang.ShellSpout``: ``script``
        holds the command's arguments, separated by spaces."""
        from squall.compat.streamparse.bolt import shell_options
        from squall.multilang.settings import caller_dir
        from squall.multilang.spout import ShellSpout as MultilangSpout

        options.setdefault("defined_in", caller_dir())
        return MultilangSpout.spec(name=name, par=dsl.par_of(cls, par), config=dsl.config_of(cls, config),
                                   **shell_options(cls.__name__, command, script, outputs), **options)


class JavaSpout(Component, SquallSpout):
    """Refused: ``JavaSpout.spec(...)`` raises when the topology is defined (no JVM here)."""

    @classmethod
    def spec(cls, name: str | None = None, serialized_java: Any = None, full_class_name: Any = None,
             args_list: Any = None, par: Any = 1, config: Any = None, outputs: Any = None,
             **options: Any) -> ComponentSpec:
        dsl.refuse_java("JavaSpout", full_class_name, serialized_java)
