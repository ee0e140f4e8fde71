"""``squall local --requirements``: the topology runs with its environment's Python, built
once and then taken from the cache (squall.cli.environments)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.helpers import make_wheel

REPO = Path(__file__).resolve().parents[2]
TOPOLOGY = '''
from typing import Any
from squall import Bolt, Spout, Topology

class Once(Spout):
    outputs = ["n"]
    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        import sys
        import sqdeptest  # only in the environment
        print("sqdeptest", sqdeptest.VERSION, "python", sys.executable, flush=True)
    def next_tuple(self) -> None:
        pass

class Sink(Bolt):
    def process(self, tup: Any) -> None:
        pass

class VersionTopology(Topology):
    once = Once.spec()
    sink = Sink.spec(inputs=[once])
'''


def test_local_mode_runs_in_the_topologys_environment(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    make_wheel(wheels, "sqdeptest", "2.0")
    (tmp_path / "topology.py").write_text(TOPOLOGY)
    requirements = "--no-index\n--find-links wheels\nsqdeptest==2.0\nstreamparse\n"
    (tmp_path / "requirements.txt").write_text(requirements)
    env = {**os.environ, "SQUALL_ENV_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(REPO)}

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "squall.cli", "local", "topology.py", "--requirements",
                               "requirements.txt", "--duration", "0.5", "--cpu", "none"],
                              capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env, check=True)

    first = run()
    assert "building environment" in first.stdout and "(1 requirement)... done in" in first.stdout
    assert "streamparse: provided by Squall" in first.stderr
    line = next(x for x in first.stdout.splitlines() if x.startswith("sqdeptest"))
    assert line.split()[1] == "2.0"
    assert line.split()[3].startswith(str(tmp_path / "cache"))
    second = run()
    assert "cached" in second.stdout and "building" not in second.stdout
    assert "sqdeptest 2.0" in second.stdout
