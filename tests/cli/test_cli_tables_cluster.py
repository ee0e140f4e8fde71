"""`squall info`, `monitor` and `errors` against a real dev cluster: tables a
person reads, from nimbus's Storm-shaped REST API."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from squall.cli.devcluster import DevCluster
from squall.testing import poll_for

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    c = DevCluster(tmp_path_factory.mktemp("cli") / "c", supervisors=1, slots=1,
                   conf={"nimbus.stats.freq.secs": 1})
    try:
        c.start()
        squall(c, "submit", str(REPO / "examples" / "wordcount.py"))
        yield c
    finally:
        c.stop()


def squall(cluster: DevCluster, *args: str) -> str:
    # --config before the command, as a person types it
    command = [sys.executable, "-m", "squall.cli", "--config", str(cluster.config_file), *args]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=REPO, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_info_prints_tables_with_live_numbers(cluster: DevCluster) -> None:
    def counted() -> str | None:
        out = squall(cluster, "info", "WordCount")
        row = next((line for line in out.splitlines() if line.startswith("count ")), "")
        return out if row and row.split()[2] not in ("0", "-") else None

    out = poll_for(counted, timeout=60, message="the count bolt's executed tuples in `squall info`")
    assert "topology WordCount" in out and "ACTIVE" in out
    header = next(line for line in out.splitlines() if line.startswith("bolt "))
    assert "capacity" in header and "execute ms" in header
    assert any(line.startswith("sentences ") for line in out.splitlines())
    page = json.loads(squall(cluster, "info", "WordCount", "--json", "--window", ":all-time"))
    assert page["window"] == ":all-time" and {b["boltId"] for b in page["bolts"]} == {"split", "count"}


def test_monitor_prints_throughput_and_errors_says_none(cluster: DevCluster) -> None:
    out = squall(cluster, "monitor", "WordCount", "-c", "sentences", "-i", "1", "--count", "1")
    assert "sentences" in out and "/s acked" in out
    assert squall(cluster, "errors", "WordCount").strip() == "no errors reported"
