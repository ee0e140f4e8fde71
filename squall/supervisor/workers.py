"""A node's worker slots as files: what the supervisor writes for its workers, and how it
reads what they wrote.

A worker runs user code, and in a sandbox as another user (squall.supervisor.launcher)
it writes its slot's files itself: the supervisor reads them only as plain files with
one name, never through a symbolic link (:func:`read_json`, :func:`read_worker_file`:
a link could name the supervisor's keyring), and takes of a worker's error lines only
the fields the cluster keeps (:func:`error_record`).  What it writes is this user's
only and written whole (:func:`write_json`, :func:`private_dir`).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from squall.security.files import write_private

UMASK = 0o077  # the supervisor's and its workers': files 0600, directories 0700
ERRORS_READ_MAX = 1 << 20  # of a worker's errors.jsonl per heartbeat
# What of a worker's error record goes on to ZooKeeper (the worker writes it: user code
# may, too), each string cut to its limit.
ERROR_FIELDS = {"topology": 200, "component": 200, "error": 2000, "trace": 20000, "worker": 200}


def error_record(raw: Any, topology_id: str, node: str, port: int) -> dict[str, Any] | None:
    """A worker's error as the cluster keeps it: its known fields only, strings cut,
    and the topology the slot runs (not whichever one the line names)."""
    if not isinstance(raw, Mapping):
        return None
    out: dict[str, Any] = {k: str(raw[k])[:limit] for k, limit in ERROR_FIELDS.items() if k in raw}
    task, when = raw.get("task"), raw.get("time")
    out["task"] = task if isinstance(task, int) and not isinstance(task, bool) else None
    out["time"] = float(when) if isinstance(when, (int, float)) and not isinstance(when, bool) else None
    out["fatal"] = raw.get("fatal") is True
    return {**out, "topology_id": topology_id, "node": node, "port": port}


def write_json(path: Path, obj: Any, owner: int = -1, group: int = -1) -> None:
    """Atomically, and readable by this user only (0600 from the first byte,
    whatever a leftover temporary file had): an assignment may carry the
    Spark Connect token, secrets.json the topology's keys.  ``group``: also
    readable by that group (0640); ``owner``: the file is that user's (0600)."""
    write_private(path, json.dumps(obj), mode=0o640 if group != -1 else 0o600, owner=owner, group=group)


def private_dir(path: Path) -> Path:
    """``path`` (and missing parents) as a directory of this user's only."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)
    return path


def read_json(path: Path) -> Any:
    """A JSON file a worker may have written: never through a link (a worker run
    as another user could point one at the supervisor's keyring), only a plain file."""
    data = read_worker_file(path)
    try:
        return None if data is None else json.loads(data)
    except ValueError:
        return None


def open_plain_file(path: Path) -> int | None:
    """A read descriptor of the plain file with one name at ``path``, not reached through a
    symbolic link; None if there is no such file (a link, a second name, not there).  What a
    worker (user code) can write is opened so, not to be led to another file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        os.close(fd)
        return None
    return fd


def read_worker_file(path: Path, offset: int = 0, limit: int = -1) -> bytes | None:
    """The bytes from ``offset`` (at most ``limit``) of a plain file with one name, not
    through a symbolic link; None if it is not such a file (or not there)."""
    fd = open_plain_file(path)
    if fd is None:
        return None
    with os.fdopen(fd, "rb") as f:
        if offset:
            f.seek(offset)
        return f.read(limit)
