"""What a worker process costs: CPU, memory, threads and the garbage
collector, sampled for its heartbeat (Storm's worker system metrics).

GC time is measured with ``gc.callbacks`` (start and stop of every
collection), which costs two calls per collection, not per tuple.
"""

from __future__ import annotations

import gc
import os
import threading
import time
from typing import Any

import psutil


class ProcessSampler:
    def __init__(self) -> None:
        self.process = psutil.Process(os.getpid())
        self.gc_secs = 0.0
        self._gc_started = 0.0
        self._lock = threading.Lock()
        gc.callbacks.append(self._on_gc)

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
        elif self._gc_started:
            self.gc_secs += time.perf_counter() - self._gc_started

    def close(self) -> None:
        try:
            gc.callbacks.remove(self._on_gc)
        except ValueError:
            pass

    def sample(self) -> dict[str, Any]:
        """Cumulative CPU and GC seconds (a reader makes rates), and the current memory."""
        with self._lock:
            try:
                cpu = self.process.cpu_times()
                rss = self.process.memory_info().rss
                threads = self.process.num_threads()
            except psutil.Error:
                return {}
        return {
            "cpu_secs": round(cpu.user + cpu.system, 3),
            "rss_bytes": rss,
            "threads": threads,
            "gc_collections": [s["collections"] for s in gc.get_stats()],
            "gc_secs": round(self.gc_secs, 4),
        }
