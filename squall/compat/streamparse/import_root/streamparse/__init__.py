"""streamparse's API as Squall runs it: see squall.compat.streamparse and docs/streamparse.md.

Importable only in code Squall runs (a topology's workers, ``squall local``/``submit``
loading a topology file, nimbus's verifier).
"""

import logging

from squall.compat.streamparse import (
    BatchingBolt,
    Bolt,
    Grouping,
    JavaBolt,
    JavaSpout,
    ReliableSpout,
    ShellBolt,
    ShellSpout,
    Spout,
    Stream,
    TicklessBatchingBolt,
    TicksBolt,
    Topology,
    Tuple,
)
from squall.compat.streamparse import WorkerLogHandler as StormHandler

from . import bolt, component, dsl, spout, storm

# As streamparse does: no "No handlers could be found" for the package's own logger.
logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = [
    "BatchingBolt",
    "Bolt",
    "Grouping",
    "JavaBolt",
    "JavaSpout",
    "ReliableSpout",
    "ShellBolt",
    "ShellSpout",
    "Spout",
    "StormHandler",
    "Stream",
    "TicklessBatchingBolt",
    "TicksBolt",
    "Topology",
    "Tuple",
    "bolt",
    "component",
    "dsl",
    "spout",
    "storm",
]
