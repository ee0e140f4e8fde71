"""Building a topology's environment with venv and pip, offline (squall.runtime.envbuild)."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from squall.runtime.envbuild import READY, EnvBuildError, EnvStore, key_of
from squall.runtime.envs import parse_requirements
from tests.helpers import make_wheel


@pytest.fixture
def wheels(tmp_path: Path) -> Path:
    directory = tmp_path / "wheels"
    directory.mkdir()
    for version in ("1.0", "2.0"):
        make_wheel(directory, "sqdeptest", version)
    return directory


def run(python: Path, code: str) -> str:
    proc = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True)
    return proc.stdout.strip()


def test_an_environment_has_its_requirements_then_squalls(tmp_path: Path, wheels: Path) -> None:
    store = EnvStore(tmp_path / "envs")
    reqs = parse_requirements(f"--no-index\n--find-links {wheels}\nsqdeptest==1.0\nmsgpack\n", str(tmp_path))
    env = store.ensure(reqs)
    assert env.built and store.ready(env.key) and env.key == key_of(reqs)
    # its own package, and Squall with its dependencies from the Python Squall runs with
    # (msgpack was already satisfied there: nothing of it in the environment)
    out = run(env.python, "import sqdeptest, msgpack, squall; print(sqdeptest.VERSION, msgpack.__file__)")
    version, msgpack_file = out.split()
    assert version == "1.0"
    assert not msgpack_file.startswith(str(env.path))
    assert not list(env.path.glob("lib/*/site-packages/msgpack*"))
    # the second time: from the cache, nothing built
    again = store.ensure(reqs)
    assert not again.built and again.path == env.path and store.builds == 1


def test_the_environment_wins_over_squalls_for_what_it_installs(tmp_path: Path, wheels: Path) -> None:
    store = EnvStore(tmp_path / "envs")
    one = store.ensure(parse_requirements(f"--no-index\n-f {wheels}\nsqdeptest==1.0", None))
    two = store.ensure(parse_requirements(f"--no-index\n-f {wheels}\nsqdeptest==2.0", None))
    assert one.key != two.key
    assert run(two.python, "import sqdeptest; print(sqdeptest.VERSION)") == "2.0"
    assert run(one.python, "import sqdeptest; print(sqdeptest.VERSION)") == "1.0"


def test_a_failed_build_says_pips_words_and_leaves_nothing(tmp_path: Path, wheels: Path) -> None:
    store = EnvStore(tmp_path / "envs")
    with pytest.raises(EnvBuildError, match=r"(?s)no-such-sqpkg.*No matching distribution"):
        store.ensure(parse_requirements(f"--no-index\n-f {wheels}\nno-such-sqpkg==1.0", None))
    assert store.present() == []
    # one that would replace a package Squall runs on: refused by the constraints
    with pytest.raises(EnvBuildError, match=r"(?s)msgpack.*Squall itself runs on"):
        store.ensure(parse_requirements(f"--no-index\n-f {wheels}\nmsgpack==0.1", None))
    assert store.present() == []


def test_two_builders_of_one_environment_build_it_once(tmp_path: Path, wheels: Path) -> None:
    stores = [EnvStore(tmp_path / "envs"), EnvStore(tmp_path / "envs")]
    reqs = parse_requirements(f"--no-index\n-f {wheels}\nsqdeptest==1.0", None)
    results: list[bool] = []
    threads = [threading.Thread(target=lambda s=s: results.append(s.ensure(reqs).built)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert sorted(results) == [False, True]
    assert stores[0].remove(key_of(reqs)) and stores[0].present() == []


def _ready_env(store: EnvStore, key: str, used: float) -> None:
    """An environment as a build leaves it (its ready mark), last used at ``used``."""
    store.path(key).mkdir(parents=True)
    (store.path(key) / READY).touch()
    os.utime(store.path(key) / READY, (used, used))


def test_a_sweep_removes_what_no_run_used_lately_and_never_an_environment_in_use(tmp_path: Path) -> None:
    store = EnvStore(tmp_path / "envs")
    now = time.time()
    _ready_env(store, "old", now - 40 * 86400)
    _ready_env(store, "held", now - 40 * 86400)
    _ready_env(store, "recent", now - 86400)
    (store.path("half-built")).mkdir()  # a builder died: no ready mark, made long ago
    os.utime(store.path("half-built"), (now - 40 * 86400, now - 40 * 86400))
    # A run holding "held" marks it used now; mark it old again, as a run of 40 days would
    fd = store.hold("held")
    assert fd is not None and (store.path("held") / READY).stat().st_mtime >= now - 5
    os.utime(store.path("held") / READY, (now - 40 * 86400, now - 40 * 86400))
    try:
        assert sorted(store.sweep_unused(30 * 86400, now)) == ["half-built", "old"]
        assert store.present() == ["held", "recent"]
    finally:
        os.close(fd)
    # Once the run is over, it goes too; and what is gone cannot be held
    assert store.sweep_unused(30 * 86400, now, keep={"recent"}) == ["held"]
    assert store.hold("held") is None
