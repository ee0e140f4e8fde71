"""ShellSpout: a spout whose ``next_tuple``/``ack``/``fail`` run in a child process.

    class Topo(Topology):
        sentences = ShellSpout.spec(command=sys.executable, script="sentences.py",
                                    outputs=["sentence"])

Storm's protocol is one command at a time: ``activate``/``next``/``ack``/
``fail``/``deactivate``, each answered by ``sync``, with emits, logs and
errors in between.  As in Storm, the executor thread writes the command
and reads the child's answer itself, up to the ``sync`` (a spout child has
nothing to say between commands): no thread hand-offs, so a round trip
costs two pipe writes.  Task-id replies go back at once.  A ``next``
answered with no emit is followed by a pause of
``topology.sleep.spout.wait.strategy.time.ms`` (Storm's wait strategy), so
an idle child is not asked in a busy loop.

A child that dies, garbles, or takes longer than
``topology.subprocess.timeout.secs`` to ``sync`` is restarted.  Tuples it
emitted stay in their trees; their acks and fails go to the new child
(whose source should know them, as a durable queue does), and so do acks
and fails the old child never answered.
"""

from __future__ import annotations

import time
from typing import Any

from squall.multilang.base import ShellComponent
from squall.multilang.errors import ChildDied, ChildWentAway, MultilangError, ProtocolError
from squall.multilang.process import ShellProcess
from squall.multilang.session import SpoutSession
from squall.multilang.settings import caller_dir
from squall.topology.component import ComponentSpec, Spout

POLL_SECS = 0.1  # how often a wait for the child looks at the clock and the executor


class ShellSpout(ShellComponent, Spout):
    """Options as :class:`~squall.multilang.ShellBolt` (no heartbeats: a spout is
    only timed while a command awaits its ``sync``, as in Storm)."""

    threaded = False

    @classmethod
    def spec(cls, name: str | None = None, par: int = 1, tasks: int | None = None, config: Any = None,
             **options: Any) -> ComponentSpec:
        options.setdefault("defined_in", caller_dir())
        return super().spec(name=name, par=par, tasks=tasks, config=config, **options)

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.session: SpoutSession | None = None
        self._idle_secs = float(conf.get("topology.sleep.spout.wait.strategy.time.ms") or 1) / 1000.0
        self._idle_until = 0.0
        self._shell_start()

    def close(self) -> None:
        self._shell_close()

    def _heartbeat_secs(self) -> float | None:
        return None

    # -- the spout executor's calls -------------------------------------------

    def next_tuple(self) -> None:
        session = self.session
        if self.proc is None or session is None:
            return
        idle = session.idle
        if idle:
            # The child had nothing last time: give it a moment (Storm's spout wait strategy).
            # Real time, not the worker's clock: this pause saves CPU, it times nothing out.
            now = time.monotonic()
            if not self._idle_until:
                self._idle_until = now + self._idle_secs
            if now < self._idle_until:
                return
            self._idle_until = 0.0
        if session.next():
            # An idle child is asked again only after a pause anyway: its answer is
            # not worth polling for (see process.SPIN_SECS).
            self._drive(poll=not idle)

    def ack(self, tup_id: Any) -> None:
        self._want("ack", tup_id)

    def fail(self, tup_id: Any) -> None:
        self._want("fail", tup_id)

    def activate(self) -> None:
        self._want("activate")

    def deactivate(self) -> None:
        self._want("deactivate")

    def _want(self, command: str, msg_id: Any = "") -> None:
        self.session.want(command, msg_id)  # type: ignore[union-attr]
        self._drive()

    # -- talking to the child ------------------------------------------------

    def _drive(self, poll: bool = True) -> None:
        """Serve the child until no command awaits its sync (Storm's querySubprocess);
        ``poll``: look for its answers briefly before blocking (``ShellProcess.receive``)."""
        session = self.session
        while session is not None and session.awaiting is not None:
            proc = self.proc
            if proc is None:
                return
            try:
                messages = proc.receive(POLL_SECS, poll)
            except ProtocolError as e:
                if e.decoded and not self._handle_batch(proc, e.decoded):
                    return
                self._child_died(proc, proc.died(e))
                return
            except (MultilangError, OSError, ValueError) as e:
                self._child_died(proc, proc.died(e))
                return
            except Exception as e:  # whatever else reading raises is the child's death, not the worker's
                self.logger.exception("multilang read failed", pid=proc.pid)
                cause = ProtocolError(f"reading the child's output failed: {type(e).__name__}: {e}")
                cause.__cause__ = e
                self._child_died(proc, proc.died(cause))
                return
            if messages:
                self._handle_batch(proc, messages)
            elif proc.silent_too_long():
                cause = ChildWentAway(f"subprocess heartbeat timeout ({proc.timeout}s without a sync for "
                                      f"{session.awaiting[0]!r})")
                self._child_died(proc, proc.died(cause))
            elif not self._executor_running():
                return  # stopping: leave the command; close() ends the child

    def _send(self, message: Any) -> None:
        proc = self.proc
        if proc is None:
            return
        try:
            proc.send_now(self.codec.encode(message))
        except OSError:
            pass  # the child is gone: the read that follows finds out and reports it

    # -- sessions ------------------------------------------------------------

    def _session_attached(self, proc: ShellProcess) -> None:
        if self.session is None:
            self.session = SpoutSession(emit=self.emit, send=self._send, reply=self._send, **self._common())
        self.session.attach()

    def _resume(self) -> None:
        self._drive()  # the activate (and any acks) the attach queued

    def _session_lost(self, proc: ShellProcess, died: ChildDied | None) -> int:
        if self.session is not None:
            self.session.detach()
        return 0
