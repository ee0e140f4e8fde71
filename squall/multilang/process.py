"""One child process: spawn, handshake, liveness, and the threads around its pipes.

Threaded (bolts).  The **writer** thread owns the child's stdin: it takes
everything queued (urgent messages first: task-id replies, heartbeats; then
tuples) and writes it in one go, so a busy bolt costs one ``write`` per
batch, not per tuple.  Tuples wait in a queue whose length the owner bounds
(``topology.shellbolt.max.pending``); urgent messages are never held back by
that bound.  The **reader** thread owns stdout and stderr: it hands decoded
messages to the owner (``on_messages``), logs stderr lines and keeps their
tail, sends heartbeats every ``heartbeat_secs`` and declares the child dead
after ``timeout`` of silence.  It alone decides that the child is gone: on
end of file, a timeout, garbage, or an :meth:`abort` from the owner, it kills
the child, drains stderr, reaps it and calls ``on_exit`` once with a
:class:`ChildDied` carrying the exit code and the stderr tail.

Unthreaded (spouts, strict request/response as in Storm).  The owner writes
(:meth:`send_now`) and reads (:meth:`receive`) in its own thread and gives
the child up itself (:meth:`died`); a **watcher** thread only logs stderr.

Either way, if the owner's executor thread ends without closing the child
(a worker that died), a thread of ours notices and kills it: no orphans.
"""

from __future__ import annotations

import select
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import structlog

from squall.affinity import release_child
from squall.multilang import protocol
from squall.multilang.codec import JsonCodec, MsgpackCodec
from squall.multilang.errors import (
    ChildDied,
    ChildWentAway,
    MultilangError,
    OutputClosed,
    ProtocolError,
    stderr_lead,
)
from squall.multilang.protocol import ShellConnection
from squall.multilang.tap import Tap

# Unthreaded (spouts): how long to poll for the child's answer before blocking.
# Each command is a round trip, and waking a process whose CPU went idle costs
# ~25 us on a virtual machine; answers often come sooner than that (measured:
# a pystorm spout doubles its rate, 3.4K -> 7.4K tuples/s).
SPIN_SECS = 0.0002
TICK_SECS = 0.1  # how often the reader looks at the clock when the child is quiet
STDERR_TAIL_LINES = 40
STDERR_DRAIN_SECS = 1.0  # after a death, how long to wait for the last stderr bytes
CLOSE_GRACE_SECS = 0.5  # on close: stdin EOF, then SIGTERM, then SIGKILL, this long apart


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class Wakeup:
    """An event for one waiter; setting it costs nothing while nobody waits.

    The waiter raises ``waiting`` *before* it looks at what it waits for, so
    a setter that changed the state afterwards sees the flag and sets.
    """

    __slots__ = ("event", "waiting")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.waiting = False

    def set(self) -> None:
        if self.waiting:
            self.event.set()


