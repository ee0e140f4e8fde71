"""An executor's receive queue: control before data, data bounded.

Producers append whole batches (lists of tuples), never single tuples, so
every lock and wake-up here is paid once per batch.  Control messages (acker
traffic, ticks, activate/deactivate) have a queue of their own that is
always served first and never bounded: an acker <-> spout cycle cannot
deadlock behind data.  Data is bounded softly: above the high watermark the
queue raises the worker's backpressure and spouts stop calling next_tuple;
below the low watermark it lowers it again (squall.worker.backpressure).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

from squall.worker.backpressure import Backpressure


class ExecutorQueue:
    __slots__ = ("_bp", "_lock", "congested", "congested_secs", "congested_since", "control", "data", "high",
                 "low", "size", "wakeup")

    def __init__(self, capacity: int, backpressure: Backpressure) -> None:
        self.data: deque[tuple[int, list[Any]]] = deque()
        self.control: deque[tuple[str, int, Any]] = deque()
        self.size = 0
        self.high = capacity
        self.low = capacity // 2
        self.congested = False
        # Time spent over the high-water mark (its spouts held back): a statistic,
        # so real time, read on the congestion transitions only.
        self.congested_secs = 0.0
        self.congested_since = 0.0
        self._lock = threading.Lock()
        self._bp = backpressure
        self.wakeup = threading.Event()

    def put_data(self, task: int, tuples: list[Any]) -> None:
        with self._lock:
            self.data.append((task, tuples))
            self.size += len(tuples)
            if self.size > self.high and not self.congested:
                self.congested = True
                self.congested_since = time.monotonic()
                self._bp.raise_()
        self.wakeup.set()

    def put_control(self, kind: str, task: int, payload: Any) -> None:
        self.control.append((kind, task, payload))
        self.wakeup.set()

    def pop_data(self) -> tuple[int, list[Any]] | None:
        if not self.data:
            return None
        with self._lock:
            item = self.data.popleft()
            self.size -= len(item[1])
            if self.congested and self.size <= self.low:
                self.congested = False
                self.congested_secs += time.monotonic() - self.congested_since
                self._bp.lower()
        return item

    def backpressure_secs(self) -> float:
        """Seconds this queue has spent congested, the current stretch included."""
        extra = time.monotonic() - self.congested_since if self.congested else 0.0
        return self.congested_secs + extra

    def empty(self) -> bool:
        return not self.data and not self.control

    def release(self) -> None:
        """Drop everything (the executor is gone) and lower backpressure it raised."""
        with self._lock:
            self.data.clear()
            self.control.clear()
            self.size = 0
            if self.congested:
                self.congested = False
                self._bp.lower()
