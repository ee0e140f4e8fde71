"""Tuples to and from other workers: a send thread and a receive thread.

Executors hand remote batches to :meth:`Transfer.put` (their rows already
packed as they were emitted: see ``codec.RemoteBatch``); the send
thread drains them, packs one msgpack frame per peer worker and sends it.  The
receive thread unpacks frames arriving at this worker's address and puts
each message into the target executor's queue.  A frame that cannot be
packed is fatal for the worker (Storm kills a worker on a serialization
error); a peer that is gone only loses tuples, which time out and replay.

Each thread owns its sockets: the send thread opens and closes the senders,
the receive thread closes the receiver (bound earlier, before any worker of
the topology sends), because ZeroMQ sockets must not be shared by threads.

Worker-level messages travel to task :data:`WORKER_TASK` and are handled
here, never by an executor.  The one kind so far is ``"bp"``: when this
worker's backpressure turns on or off, every peer worker is told
(``[address, congested]``), and told again every ``bp_resend`` seconds while
it lasts, so that a restarted peer learns it.  A worker that hears a peer is
congested sets ``backpressure.remote`` and its spouts pause; a congestion
not refreshed within three resend periods is forgotten, so a peer that died
congested cannot pause the topology for ever.

The outbox is bounded the same way the executor queues are: when more than
``capacity`` messages wait for the send thread, this worker turns congested
(its spouts pause, and so do its peers'), until half of them are sent.  The
send thread also takes at most :data:`TURN_MESSAGES` messages a turn, so a
frame stays small and a turn short however fast the executors produce:
without both, a spout that outruns the send thread grows one frame without
end, which reaches the peer late, all at once, or (past
``zmq.max.message.bytes``) never.

Nothing from the wire is trusted: every frame is decoded and checked by the
:class:`~squall.worker.wire.frames.WireValidator` the worker hands over (the one
decoder of frames, in local mode too), and a message of a kind, task or shape
this worker's executors would never have been sent is dropped and counted per
reason in ``stats()["rejected"]``, logged at most once per
:data:`REJECT_LOG_SECS`.  A ``bp`` must name a known peer.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import structlog

from squall.worker.backpressure import Backpressure
from squall.worker.wire import codec
from squall.worker.wire.frames import REASONS, FrameRejected, WireValidator
from squall.worker.wire.transport import Receiver, Sender, Transport

log = structlog.get_logger("squall.worker.wire.transfer")

WORKER_TASK = -1  # the target of worker-level messages
BP_EXPIRY_PERIODS = 3
IDLE_WAIT_SECS = 0.1
TURN_MESSAGES = 512  # the most messages the send thread packs in one turn
REJECT_LOG_SECS = 10.0  # at most one warning about rejected frames per this many seconds


class Transfer:
    def __init__(self, transport: Transport, address: str, task_address: dict[int, str],
                 deliver: Callable[[str, int, Any], None], validator: WireValidator,
                 die: Callable[[BaseException], None],
                 *, backpressure: Backpressure | None = None, bp_resend: float = 1.0, capacity: int = 1024,
                 now: Callable[[], float] = time.monotonic) -> None:
        self.address = address
        self._transport = transport
        self._task_address = dict(task_address)
        self._routes_changed = False
        self._deliver = deliver
        self._die = die
        self._now = now
        self._outbox: deque[tuple[str, int, Any]] = deque()
        self._capacity = capacity
        # Raised on the backpressure for a full outbox: by whichever thread fills it,
        # lowered by the send thread; both under the lock, so they pair up.
        self._outbox_congested = False
        self._outbox_lock = threading.Lock()
        self._wakeup = threading.Event()
        self._running = False
        self._senders: dict[str, Sender] = {}  # send thread only
        self._receiver: Receiver | None = None
        self._threads: list[threading.Thread] = []
        self.frames_sent = 0
        self.frames_received = 0
        self.bytes_sent = 0
        self.bytes_received = 0
        self.unroutable = 0
        #: Decodes and checks every received frame: the one way in from the wire.
        self.validator = validator
        self._rejected: dict[str, int] = dict.fromkeys(REASONS, 0)  # what the shell itself refused
        self._reject_logged_at = float("-inf")
        # Cross-worker backpressure.
        self._backpressure = backpressure
        self._bp_resend = bp_resend
        self._congested = False  # ours, as Backpressure last reported it
        self._bp_told = False  # what the peers were last told
        self._bp_told_at = 0.0
        self._peers_congested: dict[str, float] = {}  # receive thread only: peer -> forget at

    def bind(self) -> None:
        """Take this worker's address; idempotent.  Done before any worker of the
        topology starts sending, so that no first tuple is sent into the void."""
        if self._receiver is None:
            self._receiver = self._transport.bind(self.address)

    def start(self) -> None:
        self._running = True
        self.bind()
        for target, name in ((self._send_loop, "send"), (self._recv_loop, "recv")):
            thread = threading.Thread(target=target, name=f"worker-{name}-{self.address}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def put(self, kind: str, task: int, payload: Any) -> None:
        outbox = self._outbox
        outbox.append((kind, task, payload))
        if len(outbox) > self._capacity and not self._outbox_congested:
            self._outbox_full()
        self._wakeup.set()

    def empty(self) -> bool:
        return not self._outbox

    def set_routes(self, task_address: dict[int, str]) -> None:
        """Replace the remote task -> address table (a peer worker moved).
        Senders to addresses no longer used are closed by the send thread."""
        self._task_address = dict(task_address)
        self._routes_changed = True
        self._wakeup.set()

    def local_congestion(self, congested: bool) -> None:
        """Backpressure's transition callback (any thread): tell the peers."""
        self._congested = congested
        self._wakeup.set()

    @property
    def peers(self) -> set[str]:
        return set(self._task_address.values())

    def stats(self) -> dict[str, Any]:
        return {
            "frames_sent": self.frames_sent,
            "frames_received": self.frames_received,
            "bytes_sent": self.bytes_sent,
            "bytes_received": self.bytes_received,
            "frames_dropped": self._transport.dropped,
            "unroutable": self.unroutable,
            "rejected": self.rejected(),
            "auth_rejected": getattr(self._transport, "auth_rejected", 0),
            "connections_dropped": getattr(self._transport, "connections_dropped", 0),
            "frames_undelivered": getattr(self._transport, "undelivered", 0),
            "queued": len(self._outbox),
            "congested": self._congested,
            "outbox_congested": self._outbox_congested,
            "peers_congested": sorted(self._peers_congested),
        }

    def rejected(self) -> dict[str, int]:
        """Messages and frames dropped by the checks, per reason (see squall.worker.wire.frames)."""
        out = dict(self._rejected)
        for reason, n in list(self.validator.rejected.items()):
            out[reason] = out.get(reason, 0) + n
        return out

    def stop(self) -> None:
        self._running = False
        self._wakeup.set()

    def join(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        if not self._threads and self._receiver is not None:
            # Bound but never started: nobody else will close it.
            self._receiver.close()

    # -- the send thread -----------------------------------------------------

    def _sender(self, address: str) -> Sender:
        sender = self._senders.get(address)
        if sender is None:
            sender = self._senders[address] = self._transport.connect(address)
        return sender

    def _send_loop(self) -> None:
        structlog.contextvars.bind_contextvars(worker=self.address)
        outbox = self._outbox
        try:
            while self._running or outbox:
                self._wakeup.clear()
                if self._routes_changed:
                    self._close_unused_senders()
                self._watch_outbox()
                self._tell_backpressure()
                if not outbox:
                    self._wakeup.wait(IDLE_WAIT_SECS)
                    continue
                by_peer: dict[str, list[tuple[str, int, Any]]] = {}
                routes = self._task_address
                for _ in range(min(len(outbox), TURN_MESSAGES)):
                    kind, task, payload = outbox.popleft()
                    address = routes.get(task)
                    if address is None:
                        self.unroutable += 1
                        continue
                    by_peer.setdefault(address, []).append((kind, task, payload))
                for address, messages in by_peer.items():
                    frame = codec.encode(messages)
                    self._sender(address).send(frame)
                    self.frames_sent += 1
                    self.bytes_sent += len(frame)
            self._watch_outbox()
            if self._bp_told:
                self._congested = False  # going away: do not leave the peers paused
                self._tell_backpressure()
        except BaseException as e:  # noqa: BLE001 - fatal for the worker
            self._die(e)
        finally:
            for sender in self._senders.values():
                sender.close()
            self._senders.clear()

    def _outbox_full(self) -> None:
        if self._backpressure is None:
            return
        with self._outbox_lock:
            if not self._outbox_congested:
                self._outbox_congested = True
                log.debug("transfer queue full, raising backpressure", queued=len(self._outbox))
                self._backpressure.raise_()

    def _watch_outbox(self) -> None:
        """Lower the backpressure a full outbox raised once half of it is sent."""
        bp = self._backpressure
        if bp is not None and self._outbox_congested and (
                len(self._outbox) <= self._capacity // 2 or not self._running):
            with self._outbox_lock:
                if self._outbox_congested:
                    self._outbox_congested = False
                    bp.lower()

    def _close_unused_senders(self) -> None:
        self._routes_changed = False
        used = self.peers
        for address in [a for a in self._senders if a not in used]:
            self._senders.pop(address).close()
        self._bp_told_at = float("-inf")  # a new peer must learn a congestion going on now

    def _tell_backpressure(self) -> None:
        congested = self._congested
        now = self._now()
        if congested:
            if self._bp_told and now - self._bp_told_at < self._bp_resend:
                return
        elif not self._bp_told:
            return  # peers assume no congestion until told otherwise
        frame = codec.encode([("bp", WORKER_TASK, [self.address, congested])])
        for address in self.peers:
            self._sender(address).send(frame)
        if congested != self._bp_told:
            log.debug("backpressure told to peers", congested=congested)
        self._bp_told = congested
        self._bp_told_at = now

    # -- the receive thread --------------------------------------------------

    def _recv_loop(self) -> None:
        structlog.contextvars.bind_contextvars(worker=self.address)
        receiver = self._receiver
        assert receiver is not None
        deliver = self._deliver
        try:
            while self._running:
                frame = receiver.recv(IDLE_WAIT_SECS)
                if self._peers_congested:
                    self._forget_stale_congestion()
                if frame is None:
                    continue
                self.frames_received += 1
                self.bytes_received += len(frame)
                validator = self.validator
                before = validator.total_rejected
                try:
                    messages = validator.decode(frame)
                except FrameRejected as e:
                    self._log_rejected(str(e))
                    continue
                if validator.total_rejected != before:
                    self._log_rejected("messages dropped from a frame")
                for kind, task, payload in messages:
                    if task == WORKER_TASK:
                        self._on_worker_message(kind, payload)
                    else:
                        deliver(kind, task, payload)
                # Let go of the batches now, so that the executors, not this thread, hold
                # their last references: a batch is then freed by the thread that just
                # worked on it, while its Tuples are in cache, instead of here, a frame
                # later and cold.
                messages = payload = None
        except BaseException as e:  # noqa: BLE001
            self._die(e)
        finally:
            receiver.close()

    def _log_rejected(self, what: str) -> None:
        now = self._now()
        if now - self._reject_logged_at >= REJECT_LOG_SECS:
            self._reject_logged_at = now
            log.warning("dropping frames that fail the wire checks", last=what,
                        rejected={k: n for k, n in self.rejected().items() if n})

    def _on_worker_message(self, kind: str, payload: Any) -> None:
        if kind != "bp":
            self._rejected["kind"] += 1
            self._log_rejected(f"unknown worker message {kind!r}")
            return
        if (type(payload) not in (list, tuple) or len(payload) != 2 or type(payload[0]) is not str
                or type(payload[1]) is not bool):
            self._rejected["shape"] += 1
            self._log_rejected("a malformed bp message")
            return
        peer, congested = payload
        if peer not in self._task_address.values() and peer not in self._peers_congested:
            self._rejected["source"] += 1
            self._log_rejected("a bp message from an unknown peer")
            return
        if congested:
            if peer not in self._peers_congested:
                log.debug("peer congested, pausing spouts", peer=peer)
            self._peers_congested[peer] = self._now() + BP_EXPIRY_PERIODS * self._bp_resend
        elif self._peers_congested.pop(peer, None) is not None:
            log.debug("peer no longer congested", peer=peer)
        self._update_remote()

    def _forget_stale_congestion(self) -> None:
        now = self._now()
        stale = [peer for peer, until in self._peers_congested.items() if until <= now]
        for peer in stale:
            del self._peers_congested[peer]
            log.info("peer congestion not refreshed, forgetting it", peer=peer)
        if stale:
            self._update_remote()

    def _update_remote(self) -> None:
        if self._backpressure is not None:
            self._backpressure.remote = bool(self._peers_congested)
