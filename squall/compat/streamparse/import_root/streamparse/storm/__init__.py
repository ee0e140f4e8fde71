"""``from streamparse.storm import Bolt, Spout``: the older spelling (squall.compat.streamparse)."""

from squall.compat.streamparse.bolt import BatchingBolt, Bolt, JavaBolt, ShellBolt, TicklessBatchingBolt
from squall.compat.streamparse.component import Component
from squall.compat.streamparse.component import WorkerLogHandler as StormHandler
from squall.compat.streamparse.spout import JavaSpout, ReliableSpout, ShellSpout, Spout
from squall.topology.tuple import Tuple

__all__ = ["BatchingBolt", "Bolt", "Component", "JavaBolt", "JavaSpout", "ReliableSpout", "ShellBolt",
           "ShellSpout", "Spout", "StormHandler", "TicklessBatchingBolt", "Tuple"]
