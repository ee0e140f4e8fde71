"""streamparse (3.x/4.x) projects run by Squall in-process: their spouts and bolts run in
the worker's executor threads, not as pystorm subprocesses (docs/streamparse.md).

A project keeps writing ``from streamparse import Bolt, Topology, ...``: the name
``streamparse`` is importable only by code Squall runs (workers, ``squall local``
and ``submit`` loading a file, nimbus's verifier), whose import path gets
:data:`IMPORT_ROOT` through the ``squall.import_roots`` entry point
(squall.plugins).  It is never installed as a top-level package, so a real
streamparse elsewhere is not shadowed.
"""

from pathlib import Path

from squall.compat.streamparse.bolt import (
    BatchingBolt,
    Bolt,
    JavaBolt,
    ShellBolt,
    TicklessBatchingBolt,
    TicksBolt,
)
from squall.compat.streamparse.component import Component, WorkerLogHandler
from squall.compat.streamparse.dsl import Grouping, Stream
from squall.compat.streamparse.spout import JavaSpout, ReliableSpout, ShellSpout, Spout
from squall.topology.topology import Topology
from squall.topology.tuple import Tuple

# The directory holding the small ``streamparse`` package that re-exports these.
IMPORT_ROOT = str(Path(__file__).resolve().parent / "import_root")

__all__ = [
    "IMPORT_ROOT",
    "BatchingBolt",
    "Bolt",
    "Component",
    "Grouping",
    "JavaBolt",
    "JavaSpout",
    "ReliableSpout",
    "ShellBolt",
    "ShellSpout",
    "Spout",
    "Stream",
    "TicklessBatchingBolt",
    "TicksBolt",
    "Topology",
    "Tuple",
    "WorkerLogHandler",
]
