"""The worker's collector tuning: a higher gen-0 threshold unless the user set one,
and the startup heap frozen once the worker is up."""

from __future__ import annotations

import functools
import gc
from collections.abc import Iterator

import pytest

from squall import LocalCluster, Topology
from squall.local import runner as runner_module
from squall.testing import poll_for
from squall.worker.gc_tuning import CPYTHON_DEFAULT_GEN0, freeze_startup_objects, tune_gc
from squall.worker.worker import Worker
from tests.helpers import Journal, numbers_spout


@pytest.fixture
def restore_gc() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.set_threshold(*threshold)
    gc.unfreeze()


def test_the_default_threshold_is_raised_and_stays_squalls(restore_gc: None) -> None:
    gc.set_threshold(CPYTHON_DEFAULT_GEN0, 10, 10)
    assert tune_gc(50_000) is True
    assert gc.get_threshold() == (50_000, 10, 10)
    # a second worker of the same process (local mode) finds it Squall's
    assert tune_gc(50_000) is True


def test_a_threshold_the_user_chose_is_left_alone(restore_gc: None) -> None:
    gc.set_threshold(1234, 10, 10)
    assert tune_gc(50_000) is False
    assert gc.get_threshold() == (1234, 10, 10)
    gc.set_threshold(CPYTHON_DEFAULT_GEN0, 10, 10)
    assert tune_gc(0) is False  # worker.gc.gen0.threshold: 0 turns the tuning off
    assert gc.get_threshold()[0] == CPYTHON_DEFAULT_GEN0


def test_frozen_startup_objects_are_out_of_the_collectors_scans(restore_gc: None) -> None:
    startup = [[i] for i in range(10_000)]  # what a component's initialize built
    before = gc.get_freeze_count()
    freeze_startup_objects()
    assert gc.get_freeze_count() >= before + len(startup)
    scanned = {id(o) for o in gc.get_objects()}
    assert not any(id(o) in scanned for o in startup)


def test_a_cluster_worker_freezes_its_heap_once_ready_and_local_mode_never(
        restore_gc: None, monkeypatch: pytest.MonkeyPatch) -> None:
    class T(Topology):
        numbers = numbers_spout(Journal(), 10, reliable=True).spec()

    def run(owns_process: bool) -> int:
        gc.unfreeze()
        gc.set_threshold(CPYTHON_DEFAULT_GEN0, 10, 10)
        if owns_process:  # what squall.worker.process.lifecycle builds: a worker alone in its process
            monkeypatch.setattr(runner_module, "Worker", functools.partial(Worker, owns_process=True))
        with LocalCluster() as cluster:
            runner = cluster.submit("t", T)
            poll_for(lambda: all(w.ready.is_set() for w in runner.workers if w), message="worker ready")
            assert gc.get_threshold()[0] == 50_000
            return gc.get_freeze_count()

    # Local mode runs topologies in a process that outlives them: nothing is frozen
    assert run(owns_process=False) == 0
    # A cluster worker's process is its own: its startup heap is frozen once it is ready
    assert run(owns_process=True) > 0
