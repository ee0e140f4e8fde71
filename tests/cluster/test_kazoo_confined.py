"""Coordination stays in squall.cluster: no other package imports kazoo, not
even inside a function (daemons use squall.cluster's session, election and
watches)."""

from __future__ import annotations

import ast
from pathlib import Path

SQUALL = Path(__file__).resolve().parents[2] / "squall"


def kazoo_imports(path: Path) -> list[int]:
    lines = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        else:
            continue
        if any(name == "kazoo" or name.startswith("kazoo.") for name in names):
            lines.append(node.lineno)
    return lines


def test_only_squall_cluster_imports_kazoo() -> None:
    outside = {str(path.relative_to(SQUALL)): lines for path in sorted(SQUALL.rglob("*.py"))
               if path.relative_to(SQUALL).parts[0] != "cluster" and (lines := kazoo_imports(path))}
    assert outside == {}
    assert kazoo_imports(SQUALL / "cluster" / "session.py")  # the check sees what it looks for
