"""Word count across three languages' worth of processes:

* ``sentences``: a subprocess spout on Squall's Python adapter (resources/sentences.py);
* ``split``: a Node.js bolt (resources/splitsentence.js);
* ``count``: an ordinary in-process Squall bolt.

    squall local examples/multilang/wordcount.py --duration 10

The children run in ``resources/`` beside this file (Storm's rule: the
topology's resources directory is the working directory), and speak Storm's
multilang protocol, so the same scripts run under Apache Storm.  To split in
Python with pystorm instead, use ``script="splitsentence_pystorm.py"`` and
``command=sys.executable``.
"""

from __future__ import annotations

import shutil
import sys
from collections import Counter
from typing import Any

from squall import Bolt, Grouping, Topology
from squall.multilang import ShellBolt, ShellSpout

NODE = shutil.which("node") or "node"


class CountWords(Bolt):
    outputs = ("word", "count")

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.counts: Counter[str] = Counter()

    def process(self, tup: Any) -> None:
        word = tup.values.word
        self.counts[word] += 1
        self.emit([word, self.counts[word]])

    def process_tick(self, tup: Any) -> None:
        top = ", ".join(f"{w}={n}" for w, n in self.counts.most_common(3))
        self.logger.info("top words", top=top, distinct=len(self.counts))


class MultilangWordCount(Topology):
    config = {"topology.max.spout.pending": 1000, "topology.tick.tuple.freq.secs": 5}  # noqa: RUF012
    sentences = ShellSpout.spec(command=sys.executable, script="sentences.py", outputs=["sentence"])
    split = ShellBolt.spec(command=NODE, script="splitsentence.js", outputs=["word"], inputs=[sentences],
                           par=2)
    count = CountWords.spec(inputs={split: Grouping.fields("word")}, par=2)
