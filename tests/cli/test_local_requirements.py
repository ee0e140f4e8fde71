"""``squall local --requirements``: the topology runs with its environment's Python, built
once and then taken from the cache (squall.cli.environments)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from squall.runtime.envbuild import READY, EnvStore
from tests.helpers import make_wheel

REPO = Path(__file__).resolve().parents[2]
TOPOLOGY = '''
from typing import Any
from squall import Bolt, Spout, Topology

class Once(Spout):
    outputs = ["n"]
    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        import sys
        import sqdeptest  # only in the environment
        print("sqdeptest", sqdeptest.VERSION, "python", sys.executable, flush=True)
    def next_tuple(self) -> None:
        pass

class Sink(Bolt):
    def process(self, tup: Any) -> None:
        pass

class VersionTopology(Topology):
    once = Once.spec()
    sink = Sink.spec(inputs=[once])
'''


def test_local_mode_runs_in_the_topologys_environment(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    make_wheel(wheels, "sqdeptest", "2.0")
    (tmp_path / "topology.py").write_text(TOPOLOGY)
    requirements = "--no-index\n--find-links wheels\nsqdeptest==2.0\nstreamparse\n"
    (tmp_path / "requirements.txt").write_text(requirements)
    env = {**os.environ, "SQUALL_ENV_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(REPO)}

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "squall.cli", "local", "topology.py", "--requirements",
                               "requirements.txt", "--duration", "0.5", "--cpu", "none"],
                              capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env, check=True)

    first = run()
    assert "building environment" in first.stdout and "(1 requirement)... done in" in first.stdout
    assert "streamparse: provided by Squall" in first.stderr
    line = next(x for x in first.stdout.splitlines() if x.startswith("sqdeptest"))
    assert line.split()[1] == "2.0"
    assert line.split()[3].startswith(str(tmp_path / "cache"))
    # An environment no run has used for over $SQUALL_ENV_CACHE_DAYS (30) goes at the next
    # run; the run's own stays
    stale = tmp_path / "cache" / ("0" * 64)
    (stale / READY).parent.mkdir(parents=True)
    (stale / READY).touch()
    long_ago = time.time() - 31 * 86400
    os.utime(stale / READY, (long_ago, long_ago))
    second = run()
    assert "cached" in second.stdout and "building" not in second.stdout
    assert "sqdeptest 2.0" in second.stdout
    assert "removed 1 cached environment(s) unused for 30 days" in second.stdout
    kept = EnvStore(tmp_path / "cache").present()
    assert not stale.exists() and len(kept) == 1
    assert line.split()[3].startswith(str(tmp_path / "cache" / kept[0]))
    # A bad value is named before anything runs
    env["SQUALL_ENV_CACHE_DAYS"] = "soon"
    bad = subprocess.run([sys.executable, "-m", "squall.cli", "local", "topology.py", "--requirements",
                          "requirements.txt", "--duration", "0.5", "--cpu", "none"],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env, check=False)
    assert bad.returncode != 0 and "$SQUALL_ENV_CACHE_DAYS must be a number of days >= 0" in bad.stderr


def test_a_running_topology_keeps_its_environment_from_another_runs_sweep(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for version in ("1.0", "2.0"):
        make_wheel(wheels, "sqdeptest", version)
    (tmp_path / "topology.py").write_text(TOPOLOGY)
    for version in ("1.0", "2.0"):
        (tmp_path / f"requirements-{version}.txt").write_text(
            f"--no-index\n--find-links wheels\nsqdeptest=={version}\n")
    env = {**os.environ, "SQUALL_ENV_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(REPO)}
    store = EnvStore(tmp_path / "cache")

    def command(version: str, secs: float) -> list[str]:
        return [sys.executable, "-m", "squall.cli", "local", "topology.py", "--requirements",
                f"requirements-{version}.txt", "--duration", str(secs), "--cpu", "none"]

    # Given a topology running for a while in its environment (its lock held across the exec)
    running = subprocess.Popen(command("2.0", 120), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               text=True, cwd=tmp_path, env=env)
    try:
        assert running.stdout is not None
        for out in running.stdout:  # until its spout reports from the environment
            if out.startswith("sqdeptest 2.0"):
                break
        [its_env] = store.present()
        long_ago = time.time() - 31 * 86400
        os.utime(store.path(its_env) / READY, (long_ago, long_ago))  # as after a month's run
        # When another topology runs with other requirements, its sweep leaves that one alone
        other = subprocess.run(command("1.0", 0.5), capture_output=True, text=True, timeout=120,
                               cwd=tmp_path, env=env, check=True)
        assert "sqdeptest 1.0" in other.stdout and "removed" not in other.stdout
        assert its_env in store.present() and store.ready(its_env)
    finally:
        running.terminate()
        running.wait(60)
        if running.stdout is not None:
            running.stdout.close()
    # And once it has stopped, the next run's sweep removes it
    again = subprocess.run(command("1.0", 0.5), capture_output=True, text=True, timeout=120,
                           cwd=tmp_path, env=env, check=True)
    assert "removed 1 cached environment(s) unused for 30 days" in again.stdout
    assert its_env not in store.present()


def test_submit_reads_a_file_importing_its_requirements_in_their_environment(tmp_path: Path) -> None:
    # (issue 50: `local --requirements` ran it, `submit --requirements` failed with a bare
    # ModuleNotFoundError: the client loaded the file outside the environment)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    make_wheel(wheels, "sqdeptest", "2.0")
    (tmp_path / "topology.py").write_text("import sqdeptest  # at the top, as users write it\n" + TOPOLOGY)
    (tmp_path / "requirements.txt").write_text("--no-index\n--find-links wheels\nsqdeptest==2.0\n")
    (tmp_path / "squall.yaml").write_text("nimbus.seeds: ['127.0.0.1:9']\nsquall.secure: false\n")
    env = {**os.environ, "SQUALL_ENV_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "squall.cli", "submit", "topology.py", "--requirements",
                           "requirements.txt", "--config", "squall.yaml"],
                          capture_output=True, text=True, timeout=180, cwd=tmp_path, env=env, check=False)
    assert "imports 'sqdeptest': loading it in the environment of requirements.txt" in proc.stderr
    assert "ModuleNotFoundError" not in proc.stderr
    # Loaded and packed; only then does it look for nimbus, which is not there.
    assert proc.returncode != 0 and "nimbus" in proc.stderr
