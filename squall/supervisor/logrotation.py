"""Keeping the workers' logs within bounds: a worker's log (and its events.log, each on its own) rotates past
``supervisor.worker.log.max.bytes``, its rotated files stay within
``logviewer.max.per.worker.logs.size.mb``, and stopped workers' logs go after
``logviewer.cleanup.age.mins`` or when all of them pass
``logviewer.max.sum.worker.logs.size.mb`` (the decisions: squall.supervisor.logfiles).

A worker writes its log through the descriptor the supervisor opened for it (its stdout,
O_APPEND), which no rename reaches: the file is rotated by copying it to ``worker.log.1``
and cutting it to nothing, as logrotate's copytruncate does.  Lines written between the
last copy and the cut are lost; the copy is repeated while the file grows, so that window
is a few system calls wide.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path

import structlog

from squall.supervisor import logfiles

log = structlog.get_logger("squall.supervisor.logrotation")

COPY_PASSES = 4  # copies of what was appended meanwhile before the cut


def _rotated(directory: Path, name: str) -> dict[int, int]:
    """number -> size of the rotated files of ``name`` in ``directory``."""
    out = {}
    for entry in directory.iterdir():
        suffix = entry.name[len(name) + 1:]
        if entry.name.startswith(name + ".") and suffix.isdigit() and not entry.is_symlink():
            out[int(suffix)] = entry.stat().st_size
    return out


def rotate_if_due(directory: Path, max_bytes: int, cap_bytes: int, name: str = logfiles.WORKER_LOG) -> bool:
    """Rotate ``directory``'s ``name`` (worker.log, events.log) if it has passed ``max_bytes``;
    True if it did."""
    current = directory / name
    try:
        fd = os.open(current, os.O_RDWR | os.O_NOFOLLOW)
    except OSError:
        return False
    with os.fdopen(fd, "r+b"):  # closes fd
        size = os.fstat(fd).st_size
        if size < max_bytes:
            return False
        rotated = _rotated(directory, name)
        for n in sorted(rotated, reverse=True):
            os.replace(directory / logfiles.rotated_name(n, name),
                       directory / logfiles.rotated_name(n + 1, name))
        target = directory / logfiles.rotated_name(1, name)
        with open(target, "xb", opener=lambda p, f: os.open(p, f | os.O_NOFOLLOW, 0o600)) as dst:
            copied = 0
            for _ in range(COPY_PASSES):
                while copied < size:
                    sent = os.sendfile(dst.fileno(), fd, copied, size - copied)
                    if sent == 0:
                        break
                    copied += sent
                size = os.fstat(fd).st_size
                if size <= copied:
                    break
            os.ftruncate(fd, 0)
        sizes = {n + 1: s for n, s in rotated.items()} | {1: copied}
    for n in logfiles.to_drop(sizes, 0, cap_bytes):
        (directory / logfiles.rotated_name(n, name)).unlink(missing_ok=True)
    log.info("worker log rotated", dir=str(directory), file=name, bytes=copied)
    return True


def _measure(directory: Path) -> tuple[float, int]:
    newest, total = 0.0, 0
    for entry in directory.iterdir():
        st = entry.lstat()
        newest, total = max(newest, st.st_mtime), total + st.st_size
    return newest or directory.lstat().st_mtime, total


def clean_up(local_dir: Path, live: Iterable[tuple[str, int]], now: float, age_secs: float,
             sum_cap_bytes: int) -> list[Path]:
    """Remove stopped workers' log directories past their age or over the node's total;
    what was removed."""
    base = local_dir / logfiles.ARTIFACTS
    if not base.is_dir():
        return []
    running = {(t, int(p)) for t, p in live}
    dirs = []
    for topology_dir in base.iterdir():
        for port_dir in topology_dir.iterdir() if topology_dir.is_dir() else []:
            if port_dir.is_dir() and port_dir.name.isdigit():
                modified, size = _measure(port_dir)
                dirs.append(logfiles.LogDir(port_dir, modified, size,
                                            (topology_dir.name, int(port_dir.name)) in running))
    removed = logfiles.to_remove(dirs, now, age_secs, sum_cap_bytes)
    for path in removed:
        shutil.rmtree(path, ignore_errors=True)
        try:
            path.parent.rmdir()  # the topology's, once its last port's logs are gone
        except OSError:
            pass
    if removed:
        log.info("stopped workers' logs removed", dirs=[str(p.relative_to(base)) for p in removed])
    return removed
