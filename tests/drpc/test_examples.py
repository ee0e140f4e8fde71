"""examples/drpc/exclamation.py, the function docs/drpc.md calls, runs as its docstring says."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from squall.cli.args import load_topology

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "drpc" / "exclamation.py"


@pytest.mark.timeout(120)
def test_the_exclamation_example_answers_in_local_mode_and_loads_for_submit() -> None:
    proc = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=100,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    answers = [line for line in proc.stdout.splitlines() if line.startswith("exclamation ")]
    assert answers == ['exclamation "hello" => "hello!"', 'exclamation "goodbye" => "goodbye!"']
    topology = load_topology(str(EXAMPLE))
    spout = topology.definition().components["spout"]
    assert spout.options["function"] == "exclamation"
