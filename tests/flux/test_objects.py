"""constructorArgs, factory, properties, configMethods and refs reach the
instances the tasks run (in a LocalCluster), and objects build from plain data."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

import squall.flux
from squall.flux.objects import OBJECT, RecipeError, construct
from squall.local.cluster import LocalCluster
from squall.testing import poll_for
from squall.topology.loading import resolve_class
from tests.flux import parts
from tests.flux.helpers import write

pytestmark = pytest.mark.timeout(60)

OBJECTS = """\
name: "objects"
components:
  - id: "angle"
    className: "tests.flux.parts.Prefix"
    constructorArgs: ["<"]
    properties:
      - name: "suffix"
        value: ">"
  - id: "star"
    className: "tests.flux.parts.Prefix"
    constructorArgs: ["*"]
spouts:
  - id: "words"
    className: "tests.flux.parts.Words"
    constructorArgs: ["a", "b", "c"]
bolts:
  - id: "decorate"
    className: "tests.flux.parts.Decorate"
    constructorArgs:
      - ref: "angle"
      - 2
    properties:
      - name: "upper"
        value: true
    configMethods:
      - name: "with_extra"
        args:
          - reflist: ["star", "star"]
  - id: "factory"
    className: "tests.flux.parts.Decorate"
    factory: "make"
    factoryArgs: [3]
streams:
  - {from: words, to: decorate, grouping: {type: SHUFFLE}}
  - {from: words, to: factory, grouping: {type: SHUFFLE}}
"""


def test_tasks_run_instances_built_as_the_file_says(tmp_path: Path) -> None:
    topology = squall.flux.load(str(write(tmp_path, OBJECTS)))
    captured: dict[str, list[str]] = {}
    lock = threading.Lock()

    def capture(component: str, stream: str, values: Any) -> None:
        with lock:
            captured.setdefault(component, []).append(values[0])

    with LocalCluster() as cluster:
        cluster.submit("objects", topology, {}, capture=capture)
        poll_for(lambda: len(captured.get("decorate", [])) == 6 and len(captured.get("factory", [])) == 9,
                 timeout=30, message=f"the bolts' output (now {captured})")
    # <word> by the ref'd component with its property, then ** before it from the two reflist
    # entries (configMethods), upper-cased by a property, twice (a constructor arg)
    assert sorted(captured["decorate"]) == sorted(2 * ["**<A>", "**<B>", "**<C>"])
    assert sorted(captured["factory"]) == sorted(3 * ["a", "b", "c"])  # Decorate.make(3)
    assert sorted(captured["words"]) == ["a", "b", "c"]  # the spout's constructorArgs


def test_a_recipe_builds_one_shared_object_per_referenced_component() -> None:
    star = {"id": "star", "class": "tests.flux.parts:Prefix", "args": ["*"]}
    recipe = {"class": "tests.flux.parts:Decorate", "args": [{OBJECT: star}],
              "calls": [["with_extra", [[{OBJECT: star}]]]]}
    bolt = construct(parts.Decorate, recipe, resolve_class)
    assert bolt.prefix is bolt.extra[0]  # one "star" within one task's build


def test_recipe_errors_say_which_step() -> None:
    with pytest.raises(RecipeError) as info:
        construct(parts.Decorate, {"properties": [["prefix", 1]], "calls": [["nope", []]]}, resolve_class)
    assert info.value.step == ("configMethods", 0)


def test_a_file_written_for_storm_runs() -> None:
    # Storm's layout: '---', hyphenated ids, Storm's FluxShellBolt class name, named streams
    topology = squall.flux.load(str(Path(__file__).parent / "files" / "storm_shell.yaml"))
    captured: list[str] = []

    def capture(component: str, stream: str, values: Any) -> None:
        if component == "count":
            captured.append(values[0])

    with LocalCluster() as cluster:
        runner = cluster.submit("shell-topology", topology, {}, capture=capture)
        poll_for(lambda: len(captured) == 6, timeout=30, message=f"6 words counted (now {captured})")
        assert list(runner.errors) == []
    assert sorted(captured) == sorted(["the", "cow", "jumped", "over", "the", "moon"])


def test_recipes_travel_as_json_as_a_submitted_topology_does(tmp_path: Path) -> None:
    import json

    from squall.topology.class_check import verify_loadable
    from squall.topology.loading import instantiate
    from squall.topology.topology import definition_from_dict

    defn = squall.flux.load(str(write(tmp_path, OBJECTS))).definition()
    received = definition_from_dict(json.loads(json.dumps(defn.to_dict())))  # what nimbus rebuilds
    verify_loadable(received)
    bolt = instantiate(received.components["decorate"])
    assert (bolt.prefix.text, bolt.prefix.suffix, bolt.repeat, bolt.upper) == ("<", ">", 2, True)
    assert [p.text for p in bolt.extra] == ["*", "*"]
    assert instantiate(received.components["factory"]).repeat == 3


SHELL_SPOUT = """\
name: "shell-spout"
spouts:
  - id: "sentences"
    className: "org.apache.storm.flux.wrappers.spouts.FluxShellSpout"
    constructorArgs:
      - ["python", "sentences.py"]
      - ["word"]
    properties:
      - name: "cwd"
        value: "{cwd}"
bolts:
  - id: "sink"
    className: "tests.flux.parts.Sink"
streams:
  - {{from: sentences, to: sink, grouping: {{type: SHUFFLE}}}}
"""


def test_a_multilang_spout(tmp_path: Path) -> None:
    resources = Path(__file__).resolve().parents[2] / "examples" / "multilang" / "resources"
    topology = squall.flux.load(str(write(tmp_path, SHELL_SPOUT.format(cwd=resources))))
    captured: list[str] = []

    def capture(component: str, stream: str, values: Any) -> None:
        if component == "sink":
            captured.append(values[0])

    with LocalCluster() as cluster:
        runner = cluster.submit("shell-spout", topology, {"sentences.limit": 20}, capture=capture)
        poll_for(lambda: runner.stats().get("sentences", {}).get("acked", 0) == 20, timeout=30,
                 message="20 sentences from the child spout acked")
        assert list(runner.errors) == []
    assert len(captured) == 20 and all(len(s.split()) == 6 for s in captured)
