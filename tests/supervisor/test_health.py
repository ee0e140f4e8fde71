"""Node health checks (Storm's storm.health.check.dir): the rule, and real scripts run
as the supervisor runs them."""

from __future__ import annotations

from pathlib import Path

from squall.supervisor.health import HealthCheck, ScriptResult, verdict


def test_the_rule_is_storms_an_error_line_a_failure_or_a_timeout() -> None:
    assert verdict([]) is None
    assert verdict([ScriptResult("ok.sh", 0, "all good\n")]) is None
    assert verdict([ScriptResult("disk.sh", 0, "checking\nERROR disk full\n")]) == "disk.sh: ERROR disk full"
    assert verdict([ScriptResult("net.sh", 2, "")]) == "net.sh: exited with status 2"
    assert verdict([ScriptResult("slow.sh", None, "")]) == "slow.sh: timed out"
    # The first failing script speaks for the node.
    assert verdict([ScriptResult("a", 0, ""), ScriptResult("b", 1, "ERROR b")]) == "b: ERROR b"


def script(directory: Path, name: str, body: str, executable: bool = True) -> None:
    path = directory / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755 if executable else 0o644)


def test_scripts_run_with_the_nodes_identity_and_a_timeout(tmp_path: Path) -> None:
    checks = tmp_path / "checks"
    checks.mkdir()
    local = tmp_path / "supervisor-1"
    script(checks, "10-node.sh",
           'case "$SQUALL_LOCAL_DIR" in *supervisor-1) echo "ERROR $SQUALL_NODE is sick";; esac')
    script(checks, "20-ignored.sh", "echo ERROR never run", executable=False)
    health = HealthCheck(str(checks), 2000, "node-a", local)
    assert [p.name for p in health.scripts()] == ["10-node.sh"]
    assert health.run() == "10-node.sh: ERROR node-a is sick"
    assert HealthCheck(str(checks), 2000, "node-b", tmp_path / "supervisor-0").run() is None
    script(checks, "30-slow.sh", "sleep 5")
    assert HealthCheck(str(checks), 200, "node-b", tmp_path / "supervisor-0").run() == "30-slow.sh: timed out"
    assert HealthCheck(None, 2000, "n", local).run() is None  # none configured: healthy
    assert HealthCheck(str(tmp_path / "missing"), 2000, "n", local).run() is None
