"""A topology's own dependencies on a dev cluster (``squall submit --requirements``):
built offline into a virtualenv per hash on nimbus and on both supervisors, two
versions of one package side by side, a bad requirement refused with pip's words
and nothing left behind, the cache reused, an unused environment removed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

from squall.cli.sparse_quickstart import quickstart
from squall.testing import poll_for
from tests.cluster.conftest import REPO, TOPOLOGIES, squall_cli
from tests.helpers import make_wheel

TOPOLOGY = str(TOPOLOGIES / "dependency_version.py")


def env_dirs(local_dir: Path) -> set[str]:
    """The environments of a node (ready or not)."""
    envs = local_dir / "envs"
    if not envs.is_dir():
        return set()
    return {p.name for p in envs.iterdir() if p.is_dir() and not p.name.startswith(".")}


def seen(directory: Path, name: str) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in directory.glob(f"{name}-*.json")]


def test_topologies_run_in_their_own_environments(make_cluster: Any, tmp_path: Path) -> None:
    # Given two versions of a package Squall does not have, as local wheels (no network)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for version in ("1.0", "2.0"):
        make_wheel(wheels, "sqdeptest", version)
    # and the submitter's own copy of 1.0 (the topology file imports it, as a developer has it)
    client_lib = tmp_path / "client-lib"
    with zipfile.ZipFile(wheels / "sqdeptest-1.0-py3-none-any.whl") as zf:
        zf.extractall(client_lib)
    reports = tmp_path / "reports"
    reports.mkdir()
    requirements = {}
    for label, line in (("one", "sqdeptest==1.0\nstreamparse>=4.0"), ("two", "sqdeptest==2.0"),
                        ("bad", "sqdeptest==1.0\nno-such-sqdep==9.9")):
        requirements[label] = tmp_path / f"{label}.txt"
        requirements[label].write_text(f"--no-index\n--find-links {wheels}\n{line}\n")
    # (the admin's choice, in the cluster's conf: requirements may name paths under the wheels' directory)
    cluster = make_cluster(supervisors=2, slots=2, conf={
        "supervisor.env.cache.grace.secs": 1, "supervisor.assignments.sync.secs": 1,
        "nimbus.monitor.freq.secs": 1, "squall.env.build.paths": [str(wheels)]})
    nimbus_dir = cluster.root / "squall-local"
    nodes = [cluster.supervisor_dir(i) for i in range(2)]

    def submit(name: str, label: str, workers: int) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(client_lib), str(REPO)])}
        argv = [sys.executable, "-m", "squall.cli", "submit", "--config", str(cluster.config_file), TOPOLOGY,
                "--name", name, "--requirements", str(requirements[label]),
                "--conf", f"squall.test.dir={reports}", "--conf", f"topology.workers={workers}"]
        return subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=REPO, env=env,
                              check=False)

    # When a topology needs a package no index has: refused with pip's words, nothing left
    bad = submit("deps-bad", "bad", 1)
    assert bad.returncode != 0
    assert "no-such-sqdep" in bad.stderr and "No matching distribution" in bad.stderr, bad.stderr
    assert "no topologies running" in squall_cli(cluster, "list").stdout
    assert env_dirs(nimbus_dir) == set() and all(env_dirs(n) == set() for n in nodes)

    # When one topology runs on 1.0 (streamparse is Squall's own) and another on 2.0
    one = submit("deps-one", "one", 2)
    assert one.returncode == 0, one.stderr
    assert "streamparse>=4.0: provided by Squall" in one.stderr
    assert "built on nimbus" in one.stdout, one.stdout
    two = submit("deps-two", "two", 1)
    assert two.returncode == 0, two.stderr

    # Then each sees its own version, on both supervisors, with its environment's Python
    poll_for(lambda: len({r["python"] for r in seen(reports, "deps-one")}) == 2 and seen(reports, "deps-two"),
             timeout=60, message="both topologies' bolts ran")
    ones, twos = seen(reports, "deps-one"), seen(reports, "deps-two")
    assert {r["version"] for r in ones} == {"1.0"} and {r["version"] for r in twos} == {"2.0"}
    env_one = {Path(r["python"]).parents[1] for r in ones}
    assert {p.parents[1] for p in env_one} == set(nodes)  # <node>/envs/<hash>: one on each node
    assert all(r["module"].startswith(str(Path(r["python"]).parents[1])) for r in ones + twos)
    assert len(env_dirs(nimbus_dir)) == 2

    # When the same requirements are submitted again: nothing is built, anywhere
    ready_before = {p: (p / ".ready").stat().st_ino for p in env_one}
    again = submit("deps-again", "one", 1)
    assert again.returncode == 0, again.stderr
    assert "cached on nimbus" in again.stdout and "built" not in again.stdout.split("cached")[0][-80:]
    poll_for(lambda: seen(reports, "deps-again"), timeout=60, message="the second topology on 1.0 ran")
    assert {Path(r["python"]).parents[1] for r in seen(reports, "deps-again")} <= env_one
    assert {p: (p / ".ready").stat().st_ino for p in env_one} == ready_before

    # When the only topology on 2.0 is killed: its environment goes after the grace period
    env_two = {Path(r["python"]).parents[1] for r in twos}
    squall_cli(cluster, "kill", "deps-two", "-w", "0")
    poll_for(lambda: not any(p.exists() for p in env_two) and len(env_dirs(nimbus_dir)) == 1, timeout=30,
             message="the unused environment removed on its node and on nimbus")
    assert all(p.exists() for p in env_one)

    # A streamparse project as `squall sparse quickstart` writes it (from streamparse import ...,
    # virtualenvs/wordcount.txt naming streamparse): `squall sparse submit` in its directory
    project = quickstart("wordcount", tmp_path)
    # whose topology imports its bolt as streamparse's own examples/redis project does
    # (`from src.bolts import ...`: the project root on the path) and its spout as the
    # quickstart does (`from spouts import ...`: src/ on the path), both packed (issue 50)
    topology_file = project / "topologies" / "wordcount.py"
    text = topology_file.read_text()
    assert "from bolts.wordcount import" in text
    topology_file.write_text(text.replace("from bolts.wordcount import", "from src.bolts.wordcount import"))
    # with a package of its own in virtualenvs/wordcount.txt, beside the streamparse line
    with (project / "virtualenvs" / "wordcount.txt").open("a") as reqs:
        reqs.write(f"--no-index\n--find-links {wheels}\nsqdeptest==2.0\n")

    def sparse(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        # The installed command, as users run it (python -m would put the project's directory
        # on the path, which the command does not)
        squall = str(Path(sys.executable).parent / "squall")
        argv = [squall, "--config", str(cluster.config_file), "sparse", *args]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=project, check=False)
        assert done.returncode == 0 or not check, f"sparse {args}: {done.stdout}\n{done.stderr}"
        return done

    submitted = sparse("submit", "-w", "1")
    assert "submitted topology wordcount" in submitted.stdout
    assert re.search(r"environment \w+ \(1 requirements?\): built on nimbus", submitted.stdout)
    assert "streamparse: provided by Squall" in submitted.stderr
    assert "imports 'src'" not in submitted.stderr  # loaded as it is: src.bolts found, not looked for
    assert "src/bolts/wordcount.py" in submitted.stdout and "spouts/words.py" in submitted.stdout  # packed
    assert "wordcount" in sparse("list").stdout
    # Then its bolt counts in a worker, each task's running total logged at each thousand
    counted = re.compile(r"counted \[([\d,]+)\] words .*task=(\d+)")

    def totals() -> dict[str, list[int]]:
        by_task: dict[str, list[int]] = {}
        for line in sparse("tail", check=False).stdout.splitlines():  # no log yet: the env builds
            found = counted.search(line)
            if found:
                by_task.setdefault(found[2], []).append(int(found[1].replace(",", "")))
        return by_task

    logged = poll_for(totals, timeout=60, message="the quickstart's bolt logging its counts")
    for task, values in logged.items():
        assert all(v % 1000 == 0 for v in values) and values == sorted(set(values)), (task, values)
    sparse("kill", "--wait", "0")
