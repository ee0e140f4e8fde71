"""Running a daemon in the foreground: signals are data, stop is orderly.

SIGTERM and SIGINT only set an event; the main thread sees it and stops
the daemon (for a supervisor: without killing its workers).
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Any, Protocol

import structlog

log = structlog.get_logger("squall.runtime.daemons")


class Daemon(Protocol):
    def start(self) -> None: ...

    def stop(self, reason: str = ...) -> None: ...


def run_foreground(daemon: Daemon, name: str) -> int:
    stop = threading.Event()
    received: list[str] = []

    def handle(signum: int, frame: Any) -> None:
        received.append(signal.Signals(signum).name)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, handle)
    # Whatever a daemon writes (state, logs, extracted code, worker secrets) is its user's only.
    os.umask(0o077)
    daemon.start()
    while not stop.wait(0.5):
        pass
    reason = received[0].lower() if received else "stop"
    log.info(f"{name} received {reason}")
    daemon.stop(reason=reason)
    return 0
