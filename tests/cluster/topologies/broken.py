"""A topology whose bolt names a class the code package does not have."""

from squall import Topology
from squall.topology.component import ComponentSpec

from durable_wordcount import DurableSentences


class Broken(Topology):
    sentences = DurableSentences.spec()
    missing = ComponentSpec("durable_wordcount:NoSuchBolt", "bolt", inputs=[sentences])
