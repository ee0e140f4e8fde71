"""examples/flux/wordcount.yaml submitted to the dev cluster (ZooKeeper,
nimbus, 2 supervisors, two worker processes) counts every word of
every sentence, as the Python word count does: the same count for every word."""

from __future__ import annotations

import random
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import squall.flux
from squall.testing import poll_for
from squall.worker.plan import plan_topology
from tests.cluster.conftest import REPO, squall_cli

pytestmark = pytest.mark.timeout(120)

SENTENCES = 400

# A recorder beside the example: wordcount.yaml included unchanged, and a bolt that
# appends every (word, running count) the count bolt emits to a file per task.
RECORD_YAML = """\
name: "WordCountRecorded"
includes:
  - file: "wordcount.yaml"
    override: false
bolts:
  - id: "record"
    className: "recorder.Record"
    parallelism: 2
streams:
  - from: "count"
    to: "record"
    grouping:
      type: SHUFFLE
"""
RECORDER = """\
from pathlib import Path
from squall import Bolt

class Record(Bolt):
    def initialize(self, conf, context):
        self.out = open(Path(conf["record.dir"]) / f"task-{context.task_id}.txt", "a")
    def process(self, tup):
        self.out.write(f"{tup.values.word} {tup.values.count}\\n")
        self.out.flush()
"""


def test_the_flux_word_count_on_the_dev_cluster(make_cluster: Any, tmp_path: Path) -> None:
    # Given a dev cluster of two supervisors
    cluster = make_cluster(supervisors=2, slots=2)
    # When the YAML file is submitted as a Python topology file is, its spout bounded
    proc = squall_cli(cluster, "submit", "examples/flux/wordcount.yaml",
                      "--conf", f"sentences.limit={SENTENCES}", "--conf", "topology.workers=2")
    assert "submitted topology WordCount" in proc.stdout
    assert "resources/splitsentence.py" in proc.stdout  # the multilang child travels in the code package

    def components() -> dict[str, Any]:
        return cluster.api("GET", "topologies/WordCount").get("components", {})

    # Then nimbus's statistics show every sentence acked and 8 words counted per sentence
    poll_for(lambda: components().get("sentences", {}).get("acked", 0) == SENTENCES, timeout=60,
             message=f"{SENTENCES} sentences acked (now {components().get('sentences')})")
    poll_for(lambda: components().get("count", {}).get("executed", 0) == 8 * SENTENCES, timeout=30,
             message=f"{8 * SENTENCES} words counted (now {components().get('count')})")
    stats = components()
    assert stats["sentences"].get("failed", 0) == 0
    assert stats["split"]["executed"] == SENTENCES
    # in two worker processes
    assert len(cluster.worker_pids()) == 2


def test_submit_with_filters_and_includes_on_the_dev_cluster(make_cluster: Any) -> None:
    # Given the dev variant, which includes wordcount.yaml and takes its limit from dev.properties
    cluster = make_cluster(supervisors=2, slots=1)
    proc = squall_cli(cluster, "submit", "examples/flux/wordcount-dev.yaml",
                      "--filter", "examples/flux/dev.properties", "--env-filter")
    assert "submitted topology WordCountDev" in proc.stdout

    def components() -> dict[str, Any]:
        return cluster.api("GET", "topologies/WordCountDev").get("components", {})

    # Then the workers ran with the filtered config: sentences.limit=2000 from the properties file
    poll_for(lambda: components().get("sentences", {}).get("acked", 0) == 2000, timeout=60,
             message=f"2000 sentences acked (now {components().get('sentences')})")
    poll_for(lambda: components().get("count", {}).get("executed", 0) == 16000, timeout=30,
             message=f"16000 words counted (now {components().get('count')})")


def test_the_flux_word_count_on_the_dev_cluster_counts_each_word_as_python_does(
        make_cluster: Any, tmp_path: Path) -> None:
    # Given the example's directory with a recorder bolt added after its count bolt
    flux = tmp_path / "flux"
    shutil.copytree(REPO / "examples" / "flux", flux)
    (flux / "record.yaml").write_text(RECORD_YAML)
    (flux / "recorder.py").write_text(RECORDER)
    out = tmp_path / "counts"
    out.mkdir()
    cluster = make_cluster(supervisors=2, slots=2)
    conf = {"sentences.limit": SENTENCES, "topology.workers": 2, "record.dir": str(out)}
    # When it runs on two workers: the fields grouping sends half of the words across
    squall_cli(cluster, "submit", str(flux / "record.yaml"), *[a for k, v in conf.items()
                                                                  for a in ("--conf", f"{k}={v}")])

    def recorded() -> list[str]:
        return [line for f in out.glob("task-*.txt") for line in f.read_text().splitlines()]

    poll_for(lambda: len(recorded()) == 8 * SENTENCES, timeout=60,
             message=f"{8 * SENTENCES} counts recorded (now {len(recorded())})")
    # Then each word's last count is what the Python word count's spout sends of it:
    # the spout draws its sentences from Random(its task id), as examples/wordcount.py's does
    counts: Counter[str] = Counter()
    for line in recorded():
        word, n = line.split()
        counts[word] = max(counts[word], int(n))
    plan = plan_topology(squall.flux.load(str(flux / "record.yaml")).definition(), overrides=conf)
    (spout_task,) = plan.component_tasks["sentences"]
    rng = random.Random(spout_task)
    vocabulary = [f"word{i}" for i in range(1000)]
    expected = Counter(w for _ in range(SENTENCES) for w in rng.choices(vocabulary, k=8))
    assert counts == expected
    assert len(cluster.worker_pids()) == 2
