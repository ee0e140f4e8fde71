"""A topology that runs on a package Squall does not have: ``sqdeptest``, from its
``--requirements`` (tests/cluster/test_environments.py builds its wheels).  Each
worker's bolt says which version it imported, and with which Python, in a file of
the test's directory."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import sqdeptest  # at the top: the verifier and the workers import it, in the topology's environment

from squall import Bolt, Spout, Topology


class Ticks(Spout):
    outputs = ["n"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.n = 0

    def next_tuple(self) -> None:
        if self.n < 1000:
            self.n += 1
            self.emit([self.n], tup_id=self.n)


class Version(Bolt):
    """Writes <squall.test.dir>/<topology name>-<pid>.json as it starts (in every worker:
    the spout's tuples may all go to the task beside it)."""

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        file = Path(conf["squall.test.dir"]) / f"{conf['topology.name']}-{os.getpid()}.json"
        partial = file.with_suffix(".part")  # renamed when whole: the test reads *.json any time
        partial.write_text(json.dumps({"version": sqdeptest.VERSION, "python": sys.executable,
                                       "module": sqdeptest.__file__}))
        partial.rename(file)

    def process(self, tup: Any) -> None:
        pass


class DependencyVersion(Topology):
    ticks = Ticks.spec()
    version = Version.spec(inputs=[ticks], par=2)
