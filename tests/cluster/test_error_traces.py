"""A bolt that raises: the user sees the trace, with file and line, where they look --
`squall errors`, Storm's REST componentErrors, local mode's output (issue 30)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from squall.testing import poll_for
from tests.cluster.conftest import REPO, TOPOLOGIES, squall_cli

RAISING = TOPOLOGIES / "raising.py"
LINE = next(i for i, text in enumerate(RAISING.read_text().splitlines(), 1) if "RAISES HERE" in text)
WHERE = f'raising.py", line {LINE}, in process'


def test_a_bolts_trace_reaches_squall_errors_and_the_rest_answer(make_cluster: Any) -> None:
    cluster = make_cluster(supervisors=1, slots=1)
    squall_cli(cluster, "submit", str(RAISING), "--name", "raising")
    errors = poll_for(lambda: cluster.api("GET", "topology/raising/component/picky?window=600")
                      ["componentErrors"], timeout=90, message="the bolt's first error")
    assert WHERE in errors[0]["error"] and "ValueError: 0 is a multiple of five" in errors[0]["error"]
    out = squall_cli(cluster, "errors", "raising").stdout
    assert WHERE in out and "picky" in out
    assert out.count(WHERE) == 1  # each distinct trace once, however many times it was raised
    brief = squall_cli(cluster, "errors", "raising", "--brief").stdout
    assert "ValueError" in brief and WHERE not in brief


def test_local_mode_prints_each_distinct_trace_once() -> None:
    result = subprocess.run([sys.executable, "-m", "squall.cli", "local", str(RAISING), "--duration", "2"],
                            capture_output=True, text=True, timeout=120, cwd=REPO, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count(WHERE) == 1, result.stdout[-2000:]
    assert "--- error in picky" in result.stdout and "distinct (traces above)" in result.stdout
