"""After each test, nothing it started is left running or open: no thread, no
child process, no file descriptor (as dask-distributed's test harness checks).

What a test started and stops late (a thread that finishes its last task, a
child that is exiting) is waited for, not blamed: the check polls until the
leftovers are gone or a bound passes, and returns at once when nothing is
left.  What stays is reported by name, and killed or left for the process to
end, so the next test starts clean.

A fixture of a wider scope (module, session) owns what its setup started, for
as long as it lives, whether it was set up before the test or inside it
(``request.getfixturevalue``): that is the test's baseline, not its leak. A
process started later by a process the baseline holds (a supervisor's worker,
launched for a topology a module's cluster runs) is that process's own
business, and so is one that replaces a baseline process that ended, with the
same command line (a server's watcher restarting the server a test killed).
The fixture is checked in turn after its teardown: what it started must be
gone then.

Process-wide singletons that a library starts once, on first use, and keeps
for the life of the process are not leaks of the test that happened to use
them first: they are started before the first test (``start_singletons``), or
listed in SINGLETON_THREADS with the reason.
"""

from __future__ import annotations

import gc
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import psutil

SETTLE_SECS = 10.0
POLL_SECS = 0.02

# Threads that live as long as the process, started once by a library.
SINGLETON_THREADS = (
    "pytest_timeout",  # pytest-timeout's watchdog for the current test (its own teardown ends it)
    "asyncio_",  # the default executor's workers of an event loop pytest or a library keeps
)


def start_singletons() -> None:
    """Start, before the first test, the singletons that a library would start on
    first use and keep until exit, so they and their file descriptors are in every
    baseline: pyzmq's garbage collector (a thread and a ZeroMQ context of its own),
    started by the first zero-copy send of a large frame, frees the process's
    zero-copy buffers until exit; the first zero-copy frame opens its PUSH socket."""
    import zmq

    zmq.Frame(b"\0" * 65536, copy=False)  # dropped at once: the collector frees it


def _thread_ok(thread: threading.Thread) -> bool:
    return not _alive(thread) or any(thread.name.startswith(p) for p in SINGLETON_THREADS)


def _native_name(thread: threading.Thread) -> str | None:
    try:
        with open(f"/proc/self/task/{thread.native_id}/comm") as f:
            return f.read().strip()
    except OSError:
        return None  # the OS thread has ended


def _thread_name(thread: threading.Thread) -> str:
    if isinstance(thread, threading._DummyThread):
        return f"{thread.name} (started outside Python: {_native_name(thread)})"
    return thread.name


def _alive(thread: threading.Thread) -> bool:
    """A thread a C library started and Python met (a _DummyThread) stays listed
    after it ends: the OS says whether it is still there."""
    if isinstance(thread, threading._DummyThread):
        return _native_name(thread) is not None
    return thread.is_alive()


def _fds() -> dict[int, str]:
    out = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            out[int(name)] = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            pass  # the fd listing itself, closed as we read
    return out


def _processes() -> dict[int, tuple[int, tuple[str, ...]]]:
    """Every live descendant of this process: pid -> (parent pid, command line)."""
    out = {}
    for p in psutil.Process().children(recursive=True):
        try:
            out[p.pid] = (p.ppid(), tuple(p.cmdline()))
        except psutil.Error:
            pass  # gone as we looked
    return out


@dataclass
class Snapshot:
    threads: set[threading.Thread] = field(default_factory=set)
    children: dict[int, tuple[str, ...]] = field(default_factory=dict)  # pid -> command line
    fds: dict[int, str] = field(default_factory=dict)

    @classmethod
    def take(cls) -> Snapshot:
        return cls(set(threading.enumerate()), {pid: cmd for pid, (_, cmd) in _processes().items()}, _fds())

    def since(self, before: Snapshot) -> Snapshot:
        """What is here and was not in ``before``."""
        return Snapshot(self.threads - before.threads,
                        {pid: cmd for pid, cmd in self.children.items() if pid not in before.children},
                        {fd: t for fd, t in self.fds.items() if before.fds.get(fd) != t})

    def merged(self, *others: Snapshot) -> Snapshot:
        out = Snapshot(set(self.threads), dict(self.children), dict(self.fds))
        for other in others:
            out.threads |= other.threads
            out.children.update(other.children)
            out.fds.update(other.fds)
        return out


