"""Squall: Apache Storm's model, rebuilt in Python."""

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
__all__ = sorted(_EXPORTS)

__version__ = VERSION
