"""ShellBolt: a bolt whose ``process`` runs in a child process, in any language.

    class WordCount(Topology):
        sentences = Sentences.spec()
        split = ShellBolt.spec(command="node", script="splitsentence.js", outputs=["word"],
                               inputs=[sentences], par=2)

Every input tuple goes to the child with a fresh wire id; the child's
``ack``/``fail`` settle it and its emits are anchored to the inputs it
names, so the tuple tree is tracked as for an in-process bolt.  Ticks go
to the child as ``__system``/``__tick`` tuples.  Encoded tuples are handed to
the writer thread once per executor batch (``batch_done``), so a busy bolt
wakes it once per batch, not per tuple.  ``process`` blocks while
``topology.shellbolt.max.pending`` tuples wait to be written, which backs
the executor's queue up to the spouts; the child's own messages are still
served meanwhile.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from squall.multilang.base import ShellComponent
from squall.multilang.errors import ChildDied, MultilangError
from squall.multilang.process import ShellProcess
from squall.multilang.session import BoltSession
from squall.multilang.settings import caller_dir
from squall.topology.component import Bolt, ComponentSpec
from squall.topology.tuple import Tuple

WAIT_SLICE_SECS = 0.05
_PARK = object()


class ShellBolt(ShellComponent, Bolt):
    """Options: ``command`` (str or list), ``script``, ``args``, ``cwd``, ``env``,
    ``heartbeat_secs`` (1 s as in Storm), ``metrics`` (names the child may report;
    any name if not given).  See :mod:`squall.multilang.settings`."""

    auto_ack = False
    auto_anchor = False
    auto_fail = False

    @classmethod
    def spec(cls, name: str | None = None, inputs: Any = None, par: int = 1, tasks: int | None = None,
             config: Any = None, **options: Any) -> ComponentSpec:
        options.setdefault("defined_in", caller_dir())
        return super().spec(name=name, inputs=inputs, par=par, tasks=tasks, config=config, **options)

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.session: BoltSession | None = None
        self._waiting: deque[Any] = deque()
        self._encode: Any = None  # the codec's encoder for this (executor) thread only
        self._out: list[bytes] = []  # encoded for the current child, handed over at batch_done
        self._shell_start()
        self._max_pending = self.settings.max_pending

    def cleanup(self) -> None:
        self._shell_close()

    # -- tuples in -----------------------------------------------------------

    def process(self, tup: Any) -> None:
        proc = self.proc
        if proc is None or proc.queued + len(self._out) >= self._max_pending:
            self.batch_done()
            room = self._room()
            if room is _PARK:
                self._waiting.append(tup)  # no child right now: the next one gets it
                return
            if room is None:
                self.fail(tup)  # the executor is stopping
                return
        self._send(tup)

    def process_tick(self, tup: Any) -> None:
        # Storm's tick carries [freq secs]; built from the conf so the wire form
        # does not depend on how the core packs its tick record.
        freq = self.conf.get("topology.tick.tuple.freq.secs")
        self.process(Tuple(None, tup.component, tup.stream, tup.task, [freq], tup.anchors))

    def batch_done(self) -> None:
        out = self._out
        if out:
            self._out = []
            proc = self.proc
            if proc is not None:  # (else the session that sent them was lost: they failed)
                proc.put_many(out)

    def _room(self) -> Any:
        """Wait until the child's queue has room, serving the child meanwhile.

        Returns the child to write to, ``_PARK`` while there is no child (a
        restart is under way) and room to hold the tuple, or None when the
        executor is stopping.
        """
        wake = self._wake
        wake.waiting = True
        try:
            while True:
                wake.event.clear()
                self._run_events()
                proc = self.proc
                if proc is not None and proc.queued < self._max_pending:
                    return proc
                if not self._executor_running():
                    return None
                if proc is None and len(self._waiting) < self._max_pending:
                    return _PARK
                wake.event.wait(WAIT_SLICE_SECS)
        finally:
            wake.waiting = False

    def _send(self, tup: Any) -> None:
        session = self.session
        assert session is not None
        message = session.tuple_message(tup)
        try:
            data = self._encode(message)
        except (TypeError, ValueError, OverflowError) as e:
            session.forget(message["id"])
            self.fail(tup)
            self.report_error(MultilangError(
                f"cannot send tuple {tuple(tup.values)!r} from {tup.component!r} to the "
                f"{self.codec.name} child: {e}"))
            return
        self._out.append(data)

    # -- sessions ------------------------------------------------------------

    def _session_attached(self, proc: ShellProcess) -> None:
        if self._encode is None:
            self._encode = self.codec.encoder()
        encode = self._encode
        self.session = BoltSession(emit=self.emit, ack=self.ack, fail=self.fail,
                                   reply=lambda ids: proc.put_urgent(encode(ids)), **self._common())
        waiting, self._waiting = self._waiting, deque()
        for tup in waiting:
            self._send(tup)
        self.batch_done()

    def _session_lost(self, proc: ShellProcess, died: ChildDied | None) -> int:
        session = self.session
        self.session = None
        self._out = []  # encoded for the lost child; their tuples fail below
        if session is None or died is None:
            return 0
        lost = session.lost()
        for tup in lost:
            self.fail(tup)
        return len(lost)
