"""The worker's event logger: the sampled tuples of its tasks, one line each, to ``events.log``.

Storm sends sampled tuples to event logger bolts (``topology.eventlogger.executors``)
that write them to their worker's events.log.  Squall keeps one event logger in each
worker instead, with no executor and no stream: a sampled tuple never crosses the wire,
and its line lands in the events.log of the worker whose task emitted it (the
component page's ``eventLogLink`` points at one of them).  ``topology.eventlogger.executors:
0`` turns it off for a topology; any other value means on.

Cost: an emitter holds ``debug``, None while its component is not sampled, and checks it
once per emit (squall.worker.executors.emit); :meth:`EventLog.configure` gives each
attached emitter a :class:`~squall.worker.event_lines.TaskSampler` or None when the
settings change (squall.runtime.debug_options, from assignment.json).

The file is opened by the supervisor and handed over as a descriptor (O_APPEND, like the
worker's stdout: a sandboxed worker sees nothing of its log directory, and the supervisor
rotates it as it rotates worker.log).  Lines are rendered in the executor's thread
(a tuple's values may change once emitted) into a bounded buffer and written by a thread
of their own every FLUSH_SECS: a slow disk holds up that thread only; while the buffer
is full, sampled tuples are dropped and counted, and the count is logged.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

import structlog

from squall.runtime.debug_options import DebugOptions
from squall.worker.event_lines import TaskSampler, event_line

log = structlog.get_logger("squall.worker.event_log")

FLUSH_SECS = 0.25
CAPACITY = 10_000  # lines waiting to be written; past it, sampled tuples are dropped


class EventLog:
    """The event logger of one worker.  ``conf_debug``: component -> ``topology.debug: true``
    in its conf (squall.runtime.debug_options.component_pct)."""

    def __init__(self, fd: int, conf_debug: Mapping[str, bool], *, wall: Callable[[], float] = time.time,
                 capacity: int = CAPACITY, flush_secs: float = FLUSH_SECS,
                 rand: Callable[[], Callable[[], float]] | None = None) -> None:
        self.fd = fd
        self.conf_debug = dict(conf_debug)
        self.wall = wall
        self.capacity = capacity
        self.flush_secs = flush_secs
        self.rand = rand  # makes each task's random source (None: its own random.Random)
        self.options = DebugOptions()
        self.written = 0
        self.dropped = 0
        self._reported = 0  # drops already logged
        self._failed = False  # a write failed: said once, lines dropped from then on
        self._buffer: deque[str] = deque()
        self._emitters: list[tuple[str, int, Any]] = []  # (component, task, emitter)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="event-log", daemon=True)

    # -- settings ------------------------------------------------------------

    def pct_of(self, component: str) -> float:
        return self.options.component_pct(component, self.conf_debug.get(component, False))

    def _sampler(self, component: str, task: int) -> TaskSampler | None:
        pct = self.pct_of(component)
        if pct <= 0:
            return None
        return TaskSampler(component, task, pct, self.offer, self.rand() if self.rand else None)

    def attach(self, component: str, task: int, emit: Any) -> None:
        """Sample what ``emit`` (an emitter's bound ``emit``) sends, as the settings say now
        and whenever they change."""
        emitter = getattr(emit, "__self__", None)
        if emitter is None or not hasattr(emitter, "debug"):
            return  # not one of the engine's emitters (a component replaced its emit)
        with self._lock:
            self._emitters.append((component, task, emitter))
            emitter.debug = self._sampler(component, task)

    def configure(self, options: DebugOptions) -> None:
        """New settings, applied to every attached emitter at once."""
        with self._lock:
            before = {c: self.pct_of(c) for c, _t, _e in self._emitters}
            self.options = options
            for component, task, emitter in self._emitters:
                emitter.debug = self._sampler(component, task)
            after = {c: self.pct_of(c) for c, _t, _e in self._emitters}
        if before != after:
            log.info("event logging set", sampled={c: p for c, p in sorted(after.items()) if p > 0})

    # -- lines ---------------------------------------------------------------

    def offer(self, component: str, task: int, stream: str, message_id: Any, values: Any) -> None:
        """One sampled tuple (called in the emitting executor's thread): its line buffered,
        or dropped and counted while the buffer is full."""
        if len(self._buffer) >= self.capacity or self._failed:
            self.dropped += 1
            return
        self._buffer.append(event_line(self.wall(), component, task, stream, message_id, values))

    def flush(self) -> None:
        """Write what is buffered (the writer thread's, and close's)."""
        lines = []
        buffer = self._buffer
        while buffer:
            lines.append(buffer.popleft())
        if lines and not self._failed:
            data = "".join(lines).encode("utf-8", "backslashreplace")
            try:
                while data:
                    data = data[os.write(self.fd, data):]
                self.written += len(lines)
            except OSError as e:
                self._failed = True
                self.dropped += len(lines)
                log.warning("cannot write the event log: sampled tuples are dropped from now on",
                            error=str(e))
        if self.dropped > self._reported:
            log.warning("sampled tuples dropped: the event log's buffer was full",
                        dropped=self.dropped - self._reported, total=self.dropped, capacity=self.capacity)
            self._reported = self.dropped

    # -- the writer thread ---------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.flush_secs):
            self.flush()

    def close(self, timeout: float = 2.0) -> None:
        """Stop the writer (after the executors: their last lines are written), then the file."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        self.flush()
        try:
            os.close(self.fd)
        except OSError:
            pass
