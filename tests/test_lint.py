"""Lint is part of the test command, so CI enforces it: ruff (the version pinned in the
``test`` extra, rules in pyproject.toml) must find nothing in the tree."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_finds_nothing() -> None:
    cmd = [sys.executable, "-m", "ruff", "check", "squall", "tests", "benchmarks", "examples"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
