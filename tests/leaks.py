"""After each test, nothing it started is left running or open: no thread, no
child process, no file descriptor (as dask-distributed's test harness checks).

What a test started and stops late (a thread that finishes its last task, a
child that is exiting) is waited for, not blamed: the check polls until the
leftovers are gone or a bound passes.  What stays is reported by name, and
killed or left for the process to end, so the next test starts clean.

Process-wide singletons that a library starts once, on first use, and keeps
for the life of the process are not leaks of the test that happened to use
them first: they are listed in SINGLETON_THREADS with the reason.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import psutil

SETTLE_SECS = 10.0
POLL_SECS = 0.05

# Threads that live as long as the process, started once by a library.
SINGLETON_THREADS = (
    "pytest_timeout",  # pytest-timeout's watchdog for the current test (its own teardown ends it)
    "asyncio_",  # the default executor's workers of an event loop pytest or a library keeps
)


# The same, known by class: pyzmq's garbage collector, started by the first zero-copy
# send of a large frame, frees the process's zero-copy buffers until exit.
SINGLETON_THREAD_CLASSES = ("GarbageCollectorThread",)


def _thread_ok(thread: threading.Thread) -> bool:
    return (not thread.is_alive() or any(thread.name.startswith(p) for p in SINGLETON_THREADS)
            or type(thread).__name__ in SINGLETON_THREAD_CLASSES)


def _fds() -> dict[int, str]:
    out = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            out[int(name)] = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            pass  # the fd listing itself, closed as we read
    return out


@dataclass
class Snapshot:
    threads: set[threading.Thread] = field(default_factory=lambda: set(threading.enumerate()))
    children: set[int] = field(default_factory=lambda: {p.pid for p in psutil.Process().children(True)})
    fds: dict[int, str] = field(default_factory=_fds)


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
            lines.append("threads still running: " + ", ".join(sorted(t.name for t in self.threads)))
        for p in self.children:
            try:
                lines.append(f"child process still running: pid {p.pid}: {' '.join(p.cmdline())[:200]}")
            except psutil.Error:
                lines.append(f"child process still running: pid {p.pid}")
        if self.fds:
            lines.append("file descriptors still open: "
                         + ", ".join(f"{fd} -> {target}" for fd, target in sorted(self.fds.items())))
        return "\n".join(lines)


def leftovers(before: Snapshot) -> Leaks:
    threads = [t for t in threading.enumerate() if t not in before.threads and not _thread_ok(t)]
    children = []
    for p in psutil.Process().children(recursive=True):
        if p.pid in before.children:
            continue
        try:
            if p.status() != psutil.STATUS_ZOMBIE:
                children.append(p)
        except psutil.Error:
            pass
    now = _fds()
    fds = {fd: target for fd, target in now.items() if before.fds.get(fd) != target}
    return Leaks(threads, children, fds)


def settle(before: Snapshot, bound: float = SETTLE_SECS) -> Leaks:
    """Poll until what the test started has ended, or ``bound`` seconds pass."""
    deadline = time.monotonic() + bound
    while True:
        found = leftovers(before)
        if not found or time.monotonic() >= deadline:
            return found
        time.sleep(POLL_SECS)


def clean_up(found: Leaks) -> None:
    """Kill leftover children, so one test's leak does not fail the next."""
    for p in found.children:
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(found.children, timeout=5)


# The baseline of the test now running (None between tests): a fixture of a wider
# scope set up during the test adds what it started to it (see ``absorb``).
current: Snapshot | None = None


def absorb(before: Snapshot) -> None:
    """Count what appeared since ``before`` as the current test's baseline.

    For a module- or session-scoped fixture first set up inside a test (by
    ``request.getfixturevalue``): what it starts lives as long as its scope, and
    its own teardown ends it, so it is not the test's leak.
    """
    if current is None:
        return
    after = Snapshot()
    current.threads |= after.threads - before.threads
    current.children |= after.children - before.children
    current.fds.update({fd: target for fd, target in after.fds.items() if before.fds.get(fd) != target})


def check() -> Iterator[None]:
    """The fixture's body: snapshot, run the test, settle, report."""
    global current
    before = current = Snapshot()
    try:
        yield
    finally:
        current = None
    found = settle(before)
    if found:
        report = found.describe()
        clean_up(found)
        raise AssertionError("the test left behind what it started:\n" + report)