@dataclass
class Leaks:
    threads: list[threading.Thread]
    children: list[psutil.Process]
    fds: dict[int, str]

    def __bool__(self) -> bool:
        return bool(self.threads or self.children or self.fds)

    def describe(self) -> str:
        lines = []
        if self.threads:
            lines.append("threads still running: " + ", ".join(sorted(_thread_name(t) for t in self.threads)))
        for p in self.children:
            try:
                lines.append(f"child process still running: pid {p.pid}: {' '.join(p.cmdline())[:200]}")
            except psutil.Error:
                lines.append(f"child process still running: pid {p.pid}")
        if self.fds:
            lines.append("file descriptors still open: "
                         + ", ".join(f"{fd} -> {target}" for fd, target in sorted(self.fds.items())))
        return "\n".join(lines)


def _owned_by(pid: int, tree: dict[int, int], owners: set[int]) -> bool:
    """Whether an ancestor of ``pid`` (below this process) is one of ``owners``."""
    parent = tree.get(pid)
    while parent in tree:
        if parent in owners:
            return True
        parent = tree[parent]
    return False


def leftovers(before: Snapshot) -> Leaks:
    threads = [t for t in threading.enumerate() if t not in before.threads and not _thread_ok(t)]
    children = []
    procs = _processes()
    tree = {pid: ppid for pid, (ppid, _) in procs.items()}
    # A baseline process that ended and runs again with the same command line was
    # restarted by what owns it (a server's watcher thread): still the baseline's.
    gone = {cmd for pid, cmd in before.children.items() if pid not in procs}
    owners = set(before.children) | {pid for pid, (_, cmd) in procs.items() if cmd in gone}
    for pid in procs:
        if pid in owners or _owned_by(pid, tree, owners):
            continue
        try:
            p = psutil.Process(pid)
            if p.status() != psutil.STATUS_ZOMBIE:
                children.append(p)
        except psutil.Error:
            pass  # ended as we looked
    fds = {fd: target for fd, target in _fds().items() if before.fds.get(fd) != target}
    return Leaks(threads, children, fds)


def settle(before: Snapshot, bound: float = SETTLE_SECS) -> Leaks:
    """Poll until what was started since ``before`` has ended, or ``bound`` seconds pass.

    Garbage is collected first if anything is left: an object in a reference
    cycle (a traceback's frames) may hold what the test has done with, e.g. a
    thread pool whose worker ends when the pool is collected.
    """
    deadline = time.monotonic() + bound
    collected = False
    while True:
        found = leftovers(before)
        if not found or time.monotonic() >= deadline:
            return found
        if not collected:
            gc.collect()
            collected = True
            continue
        time.sleep(POLL_SECS)


def clean_up(found: Leaks) -> None:
    """Kill leftover children, so one test's leak does not fail the next."""
    for p in found.children:
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(found.children, timeout=5)


# -- fixtures of a wider scope than a test ---------------------------------------------------
@dataclass
class _Live:
    before: Snapshot
    owned: Snapshot | None = None  # what its setup started, once set up


_live: dict[object, _Live] = {}


def fixture_setting_up(key: object) -> None:
    _live[key] = _Live(Snapshot.take())


def fixture_set_up(key: object) -> None:
    live = _live.get(key)
    if live is not None:
        live.owned = Snapshot.take().since(live.before)


def owned_by_fixtures(but: object = None) -> Snapshot:
    """What the live wider-scoped fixtures (but ``but``) started in their setup."""
    return Snapshot().merged(*(live.owned for key, live in _live.items()
                               if key is not but and live.owned is not None))


def fixture_torn_down(key: object, name: str, bound: float = SETTLE_SECS) -> None:
    """After a wider-scoped fixture's teardown: what it started is gone, or AssertionError."""
    live = _live.pop(key, None)
    if live is None:
        return
    found = settle(live.before.merged(owned_by_fixtures()), bound)
    if found:
        report = found.describe()
        clean_up(found)
        raise AssertionError(f"fixture {name!r} left behind what it started:\n{report}")


def check() -> Iterator[None]:
    """The test fixture's body: snapshot, run the test, settle, report."""
    before = Snapshot.take()
    yield
    found = settle(before.merged(owned_by_fixtures()))
    if found:
        report = found.describe()
        clean_up(found)
        raise AssertionError("the test left behind what it started:\n" + report)
