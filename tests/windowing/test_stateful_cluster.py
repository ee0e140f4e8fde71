"""A persisted stateful window on the dev cluster (2 supervisors, SQLite state):
a window longer than the message timeout survives a SIGKILL of its worker."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from squall.testing import poll_for
from tests.cluster.conftest import busy_workers, squall_cli
from tests.windowing.topologies.stateful_window import WINDOW

TOPOLOGY = Path(__file__).resolve().parent / "topologies" / "stateful_window.py"
RATE = 100  # a window of WINDOW tuples takes WINDOW / RATE = 7 s, over the 6 s message timeout
N = 2 * WINDOW

pytestmark = pytest.mark.timeout(90)


def committed(db: Path, key: str) -> dict[str, Any]:
    if not db.exists():
        return {}
    try:
        with closing(sqlite3.connect(db, timeout=10)) as conn:
            rows = conn.execute("SELECT value FROM squall_state WHERE key LIKE ?", (key,)).fetchall()
    except sqlite3.OperationalError:
        return {}  # the worker is creating the table
    out: dict[str, Any] = {}
    for (value,) in rows:
        record = json.loads(value)
        if record:
            out.update(record["data"])
    return out


def test_a_persisted_window_longer_than_the_timeout_survives_a_worker_kill(make_cluster: Any,
                                                                          tmp_path: Path) -> None:
    # Given the persisted window on a 2-node cluster, one worker running spout and window
    cluster = make_cluster(supervisors=2, slots=1)
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    squall_cli(cluster, "submit", str(TOPOLOGY), "--topology", "PersistedWindow", "--name", "pw",
               "--conf", f"squall.test.dir={tmp_path}", "--conf", f"squall.state.dir={state_dir}",
               "--conf", f"squall.test.n={N}", "--conf", f"squall.test.rate={RATE}",
               "--conf", "topology.workers=1")
    db = state_dir / "PersistedWindow.sqlite"

    def buffered() -> int:
        return len((committed(db, "sums/%/window/committed").get("buffer") or {}).get("ts", []))

    # When its worker is SIGKILLed with part of the first window only in the checkpoint
    poll_for(lambda: buffered() >= 200, timeout=30, message="a partly filled window committed")
    [(slot, pid)] = busy_workers(cluster, "pw").items()
    os.kill(pid, signal.SIGKILL)
    poll_for(lambda: cluster.worker_pids().get(slot) not in (None, pid), timeout=30,
             message="the worker restarted")
    # Then both windows come out whole, each number in exactly one window, once
    want = [sum(range(0, WINDOW)), sum(range(WINDOW, N))]
    poll_for(lambda: len(committed(db, "sums/%/committed").get("sums", [])) >= 2, timeout=40,
             message="both windows committed")
    assert committed(db, "sums/%/committed")["sums"] == want
    restores = (tmp_path / "restores.log").read_text().split()
    assert len(restores) >= 2 and int(restores[-1]) >= 200  # resumed after the saved window, not from 0
