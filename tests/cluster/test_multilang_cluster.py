"""Multilang on the cluster: a subprocess spout and a pystorm split bolt in
worker processes on two nodes, exact counts, and a SIGKILLed worker loses
nothing and leaves no child behind."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path
from typing import Any

import psutil

from squall.testing import poll_for
from tests.cluster.conftest import TOPOLOGIES, WordCountRun, squall_cli


def test_multilang_word_count_on_the_cluster_is_exact(make_cluster: Any, tmp_path: Path) -> None:
    cluster = make_cluster(supervisors=2, slots=2)
    run = WordCountRun(tmp_path / "wc", sentences=600)
    squall_cli(cluster, "submit", str(TOPOLOGIES / "multilang_wordcount.py"), "--name", "ml",
               "--conf", f"squall.test.dir={run.dir}", "--conf", "topology.workers=2")
    poll_for(lambda: len(cluster.worker_pids()) == 2, timeout=30, message="2 workers up")
    # the shell components run as children of the worker processes
    def shell_children() -> bool:
        children = [c for pid in cluster.worker_pids().values() for c in psutil.Process(pid).children()]
        return any("split_pystorm.py" in " ".join(c.cmdline()) for c in children)

    poll_for(shell_children, timeout=30, message="pystorm children under the workers")
    poll_for(lambda: len(run.acked()) > 100, timeout=60, message="processing started")
    # a worker is SIGKILLed with its children stopped (SIGSTOP: they cannot see their
    # stdin close and leave on their own, as a hung child would not)
    slot, pid = min(cluster.worker_pids().items())
    children = psutil.Process(pid).children()
    assert children
    try:
        for child in children:
            child.send_signal(signal.SIGSTOP)
        os.kill(pid, signal.SIGKILL)
        # the supervisor relaunches the worker and kills the children it left (their pid files)
        poll_for(lambda: cluster.worker_pids().get(slot) not in (None, pid), timeout=30, message="relaunched")
        poll_for(lambda: not any(_alive(c) for c in children), timeout=10,
                 message="the orphaned children killed")
    finally:
        for child in children:  # whatever happened above, no stopped process outlives the test
            with contextlib.suppress(psutil.Error):
                child.kill()
    # and the source replays what the dead worker had in flight
    poll_for(run.done, timeout=120, message="all sentences acked")
    assert run.counts() == run.expected


def _alive(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
