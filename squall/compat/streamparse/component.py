"""What every streamparse component has from pystorm's Component, in-process.

A pystorm component learns who it is from Storm's handshake and logs through
a ``logging.Logger``; here the executor builds the component and calls its
``initialize``, so the instance's ``initialize`` is a wrapper (an instance
attribute, set in ``__init__``) that first fills in pystorm's attributes from
the task's :class:`~squall.worker.executors.context.TopologyContext`, then calls the
class's ``initialize(storm_conf, context)`` with pystorm's arguments.

The executor also installs its own ``emit`` (and a bolt's ``ack``/``fail``)
on the instance; :class:`Hooked` keeps those under another name so that the
instance keeps pystorm's signatures.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import Any, ClassVar

import structlog

from squall.runtime.logging import USER_CODE

# pystorm names a component's logger "pystorm.component.<component>": code that sets
# its level by name keeps working, and Squall's set_log_level takes the same name.
LOGGER_PARENT = "pystorm.component"
TICK_KEY = "topology.tick.tuple.freq.secs"
_PYTHON_LEVELS = {"critical": logging.CRITICAL, "error": logging.ERROR, "warning": logging.WARNING,
                  "warn": logging.WARNING, "info": logging.INFO, "debug": logging.DEBUG,
                  "trace": logging.DEBUG}
_handler_lock = threading.Lock()  # executors initialize in their own threads


class WorkerLogHandler(logging.Handler):
    """Hands a component logger's records to the process's structlog log (the worker's
    log file, or the console of ``squall local``), marked as the user's so that they
    show from info up whatever the engine's level.  The executor thread's context
    (component, task, topology) is merged in by structlog.  Exported as streamparse's
    ``StormHandler``, whose ``serializer`` argument has no use in-process."""

    def __init__(self, serializer: Any = None) -> None:
        super().__init__()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            log = structlog.get_logger(record.name).bind(**{USER_CODE: True})
            if record.levelno >= logging.CRITICAL:
                method = log.critical
            elif record.levelno >= logging.ERROR:
                method = log.error
            elif record.levelno >= logging.WARNING:
                method = log.warning
            elif record.levelno >= logging.INFO:
                method = log.info
            else:
                method = log.debug
            if record.exc_info:
                method(record.getMessage(), exc_info=record.exc_info)
            else:
                method(record.getMessage())
        except Exception:  # noqa: BLE001 - logging's own convention: report, never raise
            self.handleError(record)


def component_logger(component: str, level: int) -> logging.Logger:
    """The stdlib logger of ``component``, its lines sent to the worker's log once."""
    parent = logging.getLogger(LOGGER_PARENT)
    with _handler_lock:
        if not any(isinstance(h, WorkerLogHandler) for h in parent.handlers):
            parent.addHandler(WorkerLogHandler())
            # Only the worker's log: a handler the user's process has on the root
            # (pytest's, a basicConfig) would print every line a second time.
            parent.propagate = False
    logger = logging.getLogger(f"{LOGGER_PARENT}.{component}")
    logger.setLevel(level)
    return logger


class Hooked:
    """A method the executor replaces on the instance (``bolt.emit = its_emit``).

    A data descriptor, so the assignment lands here: the executor's function is
    kept as ``_squall_<name>`` and reading the attribute still gives pystorm's
    method (which calls it).  A subclass overriding such a method is wrapped the
    same way (:meth:`Component.__init_subclass__`).
    """

    def __init__(self, method: Callable[..., Any]) -> None:
        self.method = method
        self.__doc__ = method.__doc__
        self.raw = f"_squall_{method.__name__}"

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self.method
        return self.method.__get__(obj, owner)

    def __set__(self, obj: Any, fn: Any) -> None:
        obj.__dict__[self.raw] = fn


class Component:
    """Mixin before Squall's Spout or Bolt: pystorm's Component attributes and helpers.

    ``outputs``, ``par`` and ``config`` are streamparse's class-level defaults of ``spec``.
    """

    outputs: Any = None
    par: Any = 1
    config: ClassVar[Any] = None
    # pystorm exits the subprocess after an exception; here the worker lives on and this
    # flag decides only which batches a BatchingBolt fails with the one that raised.
    exit_on_exception = True
    # Methods the executor sets on the instance (a spout's are only emit).
    hooked: ClassVar[tuple[str, ...]] = ("emit",)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in cls.hooked:
            own = vars(cls).get(name)
            if callable(own) and not isinstance(own, Hooked):
                setattr(cls, name, Hooked(own))

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # pystorm's constructor takes the protocol's streams and serializer: none in-process.
        super().__init__()
        self.topology_name: str | None = None
        self.task_id: int | None = None
        self.component_name: str | None = None
        self.debug = False
        self.storm_conf: dict[str, Any] = {}
        self.pid = os.getpid()
        self.topology_context: Any = None  # Squall's TopologyContext (self.context is pystorm's dict)
        self._metric_warned = False
        # An instance attribute wins over the class's method: the executor calls this.
        self.initialize = self._start_then_initialize  # type: ignore[method-assign]

    def _raw(self, name: str) -> Any:
        fn = self.__dict__.get(f"_squall_{name}")
        if fn is None:
            msg = f"{type(self).__name__}.{name} called outside a running topology"
            raise RuntimeError(msg)
        return fn

    def _start_then_initialize(self, conf: dict[str, Any], context: Any) -> None:
        from squall.multilang.context import storm_context

        component, task = context.component_id, context.task_id
        self.topology_context = context
        self.component_name = component
        self.task_id = task
        self.topology_name = context.topology_name
        self.storm_conf = dict(conf)
        self.storm_conf.setdefault("topology.name", context.topology_name)
        self.debug = bool(conf.get("topology.debug", False))
        # What a pystorm child reads in Storm's handshake: the same dict Squall's multilang sends.
        self.context = storm_context(context.plan, component, task)
        level = _PYTHON_LEVELS.get(str(conf.get("pystorm.log.level", "info")).lower(), logging.INFO)
        self.logger = component_logger(component, logging.DEBUG if self.debug else level)
        type(self).initialize(self, self.storm_conf, self.context)
        self._after_initialize()

    def _after_initialize(self) -> None:
        """Called once the user's initialize returned, before the executor reads the flags."""

    def initialize(self, storm_conf: dict[str, Any], context: dict[str, Any]) -> None:
        """Called once before any tuple, with the topology's conf and Storm's context dict."""

    def log(self, message: Any, level: str | None = None) -> None:
        """pystorm's ``log``: ``level`` one of trace, debug, info, warn(ing), error, critical."""
        self.logger.log(_PYTHON_LEVELS.get(level or "info", logging.INFO), str(message))

    def raise_exception(self, exception: BaseException, tup: Any = None) -> None:
        """Report ``exception`` as this component's error (the UI's last error, the log)."""
        if tup is not None:
            self.logger.error("Python %s raised while processing Tuple %r",
                              type(exception).__name__, tup, exc_info=exception)
        self.report_error(exception)

    def report_metric(self, name: str, value: Any = None) -> None:
        """Storm's CountShellMetric, as Squall's multilang takes a child's ``metrics``: a number
        >= 0 (None: 1) adds to the task's counter ``name``; anything else sets gauge ``name``."""
        value = 1 if value is None else value
        if type(value) in (int, float) and value >= 0:
            self.metrics.counter(name).inc(value)
        else:
            self.metrics.gauge(name).set(value)

    @staticmethod
    def is_heartbeat(tup: Any) -> bool:
        """Never: heartbeats are a multilang matter, and nothing here is a subprocess."""
        return False
