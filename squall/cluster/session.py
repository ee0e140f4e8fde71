"""A daemon's ZooKeeper session, as the daemon needs to see it.

kazoo reports its connection's states (CONNECTED, SUSPENDED, LOST) to
listeners on its own thread, which must not block.  :class:`Session` turns
them into what daemons act on:

* ``lost``: the session died (its ephemeral nodes and any lock with it) and
  the daemon has not yet re-created what it owns;
* ``losses``: how many sessions died so far.  A leader's term ends when this
  changes, even if the session came back (and ``lost`` was cleared) before
  the leader looked: its lock node died with the old session;
* ``recover``: run on a thread of its own once a new session connects after a
  loss (re-register ephemeral nodes); ``lost`` clears only when it succeeds,
  and the next reconnect tries again when it fails.

No other package sees kazoo's states: they arrive here as plain strings.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import structlog
from kazoo.protocol.states import KazooState

log = structlog.get_logger("squall.cluster.session")

# kazoo's state names (KazooState's values), which :meth:`Session.handle` takes.
LOST = KazooState.LOST
SUSPENDED = KazooState.SUSPENDED
CONNECTED = KazooState.CONNECTED


def _nothing() -> None:
    return None


class Session:
    """Follows ``client``'s session; :meth:`start` before connecting the client,
    so that the first CONNECTED is seen too."""

    def __init__(self, client: Any, who: str = "squall",
                 recover: Callable[[], None] | None = None,
                 on_lost: Callable[[], None] = _nothing,
                 on_connected: Callable[[], None] = _nothing) -> None:
        self.client = client
        self.who = who
        self._recover = recover
        self._on_lost = on_lost
        self._on_connected = on_connected
        self._lost = threading.Event()
        self._closed = threading.Event()
        self.losses = 0

    @property
    def lost(self) -> bool:
        return self._lost.is_set()

    def start(self) -> None:
        self.client.add_listener(self.handle)

    def close(self) -> None:
        """No more recovery; ``lost`` stays set, so that whatever waits on the
        session (a leader's term, an election) ends."""
        self._closed.set()
        self._lost.set()

    def handle(self, state: str) -> None:
        """kazoo's listener (its thread: nothing here blocks)."""
        if state == LOST:
            self.losses += 1
            self._lost.set()
            self._on_lost()
        elif state == CONNECTED:
            if self._lost.is_set() and not self._closed.is_set():
                if self._recover is None:
                    self._lost.clear()
                else:
                    threading.Thread(target=self.recover, name=f"{self.who}-recover", daemon=True).start()
            self._on_connected()

    def recover(self) -> None:
        """Re-create what the daemon owns in ZooKeeper; ``lost`` clears on success."""
        try:
            if self._recover is not None:
                self._recover()
        except Exception:  # noqa: BLE001 - the next reconnect tries again
            log.exception("re-establishing after a lost zookeeper session failed", who=self.who)
            return
        self._lost.clear()
