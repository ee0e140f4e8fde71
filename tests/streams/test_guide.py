"""docs/streams.md is accurate where it shows code: its Python blocks run, in order, as one
file, in local mode, and their asserts hold; and each example under examples/streams
loads as `squall local` loads it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from squall.cli.args import load_topology
from tests.helpers import guide_script

REPO = Path(__file__).resolve().parents[2]
GUIDE = REPO / "docs" / "streams.md"
EXAMPLES = REPO / "examples" / "streams"


@pytest.mark.timeout(180)
def test_the_guide_runs_as_written(tmp_path: Path) -> None:
    script = guide_script(GUIDE)
    assert script.count("complete_topology(") >= 6
    (tmp_path / "streams_guide.py").write_text(script)
    proc = subprocess.run([sys.executable, "streams_guide.py"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=150, check=False)
    assert proc.returncode == 0, (f"docs/streams.md's code failed (line numbers are the page's):\n"
                                  f"{proc.stderr[-4000:]}")


@pytest.mark.parametrize(("example", "bolts"), [
    ("wordcount", {"bolt1"}),
    ("windowed_wordcount", {"bolt1", "bolt2"}),
    ("join", {"bolt1", "bolt2", "bolt3"}),
    ("state_query", {"bolt1", "bolt2", "state1"}),
    ("branch", {"bolt1"}),
    ("typed_tuples", {"bolt1", "bolt2"}),
])
def test_each_example_loads_as_squall_local_loads_it(example: str, bolts: set[str]) -> None:
    topology = load_topology(str(EXAMPLES / f"{example}.py"))
    definition = topology.definition()
    assert definition.name == f"{example}_builder"  # <file stem>_<variable>: its state's name
    generated = {c.name for c in definition.components.values()
                 if c.kind == "bolt" and c.options.get("operations")}
    assert generated == bolts


@pytest.mark.timeout(120)
def test_the_join_example_prints_storms_answers() -> None:
    proc = subprocess.run([sys.executable, "-m", "squall.cli", "local", str(EXAMPLES / "join.py"),
                           "--duration", "7"], capture_output=True, text=True, timeout=100, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = set(proc.stdout.splitlines())
    assert {"(1, (1, 1))", "(2, (4, 8))", "(3, (9, 27))"} <= lines
