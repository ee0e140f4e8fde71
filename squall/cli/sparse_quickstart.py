"""``squall sparse quickstart NAME``: a new streamparse project, laid out as streamparse lays
one out (config.json, topologies/, src/bolts, src/spouts, virtualenvs/), with its word
count.  The code is plain streamparse: the same files run under ``sparse run`` on Storm.
No fabfile.py and no project.clj: there is no SSH and no JVM build here."""

from __future__ import annotations

import json
from pathlib import Path

from squall.cli.sparse_project import check_project_name
from squall.errors import SquallError

CONFIG = {
    "serializer": "json",
    "topology_specs": "topologies/",
    "virtualenv_specs": "virtualenvs/",
    "envs": {
        "prod": {
            "user": "",
            "ssh_password": "",
            "nimbus": "",
            "workers": [],
            "log": {"path": "", "max_bytes": 1000000, "backup_count": 10, "level": "info"},
            "virtualenv_root": "",
        },
    },
}

SPOUT = '''\
from itertools import cycle

from streamparse import Spout

ANIMALS = ["dog", "cat", "zebra", "elephant"]


class WordSpout(Spout):
    outputs = ["word"]

    def initialize(self, stormconf, context):
        self.words = cycle(ANIMALS)

    def next_tuple(self):
        self.emit([next(self.words)])
'''

BOLT = '''\
import os
from collections import Counter

from streamparse import Bolt


class WordCountBolt(Bolt):
    outputs = ["word", "count"]

    def initialize(self, conf, ctx):
        self.counts = Counter()
        self.seen = 0
        self.pid = os.getpid()

    def process(self, tup):
        word = tup.values[0]
        weight = 10 if word == "dog" else 1  # dogs count ten times
        self.counts[word] += weight
        self.seen += weight
        if self.seen % 1000 == 0:
            self.logger.info("counted [%s] words [pid=%s]", f"{self.seen:,}", self.pid)
        self.emit([word, self.counts[word]])
'''

TOPOLOGY = '''\
"""The quickstart's word count: a spout of animal names, counted by name."""

from bolts.wordcount import WordCountBolt
from spouts.words import WordSpout
from streamparse import Grouping, Topology


class WordCount(Topology):
    word_spout = WordSpout.spec()
    count_bolt = WordCountBolt.spec(inputs={word_spout: Grouping.fields("word")}, par=2)
'''

README = '''\
# {name}

A streamparse project.  On Squall:

    squall sparse run -t 10              # locally, for 10 seconds
    squall sparse submit                 # to the cluster in squall.yaml (or the running dev cluster)
    squall sparse list
    squall sparse tail -n wordcount
    squall sparse kill -n wordcount

`virtualenvs/wordcount.txt` lists the topology's requirements: each supervisor builds a
virtualenv of them once, and runs the topology's workers in it.
'''

FILES = {
    "config.json": json.dumps(CONFIG, indent=4) + "\n",
    "topologies/wordcount.py": TOPOLOGY,
    "src/bolts/__init__.py": "",
    "src/bolts/wordcount.py": BOLT,
    "src/spouts/__init__.py": "",
    "src/spouts/words.py": SPOUT,
    "virtualenvs/wordcount.txt": "streamparse  # every streamparse project names it; Squall provides it\n",
    ".gitignore": "logs\n_build\n_resources\n.DS_Store\n",
    "README.md": README,
}


def quickstart(name: str, parent: Path) -> Path:
    """Write the project ``name`` under ``parent``; refuses a directory that exists."""
    check_project_name(name)
    root = parent / name
    if root.exists():
        msg = f"{root} exists: a quickstart makes a new directory"
        raise SquallError(msg)
    for relative, text in FILES.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.format(name=name) if relative == "README.md" else text)
    return root
