"""The commands of the windowing, state and compiled hot path pages (docs/, moved there
from the README) run as written, from the repository's root as a reader would, and show
what the pages say.  docs/flux.md's commands: tests/flux/test_readme.py."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
from contextlib import closing
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def section_commands(page: str, title: str) -> list[str]:
    text = (REPO / page).read_text()
    section = text[text.index(f"## {title}\n"):]
    end = section.find("\n## ", 3)
    section = section if end < 0 else section[:end]
    blocks = re.findall(r"^```sh\n(.*?)^```", section, re.DOTALL | re.MULTILINE)
    assert blocks, f"no sh block in {page}'s {title!r}"
    return [line for block in blocks for line in block.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def run(line: str, home: Path | None = None) -> str:
    env = {**os.environ, "HOME": str(home)} if home is not None else None
    proc = subprocess.run(["bash", "-c", line], cwd=REPO, capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, f"{line}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    return proc.stdout + proc.stderr


@pytest.mark.timeout(90)
def test_the_windowing_example_runs_and_emits_windows() -> None:
    (line,) = section_commands("docs/windowing.md", "Windowed bolts")
    out = run(line)
    assert "sliding" in out and "tumbling" in out, out[-2000:]


@pytest.mark.timeout(90)
def test_the_stateful_word_count_runs_and_a_second_run_resumes(tmp_path: Path) -> None:
    (line,) = section_commands("docs/state.md", "Stateful bolts with checkpoints")
    # HOME: the SQLite state goes to ~/.squall/state, here a directory of the test's own
    run(line, home=tmp_path)
    (db,) = (tmp_path / ".squall" / "state").glob("*.sqlite")
    first = committed_words(db)
    run(line, home=tmp_path)
    assert committed_words(db) > first > 0  # counted on from the first run's commit


def committed_words(db: Path) -> int:
    """The words the counting tasks' last committed checkpoints hold."""
    with closing(sqlite3.connect(db)) as conn:
        rows = conn.execute("SELECT value FROM squall_state WHERE key LIKE 'count/%/committed'").fetchall()
    return sum(sum(json.loads(value)["data"].values()) for (value,) in rows if json.loads(value))


@pytest.mark.timeout(120)
def test_the_compiled_hot_path_commands_run_and_agree() -> None:
    build, status, version = section_commands("docs/performance.md", "The compiled hot path")
    from squall import compiled

    n = len(compiled.MODULES)
    assert f"up to date {n} of {n}" in run(build)  # the bootstrap built them all
    listed = run(status)
    assert listed.count(" built\n") == n and "stale" not in listed
    assert f"hot path compiled: {n} of {n} modules" in run(version)
