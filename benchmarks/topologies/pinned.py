"""One benchmark configuration in a fresh process pinned to the first ``cores`` CPUs,
so that its peak RSS, its GIL and its caches are its own: the scripts run themselves
with ``--child`` and the child prints its result as the last line, in JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any


def run_pinned(script: str, argv: list[str], cores: int,
               env: dict[str, str] | None = None) -> tuple[dict[str, Any] | None, str]:
    """``python script *argv`` pinned to ``cores`` CPUs: (its last line as JSON, or None
    if it failed; the tail of its stderr)."""
    cpus = set(range(max(1, min(cores, os.cpu_count() or 1))))
    proc = subprocess.run([sys.executable, script, *argv], capture_output=True, text=True, check=False,
                          env=env, preexec_fn=lambda: os.sched_setaffinity(0, cpus))
    if proc.returncode != 0:
        return None, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr[-2000:]
