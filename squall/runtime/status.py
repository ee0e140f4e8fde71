"""Where a daemon, a worker or a child server is in its life: one set of names for all."""

from __future__ import annotations

import enum


class Status(enum.Enum):
    INIT = "init"
    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"
    FAILED = "failed"
