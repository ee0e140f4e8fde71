"""docs/api.md, the API guide, is accurate where it shows code: its Python blocks run, in
order, as one file (each builds on the ones above it), in local mode, and their asserts
hold (issue 30: there was no guide to Spout, Bolt, Tuple, streams and groupings)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import guide_script

REPO = Path(__file__).resolve().parents[1]
GUIDE = REPO / "docs" / "api.md"


@pytest.mark.timeout(180)
def test_the_guide_runs_as_written(tmp_path: Path) -> None:
    script = guide_script(GUIDE)
    assert script.count("complete_topology(") >= 3 and "LocalCluster()" in script
    (tmp_path / "api_guide.py").write_text(script)
    proc = subprocess.run([sys.executable, "api_guide.py"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=150, check=False)
    assert proc.returncode == 0, (f"docs/api.md's code failed (line numbers are the page's):\n"
                                  f"{proc.stderr[-4000:]}")
