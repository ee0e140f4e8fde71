"""docs/config.md, the configuration reference, is generated from squall/config.py and
describes every key (issue 30: no page listed the config keys and their defaults)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from squall import config

REPO = Path(__file__).resolve().parents[1]


def test_every_key_has_a_one_line_meaning() -> None:
    # One table: a key's meaning stands beside its default, so none can be missing or stray
    assert set(config.DEFAULTS) == set(config.KEYS)
    bad = [key for key, spec in config.KEYS.items()
           if not isinstance(spec.meaning, str) or not spec.meaning.strip() or "\n" in spec.meaning]
    assert not bad, f"meanings in squall/config.py's KEYS must be one non-empty line: {bad}"


def test_the_reference_page_is_what_the_generator_writes_now(tmp_path: Path) -> None:
    # The command the page and this message name, run as written (into a scratch file)
    command = config.REGENERATE.split()
    assert command[:4] == ["python", "-m", "squall.config", "--markdown"], command
    written = tmp_path / "config.md"
    subprocess.run([sys.executable, *command[1:-1], str(written)], cwd=REPO, check=True, timeout=60)
    page = REPO / config.REFERENCE_PAGE
    assert page.exists() and page.read_text() == written.read_text(), (
        f"{config.REFERENCE_PAGE} is stale: regenerate it with `.venv/bin/{config.REGENERATE}`")


def test_the_page_shows_each_key_with_its_default_and_meaning() -> None:
    page = config.reference_markdown()
    for key in config.DEFAULTS:
        row = next((line for line in page.splitlines() if line.startswith(f"| `{key}` |")), None)
        assert row is not None, key
        assert config.KEYS[key].meaning in row.replace("\\|", "|"), row
    # a sample of defaults as a reader writes them in YAML
    assert "| `topology.message.timeout.secs` | `30` | number, >= 0.001 |" in page
    assert "| `topology.max.spout.pending` | `null` | int or null, >= 1 |" in page
    assert "| `nimbus.admins` | `[\"admin\"]` | list |" in page