class ShellProcess:
    def __init__(
        self,
        argv: list[str],
        *,
        codec: JsonCodec | MsgpackCodec,
        cwd: str | None,
        env: dict[str, str] | None,
        timeout: float,
        heartbeat_secs: float | None,
        owner_alive: Callable[[], bool],
        on_orphaned: Callable[[], None] | None = None,
        on_messages: Callable[[ShellProcess, list[Any]], None] | None = None,
        on_exit: Callable[[ShellProcess, ChildDied], None] | None = None,
        wake: Wakeup | None = None,
        threaded: bool = True,
        logger: Any = None,
        now: Callable[[], float] = time.monotonic,
        tap: Tap | None = None,
        max_message_bytes: int | None = None,
        component: str | None = None,
    ) -> None:
        self.argv = argv
        self.codec = codec
        self.cwd = cwd
        self.env = env
        self.timeout = timeout
        self.heartbeat_secs = heartbeat_secs
        self.on_messages = on_messages
        self.on_exit = on_exit
        self.owner_alive = owner_alive
        self.on_orphaned = on_orphaned
        self.wake = wake or Wakeup()
        self.threaded = threaded
        self.log = logger or structlog.get_logger("squall.multilang.ShellProcess")
        self.now = now
        self.tap = tap
        self.max_message_bytes = max_message_bytes
        self.component = component
        self.popen: subprocess.Popen[bytes] | None = None
        self.conn: ShellConnection | None = None
        self.pid: int | None = None
        self.started_at = now()
        self.last_heard = self.started_at
        self.closing = False
        self.fatal: BaseException | None = None
        self.stderr_tail: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        self._stderr_partial = b""
        self._urgent: deque[bytes] = deque()
        self._tuples: deque[bytes] = deque()
        self._cond = threading.Condition(threading.Lock())
        self._writer_idle = False  # the writer waits on _cond: producers must notify
        self._writer: threading.Thread | None = None
        self._reader: threading.Thread | None = None
        self._watcher: threading.Thread | None = None
        self._stop = threading.Event()
        self._stderr_done = threading.Event()
        self._dead = False  # the child is given up: threads stop
        self._spin = True  # unthreaded: poll briefly for answers (see receive)
        self._sent_at = 0.0

    # -- start ---------------------------------------------------------------

    def start(self, conf: dict[str, Any], context: dict[str, Any], pid_dir: str) -> list[Any]:
        """Spawn, hand over conf/context/pidDir and wait for the pid (at most ``timeout``).

        Returns the messages the child sent after its pid.  Raises
        :class:`ChildDied` if the child dies, garbles or stays silent.
        """
        try:
            self.popen = subprocess.Popen(
                self.argv, cwd=self.cwd, env=self.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, bufsize=0,
            )
        except OSError as e:
            msg = f"Error when launching multilang subprocess {self.argv!r} in {self.cwd!r}: {e}"
            raise ChildDied(msg) from e
        release_child(self.popen.pid)  # a worker pinned to one core: its child has its own cores
        assert self.popen.stdin is not None and self.popen.stdout is not None
        self.conn = ShellConnection(self.codec, self.popen.stdout, self.popen.stdin, self.max_message_bytes)
        try:
            self._write(self.conn.encode(protocol.handshake_message(conf, context, pid_dir)))
            first: list[Any] = []
            deadline = self.now() + self.timeout
            while not first:
                if self.now() > deadline:
                    raise ChildWentAway(f"no pid from the child within {self.timeout}s")
                first = self._read_once(min(TICK_SECS, max(0.0, deadline - self.now())))
            self.pid = protocol.parse_pid(first[0])
        except (MultilangError, OSError) as e:
            self._kill()
            died = self._death(e, "Error when launching multilang subprocess")
            self._close_pipes()
            raise died from e
        self.last_heard = self.now()
        return first[1:]

    def run(self) -> None:
        """Start the threads (after :meth:`start`): a reader and a writer, or
        (``threaded=False``: the owner reads and writes itself) a stderr watcher."""
        name = f"{self.argv[-1]}-{self.pid}"
        if self.threaded:
            self._writer = threading.Thread(target=self._write_loop, name=f"shell-writer-{name}", daemon=True)
            self._reader = threading.Thread(target=self._read_loop, name=f"shell-reader-{name}", daemon=True)
            self._writer.start()
            self._reader.start()
        else:
            self._watcher = threading.Thread(target=self._watch_loop, name=f"shell-stderr-{name}",
                                             daemon=True)
            self._watcher.start()

    # -- the owner's side ----------------------------------------------------

    def put_many(self, datas: list[bytes]) -> None:
        """Queue encoded tuples, waking the writer once for all of them."""
        self._tuples.extend(datas)
        if self._writer_idle:
            with self._cond:
                self._cond.notify()

    def put_urgent(self, data: bytes) -> None:
        """Queue ahead of every tuple: task-id replies, heartbeats."""
        self._urgent.append(data)
        if self._writer_idle:
            with self._cond:
                self._cond.notify()

    # -- the owner's side, unthreaded (spouts: strict request/response) ---------

    def send_now(self, data: bytes) -> None:
        """Write in the caller's thread; the child's answer is due within ``timeout``."""
        self.last_heard = self.now()
        self._sent_at = time.perf_counter()
        self._write(data)

    def receive(self, wait: float, poll: bool = True) -> list[Any]:
        """Messages the child wrote within ``wait`` (maybe none); raises as the reader would.

        With ``poll``, looks for up to :data:`SPIN_SECS` first, while the child
        answers that fast; a slow child (a spout polling a remote queue) is
        waited for without spinning.  ``poll=False``: the answer is not urgent.
        """
        messages: list[Any] = []
        if poll and self._spin:
            spin_until = time.perf_counter() + SPIN_SECS
            while not messages and time.perf_counter() < spin_until:
                messages = self._read_once(0)
        if not messages:
            messages = self._read_once(wait)
            self._spin = time.perf_counter() - self._sent_at < 2 * SPIN_SECS
        if messages:
            self.last_heard = self.now()
        return messages

    def silent_too_long(self) -> bool:
        return self.now() - self.last_heard > self.timeout

    def died(self, cause: BaseException) -> ChildDied:
        """Unthreaded mode: give the child up for ``cause``; the report, stderr included."""
        self._dead = True
        self._kill()
        died = self._death(cause, "ShellProcess died")
        self._stop.set()
        self._close_pipes()
        return died

    @property
    def queued(self) -> int:
        """Tuples not yet written."""
        return len(self._tuples)

    def abort(self, cause: BaseException) -> None:
        """Kill the child for ``cause`` (a protocol fault); ``on_exit`` follows from the reader."""
        if self.fatal is None:
            self.fatal = cause
        self._kill()

    def close(self) -> None:
        """Orderly stop: EOF on stdin, then SIGTERM, then SIGKILL; no ``on_exit``."""
        self.closing = True
        self._stop.set()
        with self._cond:
            self._cond.notify()
        popen = self.popen
        if popen is None:
            return
        if self._writer is None:
            self._close_stdin()
        for step in (None, popen.terminate, popen.kill):
            if step is not None and popen.poll() is None:
                step()
            try:
                popen.wait(CLOSE_GRACE_SECS)
                break
            except subprocess.TimeoutExpired:
                continue
        for thread in (self._writer, self._reader, self._watcher):
            if thread is not None and thread is not threading.current_thread():
                thread.join(STDERR_DRAIN_SECS + CLOSE_GRACE_SECS)
        self._close_pipes()

    # -- writer --------------------------------------------------------------

    def _write(self, data: bytes) -> None:
        assert self.conn is not None
        if self.tap is not None:
            self.tap.record(b"P", data)
        self.conn.write(data)

    def _write_loop(self) -> None:
        cond = self._cond
        urgent = self._urgent
        tuples = self._tuples
        wake = self.wake
        try:
            while True:
                if not urgent and not tuples:
                    with cond:
                        # Idle first, then look again: a producer that appended before seeing
                        # the flag is found by the look, one that appended after notifies.
                        self._writer_idle = True
                        while not urgent and not tuples and not self.closing and not self._dead:
                            cond.wait()
                        self._writer_idle = False
                if self.closing or self._dead:
                    break
                # Urgent messages first; deques are safe to pop while producers append.
                batch = [urgent.popleft() for _ in range(len(urgent))]
                batch += [tuples.popleft() for _ in range(len(tuples))]
                wake.set()  # room in the queue: a blocked execute() may go on
                self._write(batch[0] if len(batch) == 1 else b"".join(batch))
        except (BrokenPipeError, ConnectionResetError, ValueError, OSError) as e:
            if not self.closing and self.popen is not None and self.popen.poll() is None:
                # Stdin closed while the child lives on: it cannot be fed any more.
                self.abort(ChildWentAway(f"cannot write to the child: {e}"))
        finally:
            self._close_stdin()

    def _close_stdin(self) -> None:
        stdin = self.popen.stdin if self.popen is not None else None
        if stdin is not None and not stdin.closed:
            try:
                stdin.close()
            except OSError:
                pass

    # -- reader --------------------------------------------------------------

    def _read_once(self, wait: float) -> list[Any]:
        """Wait up to ``wait`` for output; return messages completed (stderr is logged)."""
        assert self.popen is not None and self.conn is not None
        out = self.popen.stdout
        err = self.popen.stderr
        # Unthreaded, the watcher thread owns stderr once it runs.
        fds = [out] if err is None or err.closed or self._watcher is not None else [out, err]
        ready, _, _ = select.select(fds, [], [], wait)
        messages: list[Any] = []
        if err in ready:
            self._read_stderr()
        if out in ready:
            data = out.read(protocol.CHUNK)  # type: ignore[union-attr]
            if not data:
                raise OutputClosed
            if self.tap is not None:
                self.tap.record(b"C", data)
            messages = self.conn.decoder.feed(data)
        return messages

    def _read_stderr(self) -> bool:
        err = self.popen.stderr if self.popen is not None else None
        if err is None or err.closed:
            return False
        data = err.read(65536)
        if not data:
            self._stderr_done.set()
            err.close()
            if self._stderr_partial:
                self._stderr_line(self._stderr_partial)
                self._stderr_partial = b""
            return False
        lines = (self._stderr_partial + data).split(b"\n")
        self._stderr_partial = lines.pop()
        for line in lines:
            self._stderr_line(line)
        return True

    def _stderr_line(self, raw: bytes) -> None:
        line = raw.decode("utf-8", "replace").rstrip("\r")
        self.stderr_tail.append(line)
        self.log.info("child stderr", line=line, pid=self.pid)

    def _read_loop(self) -> None:
        """The reader thread: never ends without ``on_exit`` unless the child is closed or orphaned."""
        try:
            self._read_until_death()
        except Exception as e:  # a bug of ours: still report it, or the component waits forever
            self.log.exception("multilang reader failed", pid=self.pid)
            if not self.closing:
                self._dead = True
                with self._cond:
                    self._cond.notify()
                self._kill()
                died = ChildDied(f"ShellProcess reader failed: {type(e).__name__}: {e}")
                died.__cause__ = e
                self._close_pipes()
                self.on_exit(self, died)  # type: ignore[misc]

    def _read_until_death(self) -> None:
        cause: BaseException | None = None
        next_beat = self.now() + self.heartbeat_secs if self.heartbeat_secs else None
        try:
            while not self.closing:
                messages = self._read_once(TICK_SECS)
                now = self.now()
                if messages:
                    self.last_heard = now
                    self.on_messages(self, messages)  # type: ignore[misc]
                if not self.owner_alive() and not self.closing:
                    self._orphaned()
                    return
                if now - self.last_heard > self.timeout:
                    raise ChildWentAway(f"subprocess heartbeat timeout ({self.timeout}s without a "
                                        f"message from the child)")
                if next_beat is not None and now >= next_beat:
                    next_beat = now + self.heartbeat_secs  # type: ignore[operator]
                    if not self._urgent:  # a child that is not reading needs no pile of them
                        self.put_urgent(self.conn.encode(protocol.heartbeat()))  # type: ignore[union-attr]
        except ProtocolError as e:
            if e.decoded:
                self.on_messages(self, e.decoded)  # type: ignore[misc]
            cause = e
        except (MultilangError, OSError, ValueError) as e:
            cause = e
        except Exception as e:  # anything else a read can raise (a decoder's own error): a death too
            self.log.exception("multilang reader failed", pid=self.pid)
            cause = ProtocolError(f"reading the child's output failed: {type(e).__name__}: {e}")
            cause.__cause__ = e
        if self.closing:
            return  # close() stops the child its own way
        if self.fatal is not None:
            cause = self.fatal
        self._dead = True
        with self._cond:
            self._cond.notify()
        self._kill()
        died = self._death(cause or ChildWentAway("child gone"), "ShellProcess died")
        self._close_pipes()
        self.on_exit(self, died)  # type: ignore[misc]

    def _orphaned(self) -> None:
        self.log.warning("shell component gone without closing its child: killing it", pid=self.pid)
        self.close()
        if self.on_orphaned is not None:
            self.on_orphaned()

    def _watch_loop(self) -> None:
        """Unthreaded mode: log stderr, and kill the child if its owner is gone."""
        while not self._stop.is_set():
            if not self.owner_alive() and not self.closing:
                self._orphaned()
                return
            err = self.popen.stderr if self.popen is not None else None
            if err is None or err.closed:
                self._stop.wait(TICK_SECS)
                continue
            try:
                ready, _, _ = select.select([err], [], [], TICK_SECS)
                if ready:
                    self._read_stderr()
            except (OSError, ValueError):
                return

    # -- death ---------------------------------------------------------------

    def _kill(self) -> None:
        popen = self.popen
        if popen is not None and popen.poll() is None:
            try:
                popen.kill()
            except OSError:
                pass

    def _reap(self) -> int | None:
        popen = self.popen
        if popen is None:
            return None
        deadline = time.monotonic() + STDERR_DRAIN_SECS
        watcher = self._watcher
        if watcher is not None and watcher.is_alive() and watcher is not threading.current_thread():
            # The watcher owns stderr: let it read to the end.
            self._stderr_done.wait(STDERR_DRAIN_SECS)
        else:
            while self._read_stderr_until(deadline):
                pass
        try:
            return popen.wait(max(0.0, deadline - time.monotonic()) + CLOSE_GRACE_SECS)
        except subprocess.TimeoutExpired:
            return None

    def _read_stderr_until(self, deadline: float) -> bool:
        err = self.popen.stderr if self.popen is not None else None
        if err is None or err.closed:
            return False
        wait = deadline - time.monotonic()
        if wait <= 0:
            return False
        ready, _, _ = select.select([err], [], [], wait)
        return bool(ready) and self._read_stderr()

    def _death(self, cause: BaseException, what: str) -> ChildDied:
        code = self._reap()
        tail = "\n".join(self.stderr_tail)
        who = f"component: {self.component}, " if self.component else ""
        # A child that closed its output exited or crashed: what it said last on stderr (a
        # syntax error, a missing module) is why, and leads.  A child killed for a timeout or
        # a protocol fault is not described by its old stderr lines: Storm's words alone.
        lead = stderr_lead(list(self.stderr_tail)) if isinstance(cause, OutputClosed) else None
        msg = (f"{f'{lead} -- ' if lead else ''}{what}: {cause}\n{who}command: {' '.join(self.argv)}, "
               f"cwd: {self.cwd}, pid: {self.pid}, {_describe_exit(code)}\n"
               f"stderr (last {len(self.stderr_tail)} lines):\n{tail}")
        died = ChildDied(msg)
        died.__cause__ = cause
        died.exit_code = code  # type: ignore[attr-defined]
        died.stderr = tail  # type: ignore[attr-defined]
        return died

    def _close_pipes(self) -> None:
        if self.tap is not None:
            self.tap.close()
        popen = self.popen
        if popen is None:
            return
        for stream in (popen.stdin, popen.stdout, popen.stderr):
            if stream is not None and not stream.closed:
                try:
                    stream.close()
                except OSError:
                    pass

    def join(self, timeout: float) -> None:
        """Wait for both threads (after a death or close)."""
        for thread in (self._writer, self._reader):
            if thread is not None and thread is not threading.current_thread():
                thread.join(timeout)
        self._close_pipes()
