"""A spout whose first acked tuple is noted, with the time, in <squall.test.dir>/<topology
name>.ack (benchmarks/envs.py: from submit to the first ack).  Its bolt imports every module
``squall.bench.imports`` names (the topology's own dependencies) before it acks anything."""

from __future__ import annotations

import importlib
import time
from pathlib import Path
from typing import Any

from squall import Bolt, Spout, Topology


class Numbers(Spout):
    outputs = ["n"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.n = 0
        self.file = Path(conf["squall.test.dir"]) / f"{conf['topology.name']}.ack"

    def next_tuple(self) -> None:
        if self.n < 100_000:
            self.n += 1
            self.emit([self.n], tup_id=self.n)

    def ack(self, tup_id: Any) -> None:
        if not self.file.exists():
            self.file.write_text(repr(time.time()))


class Imports(Bolt):
    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        for name in conf.get("squall.bench.imports") or []:
            importlib.import_module(name)

    def process(self, tup: Any) -> None:
        pass


class FirstAck(Topology):
    numbers = Numbers.spec()
    imports = Imports.spec(inputs=[numbers])
