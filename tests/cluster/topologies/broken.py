"""A topology whose bolt names a class the code package does not have."""

from durable_wordcount import DurableSentences

from squall import Topology
from squall.topology.component import ComponentSpec


class Broken(Topology):
    sentences = DurableSentences.spec()
    missing = ComponentSpec("durable_wordcount:NoSuchBolt", "bolt", inputs=[sentences])
