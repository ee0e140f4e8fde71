"""``from streamparse.component import Component``: the older spelling (squall.compat.streamparse)."""

from squall.compat.streamparse.component import Component
from squall.compat.streamparse.component import WorkerLogHandler as StormHandler

__all__ = ["Component", "StormHandler"]
