"""A pinned process (a worker, `squall local`) keeps its children off its pin."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

SCRIPT = """
import json, os, subprocess, sys
from squall.affinity import pin_to, release_child
before = sorted(os.sched_getaffinity(0))
pin_to(before[-1])
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
release_child(child.pid)
out = {"before": before, "pinned": sorted(os.sched_getaffinity(0)),
       "child": sorted(os.sched_getaffinity(child.pid))}
child.kill()
print(json.dumps(out))
"""


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one core: nothing to pin apart")
def test_a_pinned_process_gives_its_children_back_its_cores() -> None:
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=30,
                          check=True)
    out = json.loads(proc.stdout)
    assert out["pinned"] == [out["before"][-1]]
    assert out["child"] == out["before"]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one core: nothing to pin apart")
def test_squall_local_pins_itself_to_one_core_unless_told_not_to() -> None:
    probe = ("import os, runpy, sys; from squall.cli import main as cli; real = cli.pin_local\n"
             "def spy(cpu):\n    real(cpu); print('cores', sorted(os.sched_getaffinity(0)), flush=True)\n"
             "cli.pin_local = spy; sys.exit(cli.main(sys.argv[1:]))")
    example = os.path.join(os.path.dirname(__file__), "..", "examples", "wordcount.py")
    for cpu, expect in (("auto", 1), ("none", len(os.sched_getaffinity(0)))):
        command = [sys.executable, "-c", probe, "local", example, "--duration", "0.5", "--cpu", cpu]
        proc = subprocess.run(command, capture_output=True, text=True, timeout=60, check=True)
        (line,) = [x for x in proc.stdout.splitlines() if x.startswith("cores ")]
        assert len(json.loads(line[len("cores "):])) == expect, (cpu, line)
