"""docs/redis.md's commands ("Real sources and state: Redis Streams"), run as written."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
PAGE = REPO / "docs" / "redis.md"


def test_the_two_commands_run_as_written() -> None:
    block = re.search(r"^```sh\n(.*?)^```", PAGE.read_text(), re.DOTALL | re.MULTILINE)
    assert block, "no sh block in docs/redis.md"
    lines = [line for line in block.group(1).splitlines() if line.strip()]
    assert len(lines) == 2
    outputs = []
    for line in lines:
        proc = subprocess.run(["bash", "-c", line], cwd=REPO, capture_output=True, text=True, timeout=110,
                              check=False)
        assert proc.returncode == 0, f"{line}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
        outputs.append(proc.stdout)
    assert "exact: all 20000 clicks counted once each" in outputs[-1]
    assert "redis-cli -p" in outputs[-1]
