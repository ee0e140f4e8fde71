"""What users write: components, streams, groupings and topologies."""

from squall.topology.component import BasicBolt, Bolt, ComponentSpec, Spout, Stream
from squall.topology.grouping import CustomGrouping, Grouping
from squall.topology.topology import ComponentDef, InputDef, Topology, TopologyDef
from squall.topology.tuple import Tuple

__all__ = [
    "BasicBolt",
    "Bolt",
    "ComponentDef",
    "ComponentSpec",
    "CustomGrouping",
    "Grouping",
    "InputDef",
    "Spout",
    "Stream",
    "Topology",
    "TopologyDef",
    "Tuple",
]
