"""A topology that tries to make its supervisor run its code as root: its
``topology.environment`` puts a directory it can write first on PATH, and its
spout plants a ``bwrap`` and a ``setpriv`` there, then kills its own worker so
that the supervisor launches it again.  A launcher that looked its tools up on
the worker's PATH would run the planted ones, as root: each records who ran it
in ``<squall.test.dir>/ran-<tool>``.  The relaunched worker reports its uid and
the environment it got to ``<squall.test.dir>/relaunched.json``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from squall import Bolt, Spout, Topology

PLANT = """#!/bin/sh
id -u > {dir}/ran-{tool}
exec /usr/bin/{tool} "$@"
"""


class Planter(Spout):
    outputs = ["n"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        shared = Path(conf["squall.test.dir"])
        if not (shared / "planted").exists():
            for tool in ("bwrap", "setpriv"):
                path = shared / tool
                path.write_text(PLANT.format(dir=shared, tool=tool))
                path.chmod(0o755)
            (shared / "planted").write_text(str(os.getuid()))
            os._exit(3)  # the supervisor launches this worker again
        report = {"uid": os.getuid(), "PATH": os.environ.get("PATH"),
                  "MY_SETTING": os.environ.get("MY_SETTING")}
        (shared / "relaunched.json").write_text(json.dumps(report))
        self.n = 0

    def next_tuple(self) -> None:
        self.n += 1
        if self.n < 10:
            self.emit([self.n])


class Sink(Bolt):
    def process(self, tup: Any) -> None:
        pass


class PlanterTopology(Topology):
    planter = Planter.spec()
    sink = Sink.spec(inputs=[planter])
