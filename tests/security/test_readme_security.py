"""docs/security.md's commands (a production cluster's keys), run as written in a fresh directory (with the
repository's ``.venv`` linked in), and what they leave behind."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from squall.security.keyring import Keyring

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "security.md"


def security_lines() -> list[str]:
    block = re.search(r"^```sh\n(.*?)^```", PAGE.read_text(), re.DOTALL | re.MULTILINE)
    assert block, "no sh block in docs/security.md"
    return [line for line in block.group(1).splitlines() if line.strip() and not line.startswith("#")]


def test_the_keys_commands_run_as_written(tmp_path: Path) -> None:
    (tmp_path / ".venv").symlink_to(REPO / ".venv")
    outputs = []
    for line in security_lines():
        proc = subprocess.run(["bash", "-c", line], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                              check=False)
        assert proc.returncode == 0, f"{line}\n{proc.stdout}\n{proc.stderr}"
        outputs.append(proc.stdout)
    cluster = Keyring.load(tmp_path / "squall-keys" / "keyring.json")  # 0600, or load refuses it
    alice = Keyring.load(tmp_path / "squall-keys" / "alice.json")
    assert "nimbus1.internal" in cluster.data["tls"]["hosts"] and "10.0.0.10" in cluster.data["tls"]["hosts"]
    assert cluster.authenticate(alice.client_token or "") == "alice"
    assert "zookeeper" not in alice.data and "key" not in alice.data["tls"]
    assert "admin" in outputs[-1] and "alice" in outputs[-1]
