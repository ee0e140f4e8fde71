"""examples/flux/wordcount.yaml runs locally and counts what the Python word
count (examples/wordcount.py) counts: the same counts from the same sentences."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import squall.flux
from squall.cli.args import load_topology
from squall.local.cluster import LocalCluster
from squall.testing import complete_topology, poll_for

pytestmark = pytest.mark.timeout(90)

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "flux" / "wordcount.yaml"
PYTHON_EXAMPLE = REPO / "examples" / "wordcount.py"
VOCABULARY = [f"word{i}" for i in range(1000)]


def final_counts(rows: list[list[object]]) -> Counter[str]:
    """The count bolt emits (word, running count): the last one of a word is its count."""
    counts: Counter[str] = Counter()
    for word, n in rows:
        counts[str(word)] = max(counts[str(word)], int(n))  # type: ignore[call-overload]
    return counts


def test_the_same_counts_as_the_python_word_count() -> None:
    # Given the same 300 sentences fed to both topologies' sentence spout
    rng = random.Random(7)
    sentences = [[" ".join(rng.choices(VOCABULARY[:50], k=8))] for _ in range(300)]
    expected = Counter(w for (s,) in sentences for w in s.split())
    # When each runs to completion (the YAML's splitter is a multilang child process)
    from_yaml = complete_topology(squall.flux.load(str(EXAMPLE)), {"sentences": sentences}, timeout=60)
    from_python = complete_topology(load_topology(str(PYTHON_EXAMPLE)), {"sentences": sentences}, timeout=60)
    # Then both count every word exactly, the same
    assert final_counts(from_yaml["count"]) == expected
    assert final_counts(from_python["count"]) == expected
    assert len(from_yaml["split"]) == len(from_python["split"]) == 2400


def test_the_example_runs_locally_with_its_own_spout() -> None:
    topology = squall.flux.load(str(EXAMPLE))
    with LocalCluster() as cluster:
        runner = cluster.submit("flux-wc", topology, {"sentences.limit": 300})
        poll_for(lambda: runner.stats().get("sentences", {}).get("acked", 0) == 300, 30,
                 "300 sentences acked")
        poll_for(runner.idle, 10, "the topology to go idle")
        counted: Counter[str] = Counter()
        for worker in runner.workers:
            for executor in worker.executors:
                if executor.component == "count":
                    for task in executor.bolts.values():
                        counted.update(task.bolt.counts)
        spout_task = runner.plan.component_tasks["sentences"][0]
        assert list(runner.errors) == []
    # The spout is the Python word count's: its sentences come from Random(task id).
    rng = random.Random(spout_task)
    expected = Counter(w for _ in range(300) for w in rng.choices(VOCABULARY, k=8))
    assert counted == expected


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "squall.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, check=False)


def last_stats(stdout: str) -> dict[str, list[str]]:
    block = stdout.rsplit("--- ", 1)[-1].splitlines()[2:]
    return {line.split()[0]: line.split()[1:] for line in block if line.strip()}


def test_squall_local_runs_the_yaml_file() -> None:
    proc = cli("local", "examples/flux/wordcount.yaml", "--duration", "6", "--conf", "sentences.limit=200")
    assert proc.returncode == 0, proc.stderr
    stats = last_stats(proc.stdout)
    # emitted, executed, acked, failed
    assert stats["sentences"][2:4] == ["200", "0"], proc.stdout
    assert stats["count"][1] == "1600", proc.stdout


def test_squall_local_with_both_filters() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "squall.cli", "local", "examples/flux/wordcount-dev.yaml",
         "--filter", "examples/flux/dev.properties", "--env-filter", "--duration", "6"],
        capture_output=True, text=True, timeout=60, cwd=REPO, check=False,
        env={**os.environ, "USER": "flux-test"})
    assert proc.returncode == 0, proc.stderr
    stats = last_stats(proc.stdout)
    assert "--- WordCountDev after" in proc.stdout  # the including file's name
    assert stats["sentences"][2:4] == ["2000", "0"], proc.stdout  # sentences.limit from dev.properties
    assert stats["count"][1] == "16000", proc.stdout


def test_squall_flux_dry_run_prints_the_graph_and_the_resolved_config() -> None:
    proc = cli("flux", "--dry-run", "examples/flux/wordcount-dev.yaml",
               "--filter", "examples/flux/dev.properties", "--conf", "topology.workers=2")
    assert proc.returncode == 0, proc.stderr
    PY = sys.executable  # noqa: N806 - `python` in the file: the interpreter that read it
    assert proc.stdout == f"""\
topology WordCountDev (from examples/flux/wordcount-dev.yaml)
spouts:
  sentences  words:RandomSentences  parallelism=1 tasks=1  emits: default(sentence)
bolts:
  split  squall.multilang.bolt:ShellBolt [{PY} splitsentence.py]  parallelism=2 tasks=2  emits: default(word)
  count  words:CountWords  parallelism=2 tasks=2  emits: default(word, count)
streams:
  sentences --[default: SHUFFLE]--> split
  split --[default: FIELDS(word)]--> count
config:
  sentences.limit: 2000
  topology.max.spout.pending: 1000
  topology.tick.tuple.freq.secs: 5
  topology.workers: 2
  wordcount.user: ${{ENV-USER}}
"""


def test_squall_flux_reports_an_error_with_its_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    (tmp_path / "words.py").write_text((EXAMPLE.parent / "words.py").read_text())
    bad.write_text(EXAMPLE.read_text().replace("type: SHUFFLE", "type: SHUFLE"))
    proc = cli("flux", "--dry-run", str(bad))
    assert proc.returncode == 1
    line = next(i for i, text in enumerate(bad.read_text().splitlines(), 1) if "SHUFLE" in text)
    assert proc.stderr.startswith(f"squall: error: {bad}:{line}: key 'type': unknown grouping type 'SHUFLE'")
