"""The leak check itself (tests/leaks.py): what a test starts and leaves is
reported; what ends within the bound, or belongs to a process that was there
before, is not.  Each test cleans up after itself, for the real check."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests import leaks


def test_a_thread_left_running_is_reported_by_name() -> None:
    before = leaks.Snapshot.take()
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, name="left-running")
    thread.start()
    try:
        found = leaks.settle(before, bound=0.2)
        assert found.threads == [thread]
        assert "threads still running: left-running" in found.describe()
    finally:
        stop.set()
        thread.join()
    assert not leaks.settle(before, bound=1)


def test_a_child_process_left_running_is_reported_and_killed() -> None:
    before = leaks.Snapshot.take()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        found = leaks.settle(before, bound=0.2)
        assert [p.pid for p in found.children] == [child.pid]
        assert f"child process still running: pid {child.pid}: {sys.executable} -c" in found.describe()
        leaks.clean_up(found)  # killed and reaped at once
        assert not leaks.leftovers(before)
    finally:
        child.kill()
        child.wait()
    assert not leaks.settle(before, bound=1)


def test_a_file_descriptor_left_open_is_reported_with_its_target(tmp_path: Path) -> None:
    before = leaks.Snapshot.take()
    fd = os.open(str(tmp_path / "kept"), os.O_CREAT | os.O_WRONLY)
    try:
        found = leaks.settle(before, bound=0.2)
        assert found.fds == {fd: str(tmp_path / "kept")}
    finally:
        os.close(fd)
    assert not leaks.settle(before, bound=1)


def test_what_ends_within_the_bound_is_waited_for_not_reported() -> None:
    before = leaks.Snapshot.take()
    thread = threading.Thread(target=time.sleep, args=(0.3,))
    thread.start()
    started = time.monotonic()
    assert not leaks.settle(before, bound=10)
    assert time.monotonic() - started < 5  # returned when the thread ended, not at the bound
    thread.join()


def test_a_process_started_by_one_already_running_belongs_to_it() -> None:
    # Given a child running before the snapshot (a module fixture's supervisor)
    script = ("import subprocess, sys, time; sys.stdin.readline(); "
              "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
              "print(p.pid, flush=True); sys.stdin.readline(); p.kill(); p.wait()")
    parent = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    assert parent.stdin is not None and parent.stdout is not None
    try:
        before = leaks.Snapshot.take()
        # When it starts a child of its own (a worker)
        parent.stdin.write("go\n")
        parent.stdin.flush()
        grandchild = int(parent.stdout.readline())
        # Then that is not the test's leak
        assert grandchild in leaks._processes()
        assert not leaks.leftovers(before)
    finally:
        parent.stdin.write("stop\n")
        parent.stdin.close()
        parent.wait(timeout=10)
        parent.stdout.close()


def test_a_wider_fixture_owns_what_its_setup_started_and_must_end_it() -> None:
    stop = threading.Event()
    key = object()
    leaks.fixture_setting_up(key)
    thread = threading.Thread(target=stop.wait, name="fixture-owned")
    thread.start()
    leaks.fixture_set_up(key)
    try:
        assert thread in leaks.owned_by_fixtures().threads
        before = leaks.Snapshot.take()
        assert not leaks.leftovers(before.merged(leaks.owned_by_fixtures()))
        with pytest.raises(AssertionError, match=r"(?s)fixture 'server' left behind.*fixture-owned"):
            leaks.fixture_torn_down(key, "server", bound=0.2)  # a teardown that did not stop the thread
    finally:
        stop.set()
        thread.join()
