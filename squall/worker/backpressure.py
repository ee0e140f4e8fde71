"""A worker's backpressure: raised by its congested queues (squall.worker.executors.queues)
and by its peers' reports (squall.worker.wire.transfer), read by its spouts.  Apart from
both so that the wire and the executors each stand on it, not on each other."""

from __future__ import annotations

import threading
from collections.abc import Callable


class Backpressure:
    """How many queues of this worker are congested; spouts read ``active``.

    ``on_change(congested)`` is called when the worker as a whole turns
    congested or uncongested, in order, under a lock: it must only signal
    (the transfer layer tells the peer workers from its own thread).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.congested = 0
        # Set by the transfer layer when remote workers report congestion.
        self.remote = False
        self.on_change: Callable[[bool], None] | None = None

    def raise_(self) -> None:
        with self._lock:
            self.congested += 1
            if self.congested == 1 and self.on_change is not None:
                self.on_change(True)

    def lower(self) -> None:
        with self._lock:
            self.congested -= 1
            if self.congested == 0 and self.on_change is not None:
                self.on_change(False)

    @property
    def active(self) -> bool:
        return self.congested > 0 or self.remote
