"""Rotating the keyring's secrets while a topology runs: nothing stops, nothing is lost.

A user's token (nimbus re-reads the keyring, no restart), then ZooKeeper's
password (daemons restarted one by one with the rotated keyring; the leading
nimbus re-ACLs the tree; running workers keep their topology's CURVE key, and
a worker killed afterwards is relaunched by a supervisor that reads its keys
with the new password)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from squall.security.keyring import Keyring
from squall.testing import poll_for, wait_for_progress
from tests.cluster.conftest import WordCountRun


def secrets(cluster: Any, *args: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "squall.cli", "--config", str(cluster.config_file),
                           "secrets", *args], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def status_with(cluster: Any, token: str) -> int:
    return cluster.request("GET", cluster.nimbus_url + "/api/v1/cluster/summary", token=token).status_code


def bump_mtime(path: Path) -> None:
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def test_tokens_and_zookeeper_password_rotate_under_a_running_topology(make_cluster: Any,
                                                                       tmp_path: Path) -> None:
    cluster = make_cluster(supervisors=1, slots=2)
    # 20 s of sentences at 400/s: the rotation, and the worker killed after it, come while
    # there is still work to do (with 3,000 a fast machine had acked them all before).
    run = WordCountRun(tmp_path / "wc", sentences=8000)
    run.submit(cluster, "rot", "topology.workers=2", "squall.test.rate=400")
    poll_for(lambda: len(run.acked()) > 200, timeout=60, message="processing started")

    # A token: the old one works until retired, the new one at once, nimbus never restarted.
    old = Keyring.load(cluster.keyring_file).client_token
    secrets(cluster, "user", "rotate", "admin")
    bump_mtime(cluster.keyring_file)
    new = Keyring.load(cluster.keyring_file).client_token
    assert new != old
    assert status_with(cluster, old) == status_with(cluster, new) == 200
    secrets(cluster, "user", "retire", "admin")
    bump_mtime(cluster.keyring_file)
    assert status_with(cluster, old) == 401 and status_with(cluster, new) == 200

    # ZooKeeper's password, with the daemons restarted one at a time.
    workers = dict(cluster.worker_pids())
    secrets(cluster, "rotate-zookeeper")
    cluster.kill_process("supervisor-0", "term")
    cluster.start_supervisor(0)
    cluster.wait_ready(60)
    cluster.kill_process("nimbus-0", "term")
    cluster.start_nimbus(0)
    cluster.wait_ready(60)
    assert cluster.worker_pids() == workers  # the running workers were never touched
    before = len(run.acked())
    # (a busy machine took more than a fixed 60 s here: wait while it progresses, issue 30)
    assert before + 200 < len(run.sentences), "every sentence was done before the rotation: too few"
    wait_for_progress(lambda: len(run.acked()), before + 200, stall=60,
                      message="processing after the rotation")
    # A worker dies: its supervisor relaunches it with the topology's key, read under the new password.
    victim = next(iter(workers.values()))
    psutil.Process(victim).kill()
    poll_for(lambda: len(cluster.worker_pids()) == 2 and victim not in cluster.worker_pids().values(),
             timeout=60, message="the worker relaunched")
    wait_for_progress(lambda: len(run.acked()), len(run.sentences), stall=60, message="every sentence acked")
    assert run.counts() == run.expected
    # Only the new password opens ZooKeeper now that the tree was re-ACL'd... and the previous
    # one still does until it is rotated out (both are in the ACL).
    keyring = Keyring.load(cluster.keyring_file)
    assert len(keyring.zookeeper_credentials()) == 2


@pytest.fixture(autouse=True)
def _no_leftover_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SQUALL_KEYRING", raising=False)
