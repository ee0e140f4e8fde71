"""Stopping a process and everything it started: ask, wait, then SIGKILL."""

from __future__ import annotations

import psutil


def kill_tree(pid: int, grace: float) -> bool:
    """SIGTERM ``pid`` and its descendants, SIGKILL what is left after ``grace``
    seconds; True if there was anything to stop."""
    try:
        root = psutil.Process(pid)
        members = [root, *root.children(recursive=True)]
    except psutil.Error:
        return False
    for p in members:
        try:
            p.terminate()
        except psutil.Error:
            pass
    _gone, alive = psutil.wait_procs(members, timeout=grace)
    for p in alive:
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(alive, timeout=5)
    return True
