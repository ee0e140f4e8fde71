"""Issue 47, finding 5: the documented deploy is the safe one.  The shipped units
start a supervisor that engages the sandbox (root, and a config that refuses to
start without it), and no example hands a supervisor the cluster keyring."""

from __future__ import annotations

import configparser
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from squall.security.keyring import Keyring

REPO = Path(__file__).resolve().parents[2]
UNITS = REPO / "ops" / "systemd"


def unit(name: str) -> configparser.SectionProxy:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string((UNITS / name).read_text())
    return parser["Service"]


def test_the_supervisor_unit_runs_as_root_with_a_config_that_requires_the_sandbox() -> None:
    service = unit("squall-supervisor.service")
    assert service.get("User", "root") == "root"
    command = shlex.split(service["ExecStart"])
    config = command[command.index("--config") + 1]
    assert Path(config).name == "supervisor.yaml"
    example = yaml.safe_load((UNITS / "supervisor.yaml.example").read_text())
    assert example["supervisor.run.worker.as.user"] is True
    assert example["squall.keyring.path"].endswith("supervisor-keyring.json")
    # workers survive a supervisor restart: only the supervisor is signalled
    assert service["KillMode"] == "process"


def test_no_example_hands_a_supervisor_the_cluster_keyring() -> None:
    # (the audit: the example said to copy the full keyring, admin token included, to every node)
    for path in (UNITS / "squall.yaml.example", UNITS / "supervisor.yaml.example"):
        text = " ".join(path.read_text().split())
        assert "copy the keyring" not in text and "keyring.json to every" not in text, path
    assert "secrets supervisor" in (UNITS / "squall.yaml.example").read_text()
    for name in ("squall-nimbus.service", "squall-drpc.service"):
        assert unit(name)["User"] == "squall"  # the daemons that need no root do not run as root


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                    reason="hiding bubblewrap from one process needs a mount namespace (root: CI)")
def test_a_supervisor_started_by_the_unit_refuses_where_it_cannot_sandbox(tmp_path: Path) -> None:
    # Given the shipped supervisor config, on a node whose bubblewrap is missing
    keyring, _token = Keyring.create()
    keyring.path = tmp_path / "keyring.json"
    keyring.save()
    supervisor_keyring = keyring.supervisor_keyring(["127.0.0.1"]).save(tmp_path / "supervisor-keyring.json")
    conf = yaml.safe_load((UNITS / "supervisor.yaml.example").read_text())
    conf.update({"squall.keyring.path": str(supervisor_keyring), "storm.local.dir": str(tmp_path / "local"),
                 "storm.zookeeper.servers": ["127.0.0.1"], "storm.local.hostname": "127.0.0.1",
                 "logviewer.port": None})
    (tmp_path / "supervisor.yaml").write_text(yaml.safe_dump(conf))
    command = shlex.split(unit("squall-supervisor.service")["ExecStart"])
    command = [sys.executable, "-m", "squall.cli", *command[1:]]
    command[command.index("--config") + 1] = str(tmp_path / "supervisor.yaml")
    hide = f"mount --bind /dev/null {shutil.which('bwrap') or '/usr/bin/bwrap'} && exec {shlex.join(command)}"
    # When systemd starts it (as root, as the unit says)
    proc = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", hide],
                          capture_output=True, text=True, timeout=120, cwd=REPO, check=False)
    # Then it refuses to start, saying why, and launches nothing unsandboxed
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "supervisor.run.worker.as.user is true" in proc.stdout + proc.stderr
    slots = tmp_path / "local" / "workers"
    assert not slots.exists() or not any(slots.iterdir())
