"""A Flux topology with a StatefulBolt: every bolt then runs inside the
checkpointing wrapper, and each is still built as the file says
(constructorArgs, properties, configMethods), stateful or not; so is a
CheckpointedSpout, which runs inside the checkpoint spout."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

import squall.flux
from squall.local.cluster import LocalCluster
from squall.testing import poll_for
from tests.flux.helpers import write

pytestmark = pytest.mark.timeout(60)

STATEFUL = """\
name: "stateful"
config:
  topology.state.checkpoint.interval.ms: 100
spouts:
  - id: "words"
    className: "{spout}"
    constructorArgs: ["a", "b", "a", "c", "a"]
bolts:
  - id: "tag"
    className: "tests.flux.parts.Tag"
    constructorArgs: ["t-"]
  - id: "count"
    className: "tests.flux.parts.ScaledCount"
    parallelism: 2
    constructorArgs: [5]
    properties:
      - name: "prefix"
        value: "n:"
    configMethods:
      - name: "scale_by"
        args: [2]
streams:
  - {{from: words, to: tag, grouping: {{type: SHUFFLE}}}}
  - from: "tag"
    to: "count"
    grouping:
      type: FIELDS
      args: ["word"]
"""

# Each word counted 5 * 2 at a time, under the prefix property, after the tag bolt's constructor arg.
EXPECTED = {"n:t-a": 30, "n:t-b": 10, "n:t-c": 10}


def run(tmp_path: Path, spout: str) -> tuple[dict[str, int], list[str], Any]:
    topology = squall.flux.load(str(write(tmp_path, STATEFUL.format(spout=spout))))
    totals: dict[str, int] = {}
    tagged: list[str] = []
    lock = threading.Lock()

    def capture(component: str, stream: str, values: Any) -> None:
        if stream != "default":
            return  # the checkpoint barriers
        with lock:
            if component == "count":
                totals[values[0]] = max(totals.get(values[0], 0), values[1])
            elif component == "tag":
                tagged.append(values[0])

    with LocalCluster() as cluster:
        conf = {"topology.state.provider.config": {"path": str(tmp_path / "state.sqlite")}}
        runner = cluster.submit("stateful", topology, conf, capture=capture)
        poll_for(lambda: totals == EXPECTED, timeout=30, message=f"the scaled counts (now {totals})")
        errors = list(runner.errors)
    return totals, tagged, errors


def test_a_flux_stateful_bolt_and_a_plain_bolt_beside_it_are_built_as_the_file_says(tmp_path: Path) -> None:
    # Given a Flux file with a StatefulBolt taking a constructor arg, a property and a config method,
    # and a plain bolt taking a constructor arg, fed by a reliable spout with constructor args
    # (which replays what the counter fails before its state is restored)
    totals, tagged, errors = run(tmp_path, "tests.flux.parts.ReplayingWords")
    # Then the counts are scaled and keyed as the file says, after the plain bolt's tag
    assert totals == EXPECTED
    assert set(tagged) == {"t-a", "t-b", "t-c"}  # a replayed word is tagged again
    assert errors == []


def test_a_flux_checkpointed_spout_is_built_as_the_file_says(tmp_path: Path) -> None:
    # Given the same bolts fed by a CheckpointedSpout whose words are its constructor args
    totals, tagged, errors = run(tmp_path, "tests.flux.parts.RewindingWords")
    # Then the spout emitted them: the same counts
    assert totals == EXPECTED
    assert set(tagged) == {"t-a", "t-b", "t-c"}
    assert errors == []


def test_the_checkpointing_rewrite_carries_each_recipe_to_the_wrapped_class(tmp_path: Path) -> None:
    from squall.topology.loading import build_instance

    defn = squall.flux.load(str(write(tmp_path, STATEFUL.format(spout="tests.flux.parts.RewindingWords")))
                            ).definition()
    count = defn.components["count"].options
    bolt = build_instance(count["bolt"], count["bolt_options"])
    assert (bolt.multiplier, bolt.prefix) == (10, "n:")
    tag = defn.components["tag"].options
    assert build_instance(tag["bolt"], tag["bolt_options"]).tag == "t-"
    words = defn.components["words"].options
    assert build_instance(words["spout"], words["spout_options"]).words == ["a", "b", "a", "c", "a"]
