"""What ShellBolt and ShellSpout share: their child's life, restarts and events.

Threads: the executor thread owns the component (emit, ack, fail, the
session).  Each child has a reader and a writer thread
(:mod:`squall.multilang.process`), and a restart runs in a short-lived
helper thread.  Those threads never touch the component: they *post*
events (messages read, child died, new child ready) to a queue that the
executor thread runs through ``call_soon`` -- or directly, while a bolt's
``process`` waits for room (so a child waiting for task ids is answered
even while its parent waits for it).

A child that dies, hangs past ``topology.subprocess.timeout.secs`` or
breaks the protocol is killed; what it had in flight fails (the spouts
replay it), the error is reported with the child's stderr tail, and a new
child is started: at once the first time, then with exponential back-off
while it keeps dying.  Storm kills the whole worker instead.
"""

from __future__ import annotations

import functools
import os
import shutil
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from squall.multilang import settings as settings_mod
from squall.multilang.context import storm_context, wire_conf
from squall.multilang.errors import ChildDied, ProtocolError
from squall.multilang.process import ShellProcess, Wakeup
from squall.multilang.tap import Tap

SHELL_OPTIONS = ("command", "script", "args", "cwd", "env")


class ShellComponent:
    """Mixin over Spout/Bolt.  Subclasses implement the ``_session_*`` hooks."""

    command: Any = None
    script: str | None = None
    args: Any = None
    cwd: str | None = None
    env: dict[str, str] | None = None

    # Set by ComponentExecutor / the Component base.
    conf: dict[str, Any]
    context: Any
    options: dict[str, Any]
    logger: Any
    call_soon: Callable[[Callable[[], None]], None]
    stopping: Callable[[], bool]
    clock: Any
    report_error: Callable[[BaseException], None]

    @classmethod
    def launch_options(cls, options: dict[str, Any]) -> dict[str, Any]:
        """The class's own ``command``, ``script``... under the options given to ``spec``."""
        merged = {k: getattr(cls, k) for k in SHELL_OPTIONS if getattr(cls, k) is not None}
        merged.update(options)
        return merged

    # -- start and stop ------------------------------------------------------

    def _shell_start(self) -> None:
        """In ``initialize``: launch the first child (an error here fails the worker, as in Storm)."""
        self._owner_thread = threading.current_thread()
        self._events: deque[Callable[[], None]] = deque()
        self._scheduled = False
        self._wake = Wakeup()
        self._closed = threading.Event()
        options = self.launch_options(self.options)
        component = self.context.component_id
        self.settings = settings_mod.resolve(options, self.conf, component)
        self.codec = self.settings.codec
        plan = getattr(self.context, "plan", None)
        self._context_msg = storm_context(plan, component, self.context.task_id) if plan is not None \
            else self.context.to_dict()
        self._conf_msg = wire_conf(self.conf, self.context.topology_name)
        self.pid_dir, self._own_pid_dir = settings_mod.pid_dir(self.conf, self.context.topology_name,
                                                              str(self.context.worker))
        # What the child reported with its "metrics" command (Storm's
        # CountShellMetric values); also fed into the task's metrics registry.
        self.child_metrics: dict[str, Any] = {}
        self.proc: ShellProcess | None = None
        self._faulted: ShellProcess | None = None  # the child a protocol fault condemned
        self.restarts = 0
        self._failures = 0
        self._spawned = 0
        if self.settings.tap_dir:
            os.makedirs(self.settings.tap_dir, exist_ok=True)
        try:
            proc, initial = self._spawn()
        except ChildDied:
            if self._own_pid_dir:
                shutil.rmtree(self.pid_dir, ignore_errors=True)
            raise
        proc.run()
        self._attach(proc, initial)

    def _shell_close(self) -> None:
        """Orderly stop (cleanup/close): the child gets EOF, then SIGTERM, then SIGKILL."""
        self._closed.set()
        proc, self.proc = self.proc, None
        if proc is not None:
            self._session_lost(proc, None)
            proc.close()
            self._remove_pid_file(proc)
        if self._own_pid_dir:
            shutil.rmtree(self.pid_dir, ignore_errors=True)

    def _owner_alive(self) -> bool:
        return self._owner_thread.is_alive()

    def _orphaned(self) -> None:
        """The executor ended without closing us (its worker died): clean up what close() would."""
        self._closed.set()
        if self._own_pid_dir:
            shutil.rmtree(self.pid_dir, ignore_errors=True)
        else:
            proc = self.proc
            if proc is not None:
                self._remove_pid_file(proc)

    def _executor_running(self) -> bool:
        return not self.stopping() and not self._closed.is_set()

    # -- children ------------------------------------------------------------

    def _spawn(self) -> tuple[ShellProcess, list[Any]]:
        s = self.settings
        self._spawned += 1
        tap = None
        if s.tap_dir:
            name = f"{self.context.component_id}-{self.context.task_id}-{self._spawned}.tap"
            tap = Tap(os.path.join(s.tap_dir, name))
        proc = ShellProcess(
            s.argv, codec=s.codec, cwd=s.cwd, env=s.env, timeout=s.timeout,
            heartbeat_secs=self._heartbeat_secs(), on_messages=self._on_messages, on_exit=self._on_exit,
            owner_alive=self._owner_alive, on_orphaned=self._orphaned, wake=self._wake,
            threaded=self.threaded, logger=self.logger, now=self.clock.now, tap=tap,
            max_message_bytes=s.max_message_bytes, component=self.context.component_id,
        )
        initial = proc.start(self._conf_msg, self._context_msg, self.pid_dir)
        self.logger.info("multilang child started", pid=proc.pid, command=" ".join(s.argv), cwd=s.cwd,
                         serializer=s.codec.name)
        return proc, initial

    def _attach(self, proc: ShellProcess, initial: list[Any]) -> None:
        """Executor thread: ``proc`` becomes the child; handle what it already said."""
        self.proc = proc
        self._session_attached(proc)
        if initial:
            self._handle_batch(proc, initial)
        self._resume()

    def _heartbeat_secs(self) -> float | None:
        return self.settings.heartbeat_secs

    # -- events from other threads -------------------------------------------

    def _post(self, fn: Callable[[], None]) -> None:
        self._events.append(fn)
        self._wake.set()
        if not self._scheduled:
            self._scheduled = True
            self.call_soon(self._run_events)

    def _run_events(self) -> None:
        self._scheduled = False
        events = self._events
        while events:
            events.popleft()()

    def _on_messages(self, proc: ShellProcess, messages: list[Any]) -> None:
        self._post(functools.partial(self._handle_batch, proc, messages))

    def _on_exit(self, proc: ShellProcess, died: ChildDied) -> None:
        self._post(functools.partial(self._child_died, proc, died))

    def _handle_batch(self, proc: ShellProcess, messages: list[Any]) -> bool:
        """Hand the child's messages to the session; False after a protocol fault (the child is killed)."""
        if proc is not self.proc or proc is self._faulted:
            return False  # a child already replaced, or being killed for a fault: nothing it says counts
        try:
            self.session.handle_many(messages)  # type: ignore[attr-defined]
        except Exception as e:
            # Storm kills the worker here; the messages before the fault were handled.  Anything
            # else a child's message sets off is its fault too: the worker lives on.
            if not isinstance(e, ProtocolError):
                self.logger.exception("multilang child message not handled", pid=proc.pid)
                fault = ProtocolError(f"a message from the child could not be handled: "
                                      f"{type(e).__name__}: {e}")
                fault.__cause__ = e
                e = fault
            self.logger.error("multilang protocol error: killing the child", pid=proc.pid, error=str(e))
            self._faulted = proc
            if self.threaded:
                proc.abort(e)
            else:
                self._child_died(proc, proc.died(e))
            return False
        return True

    # -- death and restart ---------------------------------------------------

    def _child_died(self, proc: ShellProcess, died: ChildDied) -> None:
        if proc is not self.proc:
            return
        self.proc = None
        self._remove_pid_file(proc)
        lost = self._session_lost(proc, died)
        self.logger.error("multilang child died", pid=proc.pid, failed_in_flight=lost, error=str(died))
        self.report_error(died)
        if proc.now() - proc.started_at > self.settings.restart_max:
            self._failures = 0  # it had been healthy for a while
        self._restart_later()

    def _restart_later(self) -> None:
        if self._closed.is_set():
            return
        s = self.settings
        delay = (0.0 if self._failures == 0
                 else min(s.restart_initial * 2 ** (self._failures - 1), s.restart_max))
        self._failures += 1
        name = f"shell-restart-{self.context.component_id}-{self.context.task_id}"
        threading.Thread(target=self._relaunch, args=(delay,), name=name, daemon=True).start()

    def _relaunch(self, delay: float) -> None:
        """Helper thread: wait out the back-off, start a child, post it to the executor."""
        if not self.clock.sleep_until(self.clock.now() + delay, self._closed):
            return  # closed meanwhile
        if not self._owner_alive():
            self._orphaned()
            return
        try:
            proc, initial = self._spawn()
        except ChildDied as e:
            if not self._closed.is_set():
                self._post(functools.partial(self._launch_failed, e))
            return
        if self._closed.is_set() or not self._owner_alive():
            proc.close()
            self._orphaned()
            return
        if not self.threaded:
            proc.run()
        self._post(functools.partial(self._adopt, proc, initial))
        if self.threaded:
            proc.run()  # after the post: its messages queue up behind the adoption

    def _launch_failed(self, error: ChildDied) -> None:
        self.logger.error("multilang child failed to start", error=str(error))
        self.report_error(error)
        self._restart_later()

    def _adopt(self, proc: ShellProcess, initial: list[Any]) -> None:
        if self._closed.is_set():
            proc.close()
            return
        self.logger.warning("multilang child restarted", pid=proc.pid, restarts=self.restarts + 1)
        self._attach(proc, initial)
        self.restarts += 1  # after: whoever sees the count sees the new child in place

    def _remove_pid_file(self, proc: ShellProcess) -> None:
        if proc.pid is not None:
            try:
                os.remove(os.path.join(self.pid_dir, str(proc.pid)))
            except OSError:
                pass

    # -- child messages ------------------------------------------------------

    def _child_log(self, level: str, text: str) -> None:
        pid = self.proc.pid if self.proc is not None else None
        if level == "trace":
            self.logger.debug(text, pid=pid, shell_level="trace")
        else:
            getattr(self.logger, level)(text, pid=pid)

    def _common(self) -> dict[str, Any]:
        return {"log": self._child_log, "report": self.report_error, "metrics": self.child_metrics,
                "registered": self.settings.metrics, "registry": getattr(self, "metrics", None)}

    # -- hooks ---------------------------------------------------------------

    # Threaded: the child's own reader and writer threads (bolts).  Unthreaded: the
    # executor thread writes a command and reads until the answer (spouts, as Storm).
    threaded = True

    def _resume(self) -> None:
        """After a child is attached (executor thread)."""

    def _session_attached(self, proc: ShellProcess) -> None:
        raise NotImplementedError

    def _session_lost(self, proc: ShellProcess, died: ChildDied | None) -> int:
        """The child is gone (``died`` is None on an orderly close); returns how many tuples failed."""
        raise NotImplementedError
