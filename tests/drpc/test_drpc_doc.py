"""docs/drpc.md's first example runs as written, in local mode."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "drpc.md"


def test_the_guides_first_example_runs_as_written() -> None:
    block = re.search(r"```python\n(.*?)```", DOC.read_text(), re.DOTALL)
    assert block is not None
    exec(compile(block.group(1), str(DOC), "exec"), {"__name__": "drpc_doc"})  # noqa: S102 - our own doc
