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


def write_private(path: str | os.PathLike[str], text: str, mode: int = 0o600, owner: int = -1,
                  group: int = -1) -> None:
    """``text`` as ``path``: 0600 while written, then ``mode`` (with ``owner``/``group``,
    -1: unchanged), replacing whatever was there."""
    target = Path(path)
    tmp = target.with_name(f"{target.name}.tmp")  # one name: a writer that died leaves no litter
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        if owner != -1 or group != -1:
            os.fchown(fd, owner, group)
        if mode != 0o600:
            os.fchmod(fd, mode)
        f.write(text)
    os.replace(tmp, target)
