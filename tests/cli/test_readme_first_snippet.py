"""README's first Python snippet is a whole topology that runs as shown (issue 30: it
used classes it never defined)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_first_snippet_runs_and_counts_words(tmp_path: Path) -> None:
    text = (REPO / "README.md").read_text()
    snippet = re.search(r"^```python\n(.*?)^```", text, re.DOTALL | re.MULTILINE)
    assert snippet, "no python snippet in README.md"
    code = snippet.group(1)
    assert code.startswith("# first.py"), code[:80]
    (tmp_path / "first.py").write_text(code)
    result = subprocess.run([sys.executable, "-m", "squall.cli", "local", "first.py", "--duration", "5"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    said = result.stdout + result.stderr
    assert result.returncode == 0, said
    assert "top words" in said and "component errors" not in said, said[-2000:]
    counts = [line.split() for line in said.splitlines() if line.startswith("count ")]
    assert counts and int(counts[-1][2]) > 0, said[-2000:]  # the count bolt executed words
