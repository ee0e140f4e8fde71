"""ShellSpout: a spout whose ``next_tuple``/``ack``/``fail`` run in a child process.

    class Topo(Topology):
        sentences = ShellSpout.spec(command=sys.executable, script="sentences.py",
                                    outputs=["sentence"])

Storm's protocol is one command at a time: ``activate``/``next``/``ack``/
``fail``/``deactivate``, each answered by ``sync``, with emits, logs and
errors in between.  Storm blocks the spout executor until the ``sync``;
here ``next_tuple`` only sends the command and returns, the child's emits
arrive through the event queue, and the next command goes out when the
``sync`` does.  Acks and fails wait in order for their turn.  Message ids
keep their JSON type both ways.

A child that dies or hangs during a command is restarted.  Tuples it
emitted stay in their trees; their acks and fails go to the new child
(whose source should know them, as a durable queue does), and so do acks
and fails the old child never answered.
"""

from __future__ import annotations

import time
from typing import Any

from squall.multilang.base import ShellComponent
from squall.multilang.errors import ChildDied
from squall.multilang.process import ShellProcess
from squall.multilang.session import SpoutSession
from squall.multilang.settings import caller_dir
from squall.topology.component import ComponentSpec, Spout


class ShellSpout(ShellComponent, Spout):
    """Options as :class:`~squall.multilang.ShellBolt` (no heartbeats: a spout is
    only timed while a command awaits its ``sync``, as in Storm)."""

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
        if session.idle:
            # The child had nothing last time: give it a moment (Storm's spout wait strategy).
            now = time.monotonic()
            if not self._idle_until:
                self._idle_until = now + self._idle_secs
            if now < self._idle_until:
                return
            self._idle_until = 0.0
        session.next()

    def ack(self, tup_id: Any) -> None:
        self.session.want("ack", tup_id)  # type: ignore[union-attr]

    def fail(self, tup_id: Any) -> None:
        self.session.want("fail", tup_id)  # type: ignore[union-attr]

    def activate(self) -> None:
        self.session.want("activate")  # type: ignore[union-attr]

    def deactivate(self) -> None:
        self.session.want("deactivate")  # type: ignore[union-attr]

    # -- sessions ------------------------------------------------------------

    def _session_attached(self, proc: ShellProcess) -> None:
        if self.session is None:
            self.session = SpoutSession(emit=self.emit, send=self._send_command,
                                        reply=self._reply, **self._common())
        self.session.attach()

    def _send_command(self, message: dict[str, Any]) -> None:
        proc = self.proc
        if proc is not None:
            proc.put_command(self.codec.encode(message))

    def _reply(self, task_ids: list[int]) -> None:
        proc = self.proc
        if proc is not None:
            proc.put_urgent(self.codec.encode(task_ids))

    def _session_lost(self, proc: ShellProcess, died: ChildDied | None) -> int:
        if self.session is not None:
            self.session.detach()
        return 0
