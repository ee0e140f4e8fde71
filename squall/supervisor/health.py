"""Node health checks (Storm's ``storm.health.check.dir``): the administrator's scripts,
run by the supervisor every ``supervisor.monitor.frequency.secs``; a node whose check
fails takes no new workers until it passes again.

A script fails the check when it prints a line starting with ``ERROR`` (Storm's rule),
exits with a non-zero status, or runs past ``storm.health.check.timeout.ms``.  Scripts
get ``SQUALL_NODE`` (the supervisor's node id) and ``SQUALL_LOCAL_DIR`` in their
environment.  :func:`verdict` is the pure rule; :class:`HealthCheck` runs the scripts.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

MAX_REASON = 300  # characters of a script's ERROR line kept in the node's record


@dataclass(frozen=True)
class ScriptResult:
    script: str
    returncode: int | None  # None: timed out
    stdout: str


def verdict(results: list[ScriptResult]) -> str | None:
    """None when the node is healthy, else why not (the first failing script's reason)."""
    for r in results:
        if r.returncode is None:
            return f"{r.script}: timed out"
        error = next((line for line in r.stdout.splitlines() if line.startswith("ERROR")), None)
        if error is not None:
            return f"{r.script}: {error[:MAX_REASON]}"
        if r.returncode != 0:
            return f"{r.script}: exited with status {r.returncode}"
    return None


class HealthCheck:
    """The scripts of one directory (none configured: always healthy)."""

    def __init__(self, directory: str | None, timeout_ms: int, node: str, local_dir: Path) -> None:
        self.directory = Path(directory) if directory else None
        self.timeout = timeout_ms / 1000
        self.env = {**os.environ, "SQUALL_NODE": node, "SQUALL_LOCAL_DIR": str(local_dir)}

    def scripts(self) -> list[Path]:
        if self.directory is None or not self.directory.is_dir():
            return []
        return sorted(p for p in self.directory.iterdir() if p.is_file() and os.access(p, os.X_OK))

    def run(self) -> str | None:
        """Run every script; None when healthy, else the reason."""
        results = []
        for script in self.scripts():
            try:
                proc = subprocess.run([str(script)], capture_output=True, text=True, env=self.env,
                                      timeout=self.timeout, check=False, stdin=subprocess.DEVNULL)
                results.append(ScriptResult(script.name, proc.returncode, proc.stdout))
            except subprocess.TimeoutExpired:
                results.append(ScriptResult(script.name, None, ""))
            except OSError as e:  # not runnable after all (a bad interpreter line)
                results.append(ScriptResult(script.name, 127, f"ERROR cannot run: {e}"))
        return verdict(results)
