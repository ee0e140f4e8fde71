"""``from streamparse.dsl import Topology``: the DSL's own spelling (squall.compat.streamparse)."""

from squall.compat.streamparse.dsl import Grouping, Stream
from squall.topology.topology import Topology

__all__ = ["Grouping", "Stream", "Topology"]
