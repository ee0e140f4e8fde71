"""What a Flux file resolves to: includes and overrides, both filters, every
grouping type, and the same definition a Python topology file gives."""

from __future__ import annotations

from pathlib import Path

import pytest

import squall.flux
from squall import Grouping, Topology
from squall.multilang import ShellBolt
from tests.flux import parts
from tests.flux.helpers import BASE, write

pytestmark = pytest.mark.timeout(30)

MAIN = """\
name: "main"
includes:
  - file: "inc.yaml"
    override: {override}
config:
  topology.workers: 1
  main.only: "main"
spouts:
  - id: "words"
    className: "tests.flux.parts.Words"
bolts:
  - id: "sink"
    className: "tests.flux.parts.Sink"
    parallelism: 1
streams:
  - from: "words"
    to: "sink"
    grouping:
      type: SHUFFLE
"""
INCLUDED = """\
name: "included"
config:
  topology.workers: 3
  included.only: "inc"
bolts:
  - id: "sink"
    className: "tests.flux.parts.Sink"
    parallelism: 4
  - id: "extra"
    className: "tests.flux.parts.Sink"
streams:
  - from: "words"
    to: "extra"
    grouping:
      type: GLOBAL
"""


@pytest.mark.parametrize("override", [False, True])
def test_includes_merge_as_storm_merges_them(tmp_path: Path, override: bool) -> None:
    write(tmp_path, INCLUDED, "inc.yaml")
    path = write(tmp_path, MAIN.format(override=str(override).lower()))
    defn = squall.flux.load(str(path)).definition()
    # override: false -> the including file's name, config keys and bolts win;
    # override: true -> the included file's replace them.  Either way what only one
    # file has is kept, and streams add up.
    assert defn.name == ("included" if override else "main")
    assert defn.config == {"topology.workers": 3 if override else 1, "main.only": "main",
                           "included.only": "inc"}
    assert defn.components["sink"].par == (4 if override else 1)
    assert sorted(defn.components) == ["extra", "sink", "words"]
    assert [(i.component, i.grouping.type) for i in defn.components["extra"].inputs] == [("words", "global")]
    assert [(i.component, i.grouping.type) for i in defn.components["sink"].inputs] == [("words", "shuffle")]


def test_includes_are_not_recursive(tmp_path: Path) -> None:
    # As in Storm: an included file's own includes are ignored.
    write(tmp_path, 'includes:\n  - file: "deeper.yaml"\n' + INCLUDED, "inc.yaml")
    write(tmp_path, 'name: "deeper"\n', "deeper.yaml")
    defn = squall.flux.load(str(write(tmp_path, MAIN.format(override="true")))).definition()
    assert defn.name == "included"


FILTERED = """\
name: "${topology.name}"
config:
  topology.workers: ${workers}
  greeting: "hello ${ENV-FLUX_TEST_USER}, ${ENV-FLUX_TEST_USER}"
  unresolved: "${no.such.key}"
spouts:
  - id: "words"
    className: "tests.flux.parts.Words"
    parallelism: ${spout.parallelism}
bolts:
  - id: "sink"
    className: "tests.flux.parts.Sink"
streams:
  - from: "words"
    to: "sink"
    grouping: {type: "${grouping}"}
"""
PROPERTIES = """\
# a comment
topology.name = filtered
workers: 2
spout.parallelism 3
! another comment
grouping=LOCAL_OR_SHUFFLE
"""


def test_filter_replaces_keys_from_a_properties_file(tmp_path: Path) -> None:
    props = write(tmp_path, PROPERTIES, "dev.properties")
    defn = squall.flux.load(str(write(tmp_path, FILTERED)), filter=str(props)).definition()
    assert defn.name == "filtered"
    assert defn.config["topology.workers"] == 2  # a number, as if written in the file
    assert defn.components["words"].par == 3
    assert defn.components["sink"].inputs[0].grouping.type == "local_or_shuffle"
    # without --env-filter, ${ENV-...} stays; a key the file lacks stays too (Storm warns)
    assert defn.config["greeting"] == "hello ${ENV-FLUX_TEST_USER}, ${ENV-FLUX_TEST_USER}"
    assert defn.config["unresolved"] == "${no.such.key}"


def test_env_filter_replaces_environment_variables(tmp_path: Path) -> None:
    props = write(tmp_path, PROPERTIES, "dev.properties")
    path = write(tmp_path, FILTERED)
    env = {"FLUX_TEST_USER": "ada", "workers": "9"}
    defn = squall.flux.load(str(path), filter=str(props), env_filter=True, env=env).definition()
    assert defn.config["greeting"] == "hello ada, ada"  # every reference of the line
    assert defn.config["topology.workers"] == 2  # ${workers} is a property, not ENV-workers


def test_env_filter_reads_the_process_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLUX_TEST_USER", "grace")
    path = write(tmp_path, BASE.replace('name: "t"', 'name: "${ENV-FLUX_TEST_USER}"'))
    assert squall.flux.load(str(path), env_filter=True).definition().name == "grace"
    assert squall.flux.load(str(path)).definition().name == "${ENV-FLUX_TEST_USER}"


