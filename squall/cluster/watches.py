"""Watches on ZooKeeper nodes, on kazoo's recipes, stoppable.

kazoo calls a watch's function at once with what is there, then after every
change, on its own thread (which must not block), and re-arms the watch on a
new session after a lost one.  A watch ends when its function returns False:
:meth:`stop` makes the next call do so.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class ChildrenWatch:
    """``on_change(children)`` now and whenever the children of ``path`` change."""

    def __init__(self, client: Any, path: str, on_change: Callable[[list[str]], None]) -> None:
        self.path = path
        self._on_change = on_change
        self._stopped = threading.Event()
        self._recipe = client.ChildrenWatch(path, self._fire)

    def _fire(self, children: list[str]) -> bool:
        if self._stopped.is_set():
            return False
        self._on_change(children)
        return not self._stopped.is_set()

    def stop(self) -> None:
        self._stopped.set()


class DataWatch:
    """``on_change(data)`` now and whenever the data of ``path`` changes (None: no node)."""

    def __init__(self, client: Any, path: str, on_change: Callable[[bytes | None], None]) -> None:
        self.path = path
        self._on_change = on_change
        self._stopped = threading.Event()
        self._recipe = client.DataWatch(path, self._fire)

    def _fire(self, data: bytes | None, _stat: Any) -> bool:
        if self._stopped.is_set():
            return False
        self._on_change(data)
        return not self._stopped.is_set()

    def stop(self) -> None:
        self._stopped.set()
