"""examples/flux/wordcount.yaml submitted to the dev cluster (ZooKeeper,
nimbus, 2 supervisors, two worker processes) counts every word of
every sentence, as the Python word count does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from squall.testing import poll_for
from tests.cluster.conftest import squall_cli

pytestmark = pytest.mark.timeout(120)

SENTENCES = 400


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
