"""Squall: Apache Storm's model, rebuilt in Python."""

from typing import TYPE_CHECKING

from squall.compiled import install as _install_compiled
from squall.lazy import lazy_exports
from squall.version import VERSION

_install_compiled()  # the hot path's Cython builds, where current (squall/compiled/)

_EXPORTS = {
    "Clock": "squall.clock",
    "FakeClock": "squall.clock",
    "FailedException": "squall.errors",
    "SquallError": "squall.errors",
    "TopologyValidationError": "squall.errors",
    "LocalCluster": "squall.local",
    "BasicBolt": "squall.topology",
    "Bolt": "squall.topology",
    "CustomGrouping": "squall.topology",
    "Grouping": "squall.topology",
    "Spout": "squall.topology",
    "Stream": "squall.topology",
    "Topology": "squall.topology",
    "Tuple": "squall.topology",
}
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
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

if TYPE_CHECKING:
    from squall.clock import Clock, FakeClock
    from squall.errors import FailedException, SquallError, TopologyValidationError
    from squall.local import LocalCluster
    from squall.topology import BasicBolt, Bolt, CustomGrouping, Grouping, Spout, Stream, Topology, Tuple

__version__ = VERSION
