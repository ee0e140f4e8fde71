"""Pinning a process to one core, and keeping its children off that pin.

A Python process runs Python on one core at a time (one GIL), and its
threads lose to cache and lock traffic when the scheduler moves them between
cores: a worker (the supervisor picks its core) or ``squall local`` runs
faster pinned.  Its child processes are another matter: a multilang
component or a Spark Connect server is a process of its own, with its own
cores to use, so each is given back the cores the parent had before it was
pinned, the moment it starts.
"""

from __future__ import annotations

import os
from pathlib import Path

_before_pin: set[int] | None = None


def pin_to(core: int) -> None:
    """Pin this process (and the threads it starts from now on) to ``core``.  OSError if not allowed."""
    global _before_pin
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {core})
    if _before_pin is None:
        _before_pin = before


def least_busy_core(sample_secs: float = 0.1) -> int | None:
    """The core this process may use that was idlest over ``sample_secs``; None with one core."""
    import psutil

    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        return None
    busy = psutil.cpu_percent(interval=sample_secs, percpu=True)
    return min(allowed, key=lambda c: (busy[c] if c < len(busy) else 100.0, c))


def release_child(pid: int) -> None:
    """Give a child process (each of its threads so far) the cores this one had before its pin."""
    if _before_pin is None:
        return
    try:
        threads = [int(t.name) for t in Path(f"/proc/{pid}/task").iterdir()]
    except (OSError, ValueError):
        threads = [pid]
    for tid in threads:
        try:
            os.sched_setaffinity(tid, _before_pin)
        except OSError:
            pass  # gone already, or not ours to change: it keeps the pin
