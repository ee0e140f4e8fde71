"""README's "A cluster on one machine", run line by line as written.

Each line of the section's first ``sh`` block runs with ``bash -c`` in a
fresh directory that has the repository's ``examples/`` and ``.venv/``
(symlinks), and must exit 0.  The line ending in ``&`` (the dev cluster)
runs in the background; the test waits where a person would (until the
cluster answers, the topology runs, the killed topology is gone) and at the
end stops the dev cluster with SIGTERM, which must stop everything.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import psutil
import pytest

from squall.cli.client import NimbusClient
from squall.runtime.settings import load_conf
from squall.testing import poll_for

REPO = Path(__file__).resolve().parents[2]
SECTION = "## A cluster on one machine"
BACKGROUND = re.compile(r"(?<!&)&\s*(#.*)?$")


def quickstart_lines() -> list[str]:
    text = (REPO / "README.md").read_text()
    section = text[text.index(SECTION):]
    end = section.find("\n## ", len(SECTION))
    section = section if end < 0 else section[:end]
    block = re.search(r"^```sh\n(.*?)^```", section, re.DOTALL | re.MULTILINE)
    assert block, f"no sh block in README's {SECTION!r}"
    return [line for line in block.group(1).splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def _client(config: Path) -> NimbusClient:
    return NimbusClient.for_conf(load_conf(str(config)), timeout=10)


def _running(config: Path, name: str) -> bool:
    rows = [r for r in _client(config).list() if r["name"] == name]
    if not rows or rows[0]["status"] != "active" or not rows[0]["workers"]:
        return False
    workers = _client(config).info(name)["workers"]
    return len(workers) == rows[0]["workers"] and all(w["alive"] for w in workers)


def _listed(config: Path, name: str) -> bool:
    return any(r["name"] == name for r in _client(config).list())


def _gone(proc: psutil.Process) -> bool:
    try:
        return not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


class QuickStart:
    """The lines run so far: the background dev cluster, its config, the topology."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        # A home of its own: the dev cluster names its config in ~/.squall/dev-cluster,
        # where the lines without --config find it (not the real home's).
        (cwd / "home").mkdir()
        self.env = {**os.environ, "HOME": str(cwd / "home")}
        self.env.pop("SQUALL_CONF", None)
        self.log = cwd / "background.log"
        self.pid_file = cwd / "background.pid"
        self.background: subprocess.Popen[bytes] | None = None
        self.cluster_pid: int | None = None
        self.config: Path | None = None
        self.name = ""

    def run(self, line: str) -> None:
        if BACKGROUND.search(line):
            self.start_background(line)
            return
        result = subprocess.run(["bash", "-c", line], cwd=self.cwd, capture_output=True, text=True,
                                timeout=60, check=False, env=self.env)
        assert result.returncode == 0, f"{line}\nexited {result.returncode}:\n{result.stdout}{result.stderr}"
        config = self.config
        assert config is not None, "a cluster command before the dev cluster was started"
        command = line.split()
        if "submit" in command:
            submitted = re.search(r"submitted topology (\S+)", result.stdout)
            assert submitted, result.stdout
            self.name = submitted.group(1)
            poll_for(lambda: _running(config, self.name), timeout=60, message=f"{self.name} running",
                     interval=0.2)
        elif "list" in command:
            assert self.name in result.stdout, result.stdout
        elif "kill" in command:
            poll_for(lambda: not _listed(config, self.name), timeout=30, message=f"{self.name} gone",
                     interval=0.2)

    def start_background(self, line: str) -> None:
        # The line as written, then its pid kept and its exit status made bash's.
        with open(self.log, "wb") as out:
            self.background = subprocess.Popen(["bash", "-c", f"{line}\necho $! > {self.pid_file}\nwait $!"],
                                               cwd=self.cwd, stdout=out, stderr=subprocess.STDOUT,
                                               stdin=subprocess.DEVNULL, env=self.env)
        self.cluster_pid = int(poll_for(lambda: self.pid_file.exists() and self.pid_file.read_text().strip(),
                                        timeout=10, message="the background pid"))
        where = re.search(r"--dir\s+(\S+)", line)
        self.config = self.cwd / (where.group(1) if where else "squall-dev") / "squall.yaml"
        poll_for(self.answers, timeout=60, message="the dev cluster answering", interval=0.2)

    def answers(self) -> bool:
        assert self.background is not None and self.config is not None
        assert self.background.poll() is None, \
            f"the dev cluster exited ({self.background.returncode}):\n{self.log.read_text()}"
        if "dev cluster up" not in self.log.read_text():  # what a person waits for
            return False
        try:
            info = _client(self.config).cluster()
        except Exception:  # noqa: BLE001 - not listening yet, no leader yet
            return False
        return bool(info.get("leader")) and bool(info.get("supervisors"))

    def stop(self) -> None:
        """Whatever happened: SIGTERM the dev cluster, SIGKILL it if it hangs (its reaper cleans up)."""
        if self.background is None or self.background.poll() is not None:
            return
        self._signal(signal.SIGTERM)
        try:
            self.background.wait(60)
        except subprocess.TimeoutExpired:
            self._signal(signal.SIGKILL)
            self.background.kill()
            self.background.wait(10)

    def _signal(self, sig: signal.Signals) -> None:
        if self.cluster_pid is not None:
            try:
                psutil.Process(self.cluster_pid).send_signal(sig)
            except psutil.Error:
                pass


@pytest.mark.timeout(150)
def test_the_quick_start_runs_as_written(tmp_path: Path) -> None:
    lines = quickstart_lines()
    assert any(BACKGROUND.search(line) for line in lines), lines
    for name in ("examples", ".venv"):
        (tmp_path / name).symlink_to(REPO / name)
    quick = QuickStart(tmp_path)
    try:
        # Each line runs as written and exits 0
        for line in lines:
            quick.run(line)
        # Then SIGTERM stops the dev cluster and everything it started; it exits 0
        assert quick.background is not None and quick.cluster_pid is not None
        started = psutil.Process(quick.cluster_pid).children(recursive=True)
        assert started, "the dev cluster started no processes?"
        psutil.Process(quick.cluster_pid).send_signal(signal.SIGTERM)
        assert quick.background.wait(30) == 0, quick.log.read_text()
        poll_for(lambda: all(_gone(p) for p in started), timeout=5, message="everything stopped")
        # and it no longer names its config for client commands
        assert not (tmp_path / "home" / ".squall" / "dev-cluster").exists()
    finally:
        quick.stop()
