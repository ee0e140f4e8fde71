"""docs/flux.md's commands run as written, and its error example is real."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.flux.helpers import BASE, error_of, write

REPO = Path(__file__).resolve().parents[2]
README = REPO / "docs" / "flux.md"


def sh_blocks() -> list[list[str]]:
    blocks = re.findall(r"^```sh\n(.*?)^```", README.read_text(), re.DOTALL | re.MULTILINE)
    return [[line for line in b.splitlines() if line.strip() and not line.startswith("#")] for b in blocks]


@pytest.mark.timeout(90)
def test_the_first_commands_run_as_written(tmp_path: Path) -> None:
    # In a fresh directory holding the repository's examples/ and the virtualenv
    # (the second block needs the dev cluster: tests/flux/test_cluster.py submits the same way)
    (tmp_path / "examples").symlink_to(REPO / "examples")
    (tmp_path / ".venv").symlink_to(REPO / ".venv" if (REPO / ".venv").exists() else Path(sys.prefix))
    lines = sh_blocks()[0]
    assert len(lines) == 3
    for line in lines:
        proc = subprocess.run(["bash", "-c", line], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                              env=os.environ, check=False)
        assert proc.returncode == 0, f"{line}\n{proc.stdout}\n{proc.stderr}"
        assert "Traceback" not in proc.stderr, proc.stderr
        if " local " in line:
            stats = proc.stdout.rsplit("--- ", 1)[-1].splitlines()[1:]
            count = next(row.split() for row in stats if row.startswith("count "))
            assert int(count[2]) > 0 and count[4] == "0", proc.stdout  # executed, and nothing failed
        else:
            assert proc.stdout.startswith("topology WordCount (from examples/flux/wordcount.yaml)\n")


@pytest.mark.timeout(10)
def test_the_error_example_is_what_squall_says(tmp_path: Path) -> None:
    shown = re.search(r"^squall: error: (topology\.yaml:.*)$", README.read_text(), re.MULTILINE)
    assert shown is not None
    path = write(tmp_path, BASE.replace("type: FIELDS", "type: FIELDZ"))
    assert error_of(path) == f"{tmp_path}/{shown.group(1)}"
