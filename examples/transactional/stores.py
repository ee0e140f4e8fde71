"""Where the examples' committers keep their totals.

``--conf example.db=/path/file.sqlite`` puts them in SQLite, which every
worker of a cluster on this machine can reach and which outlives the run;
without it they stay in this process's memory (fine for ``squall local``,
where everything is one process).
"""

from __future__ import annotations

import threading
from typing import Any

from squall.state import MemoryStore, SQLiteStore, Store

_memory: dict[str, MemoryStore] = {}
_lock = threading.Lock()


def open_store(conf: dict[str, Any], namespace: str) -> Store:
    path = conf.get("example.db")
    if path:
        return SQLiteStore(path, namespace=namespace)
    with _lock:
        return _memory.setdefault(namespace, MemoryStore(namespace))