GROUPINGS = """\
name: "groupings"
spouts:
  - id: "src"
    className: "tests.flux.parts.TwoStreams"
bolts:
""" + "".join(f"""\
  - id: "{name}"
    className: "tests.flux.parts.Sink"
    parallelism: 2
""" for name in ("shuffle", "fields", "all", "global", "none", "direct", "local", "custom",
                 "custom_args")) + """\
streams:
  - {from: src, to: shuffle, grouping: {type: SHUFFLE}}
  - {from: src, to: fields, grouping: {type: FIELDS, args: [word, n], streamId: numbered}}
  - {from: src, to: all, grouping: {type: ALL}}
  - {from: src, to: global, grouping: {type: GLOBAL}}
  - {from: src, to: none, grouping: {type: NONE}}
  - {from: src, to: direct, grouping: {type: DIRECT, streamId: direct}}
  - {from: src, to: local, grouping: {type: LOCAL_OR_SHUFFLE}}
  - {from: src, to: custom, grouping: {type: CUSTOM, customClass: {className: tests.flux.parts.FirstTask}}}
  - from: src
    to: custom_args
    grouping:
      type: CUSTOM
      customClass:
        className: tests.flux.parts.FirstTask
        constructorArgs: [1]
"""


def test_every_grouping_type(tmp_path: Path) -> None:
    defn = squall.flux.load(str(write(tmp_path, GROUPINGS))).definition()
    got = {name: c.inputs[0] for name, c in defn.components.items() if c.inputs}
    assert {name: (i.stream, i.grouping.type, i.grouping.fields) for name, i in got.items()} == {
        "shuffle": ("default", "shuffle", ()),
        "fields": ("numbered", "fields", ("word", "n")),
        "all": ("default", "all", ()),
        "global": ("default", "global", ()),
        "none": ("default", "none", ()),
        "direct": ("direct", "direct", ()),
        "local": ("default", "local_or_shuffle", ()),
        "custom": ("default", "custom", ()),
        "custom_args": ("default", "custom", ()),
    }
    assert got["custom"].grouping.custom is parts.FirstTask
    # with constructor arguments, the grouping travels as a recipe built in each task
    from squall.flux.objects import FluxGrouping

    grouping = FluxGrouping(**got["custom_args"].grouping.args)
    grouping.prepare(None, "default", [7, 8])
    assert grouping.choose_tasks(0, ["w"]) == [8]


def test_a_direct_stream_needs_a_direct_grouping(tmp_path: Path) -> None:
    text = GROUPINGS.replace("{type: DIRECT, streamId: direct}", "{type: SHUFFLE, streamId: direct}")
    from tests.flux.helpers import error_of

    path = write(tmp_path, text)
    assert "declared direct: it needs a DIRECT grouping" in error_of(path)


WORDCOUNTISH = """\
name: "Same"
config:
  topology.max.spout.pending: 10
spouts:
  - id: "words"
    className: "tests.flux.parts.Words"
bolts:
  - id: "split"
    className: "squall.multilang.ShellBolt"
    constructorArgs:
      - ["node", "split.js"]
      - ["word"]
    parallelism: 2
  - id: "sink"
    className: "tests.flux.parts.Sink"
    parallelism: 3
    numTasks: 6
streams:
  - from: "words"
    to: "split"
    grouping: {type: SHUFFLE}
  - from: "split"
    to: "sink"
    grouping: {type: FIELDS, args: ["word"]}
"""


def test_the_same_definition_as_a_python_topology(tmp_path: Path) -> None:
    class Same(Topology):
        config = {"topology.max.spout.pending": 10}
        words = parts.Words.spec()
        split = ShellBolt.spec(command=["node"], script="split.js", outputs=["word"], inputs=[words], par=2)
        sink = parts.Sink.spec(inputs={split: Grouping.fields("word")}, par=3, tasks=6)

    from_yaml = squall.flux.load(str(write(tmp_path, WORDCOUNTISH))).definition().to_dict()
    from_python = Same.definition().to_dict()
    # The shell command is spelled differently (a command line vs command + script),
    # and says where it was written; everything else is identical.
    for d in (from_yaml, from_python):
        options = d["components"][1]["options"]
        assert options.pop("defined_in") in (str(tmp_path), str(Path(__file__).parent))
        options["argv"] = options.pop("command") + ([options.pop("script")] if "script" in options else [])
    assert from_yaml == from_python


@pytest.mark.parametrize("ident", ["config", "_abstract", "definition", "spout-1"])
def test_ids_that_are_topology_attributes_or_not_identifiers(tmp_path: Path, ident: str) -> None:
    text = BASE.replace('"sink"', f'"{ident}"')
    defn = squall.flux.load(str(write(tmp_path, text))).definition()
    assert sorted(defn.components) == sorted(["words", ident])
    assert defn.components[ident].inputs[0].component == "words"


def test_the_cli_loader_branches_on_the_suffix(tmp_path: Path) -> None:
    from squall.cli.args import load_topology
    from squall.errors import SquallError

    path = write(tmp_path, BASE, "t.yml")
    assert load_topology(str(path)).definition().name == "t"
    with pytest.raises(SquallError, match="--topology picks a class of a Python file"):
        load_topology(str(path), "T")
    python_file = tmp_path / "t.py"
    python_file.write_text("")
    with pytest.raises(SquallError, match="--filter and --env-filter apply to Flux"):
        load_topology(str(python_file), env_filter=True)
