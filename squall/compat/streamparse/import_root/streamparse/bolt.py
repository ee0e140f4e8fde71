"""``from streamparse.bolt import Bolt``: the older spelling (squall.compat.streamparse)."""

from squall.compat.streamparse.bolt import (
    BatchingBolt,
    Bolt,
    JavaBolt,
    ShellBolt,
    TicklessBatchingBolt,
    TicksBolt,
)

__all__ = ["BatchingBolt", "Bolt", "JavaBolt", "ShellBolt", "TicklessBatchingBolt", "TicksBolt"]
