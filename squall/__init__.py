"""Squall: Apache Storm's model, rebuilt in Python."""

from squall.clock import Clock, FakeClock
from squall.errors import FailedException, SquallError, TopologyValidationError
from squall.local import LocalCluster
from squall.topology import (
    BasicBolt,
    Bolt,
    CustomGrouping,
    Grouping,
    Spout,
    Stream,
    Topology,
    Tuple,
)

__all__ = [
    "BasicBolt",
    "Bolt",
    "Clock",
    "CustomGrouping",
    "FailedException",
    "FakeClock",
    "Grouping",
    "LocalCluster",
    "Spout",
    "SquallError",
    "Stream",
    "Topology",
    "TopologyValidationError",
    "Tuple",
]

__version__ = "0.1.0"
