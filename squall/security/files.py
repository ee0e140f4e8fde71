"""Writing a file whole, and private from its first byte, where others may write too.

A daemon (often root) writes files into folders a less trusted process can also
write: a worker's slot, a sandbox's.  What is written goes to a temporary name
first, made fresh (``O_EXCL``: never a link, or a file, someone left there) with
mode 0600, given its owner, group and mode, filled, then renamed over the target
in one step, so no reader sees half of it and no planted link is ever followed.
"""

from __future__ import annotations

import os
from pathlib import Path


def write_private(path: str | os.PathLike[str], text: str, mode: int | None = 0o600, owner: int = -1,
                  group: int = -1, tmp_per_process: bool = False) -> None:
    """``text`` as ``path``, replacing whatever was there: 0600 while written, then
    ``mode`` (with ``owner``/``group``, -1: unchanged).

    ``mode=None``: what the umask leaves of 0666, as ``open()`` gives, for a file
    other users read (a worker's heartbeat).  ``tmp_per_process``: a temporary
    name of this process's own (``.<name>.<pid>.tmp``), where several processes
    may write the same file at once and the last whole one should win; the
    default single name means a writer that died leaves no litter.
    """
    target = Path(path)
    if tmp_per_process:
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    else:
        tmp = target.with_name(f"{target.name}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600 if mode is not None else 0o666)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        if owner != -1 or group != -1:
            os.fchown(fd, owner, group)
        if mode is not None and mode != 0o600:
            os.fchmod(fd, mode)
        f.write(text)
    os.replace(tmp, target)
