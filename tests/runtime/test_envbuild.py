"""Building a topology's environment with venv and pip, offline (squall.runtime.envbuild)."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest

from squall.runtime.envbuild import EnvBuildError, EnvStore, key_of
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
