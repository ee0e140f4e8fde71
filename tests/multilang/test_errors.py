"""Which line of a dying child's stderr says why it died (squall.multilang.errors.stderr_lead),
read from what real runtimes print."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from squall.multilang.errors import stderr_lead
from tests.multilang.harness import NODE


def stderr_of(argv: list[str], cwd: Path) -> list[str]:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode != 0, done
    return done.stderr.splitlines()


def test_python_errors_are_named_with_the_innermost_frame(tmp_path: Path) -> None:
    (tmp_path / "split.py").write_text("import sys\n\ndef split():\n    return undefined_name\n\nsplit()\n")
    lead = stderr_lead(stderr_of([sys.executable, "split.py"], tmp_path))
    assert lead == f"NameError: name 'undefined_name' is not defined at {tmp_path / 'split.py'}:4"
    (tmp_path / "imports.py").write_text("import storm_adapter_not_installed\n")
    lead = stderr_lead(stderr_of([sys.executable, "imports.py"], tmp_path))
    assert lead == (f"ModuleNotFoundError: No module named 'storm_adapter_not_installed' "
                    f"at {tmp_path / 'imports.py'}:1")


def test_node_errors_are_named_with_the_users_own_frame(tmp_path: Path) -> None:
    if NODE is None:
        pytest.fail("node is required for the Node.js multilang tests")
    (tmp_path / "bolt.js").write_text("const storm = require('./storm-not-here');\n")
    lead = stderr_lead(stderr_of([NODE, "bolt.js"], tmp_path))
    # (not node's own loader, which prints its line first)
    assert lead == f"Error: Cannot find module './storm-not-here' at {tmp_path / 'bolt.js'}:1"
    (tmp_path / "throws.js").write_text("function run() {\n  throw new TypeError('no tuples');\n}\nrun();\n")
    assert stderr_lead(stderr_of([NODE, "throws.js"], tmp_path)) == (
        f"TypeError: no tuples at {tmp_path / 'throws.js'}:2")


def test_other_runtimes_and_no_error_at_all() -> None:
    ruby = "bolt.rb:3: syntax error, unexpected ')'"
    assert stderr_lead([ruby]) == ruby
    assert stderr_lead(["goroutine 1 [running]:", "panic: runtime error: index out of range"]) == (
        "panic: runtime error: index out of range")
    assert stderr_lead(["starting", "exiting with 3"]) is None
    assert stderr_lead([]) is None
