"""The durable word count with a subprocess spout (Squall's Python adapter)
and a pystorm split bolt; the scripts run in resources/ beside this file."""

from __future__ import annotations

import sys

from durable_wordcount import CountWords

from squall import Grouping, Topology
from squall.multilang import ShellBolt, ShellSpout


class MultilangDurableWordCount(Topology):
    config = {"topology.max.spout.pending": 200, "topology.message.timeout.secs": 10}  # noqa: RUF012
    sentences = ShellSpout.spec(command=sys.executable, script="durable_spout.py", outputs=["id", "sentence"])
    split = ShellBolt.spec(command=sys.executable, script="split_pystorm.py", outputs=["id", "index", "word"],
                           inputs=[sentences], par=2)
    count = CountWords.spec(inputs={split: Grouping.fields("word")}, par=2)
