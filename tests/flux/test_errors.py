"""Every error in a Flux file names the file, the line and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

import squall.flux
from tests.flux.helpers import BASE, assert_points_at, error_of, write

pytestmark = pytest.mark.timeout(30)


def broken(tmp_path: Path, old: str, new: str) -> Path:
    assert old in BASE
    return write(tmp_path, BASE.replace(old, new, 1))


def test_the_base_file_is_valid(tmp_path: Path) -> None:
    topology = squall.flux.load(str(write(tmp_path, BASE)))
    assert sorted(topology.definition().components) == ["sink", "words"]


def test_an_unknown_key_of_a_bolt(tmp_path: Path) -> None:
    path = broken(tmp_path, '    className: "tests.flux.parts.Sink"\n',
                  '    className: "tests.flux.parts.Sink"\n    paralelism: 2\n')
    message = error_of(path)
    assert_points_at(message, path, 9, "paralelism")
    assert "unknown key" in message and "parallelism" in message  # the known keys are listed


def test_an_unknown_top_level_key(tmp_path: Path) -> None:
    path = broken(tmp_path, "bolts:\n", "bolt:\n")
    message = error_of(path)
    assert_points_at(message, path, 6, "bolt")
    assert "unknown key in the topology" in message


def test_an_unknown_key_in_a_grouping(tmp_path: Path) -> None:
    path = broken(tmp_path, '      args: ["word"]\n', '      args: ["word"]\n      fields: ["word"]\n')
    assert_points_at(error_of(path), path, 15, "fields")


@pytest.mark.parametrize(("key", "line"), [("from", 10), ("to", 11)])
def test_a_stream_end_naming_no_component(tmp_path: Path, key: str, line: int) -> None:
    old = {"from": '  - from: "words"', "to": '    to: "sink"'}[key]
    path = broken(tmp_path, old, old.replace('"words"', '"wrods"').replace('"sink"', '"snik"'))
    message = error_of(path)
    assert_points_at(message, path, line, key)
    assert "names no spout or bolt" in message and "known: words, sink" in message


@pytest.mark.parametrize("class_name", ["tests.flux.parts.Nope", "tests.flux.no_such_module.Sink",
                                        "Sink", "tests.flux.parts:Nope"])
def test_a_class_that_cannot_be_imported(tmp_path: Path, class_name: str) -> None:
    path = broken(tmp_path, '"tests.flux.parts.Sink"', f'"{class_name}"')
    message = error_of(path)
    assert_points_at(message, path, 8, "className")
    assert class_name in message


def test_a_class_of_the_wrong_kind(tmp_path: Path) -> None:
    path = broken(tmp_path, '"tests.flux.parts.Sink"', '"tests.flux.parts.Prefix"')
    message = error_of(path)
    assert_points_at(message, path, 8, "className")
    assert "is not a Bolt subclass" in message


def test_a_grouping_type_that_does_not_exist(tmp_path: Path) -> None:
    path = broken(tmp_path, "type: FIELDS", "type: FIELDZ")
    message = error_of(path)
    assert_points_at(message, path, 13, "type")
    assert "unknown grouping type 'FIELDZ'" in message and "LOCAL_OR_SHUFFLE" in message


def test_a_field_the_source_does_not_declare(tmp_path: Path) -> None:
    path = broken(tmp_path, 'args: ["word"]', 'args: ["wrod"]')
    message = error_of(path)
    assert_points_at(message, path, 14, "args")
    assert "field 'wrod' is not declared by 'words'" in message and "['word']" in message


def test_a_stream_the_source_does_not_declare(tmp_path: Path) -> None:
    path = broken(tmp_path, "      type: FIELDS\n", "      type: FIELDS\n      streamId: extra\n")
    message = error_of(path)
    assert_points_at(message, path, 14, "streamId")
    assert "declares no stream 'extra'" in message


def test_a_spout_as_the_target_of_a_stream(tmp_path: Path) -> None:
    path = broken(tmp_path, '    to: "sink"', '    to: "words"')
    assert_points_at(error_of(path), path, 11, "to")


def test_constructor_arguments_the_class_refuses(tmp_path: Path) -> None:
    path = broken(tmp_path, '    className: "tests.flux.parts.Sink"\n',
                  '    className: "tests.flux.parts.Sink"\n    constructorArgs: [1, 2]\n')
    message = error_of(path)
    assert_points_at(message, path, 9, "constructorArgs")
    assert "cannot construct Sink(1, 2): TypeError" in message


def test_a_ref_to_no_component(tmp_path: Path) -> None:
    path = broken(tmp_path, '    constructorArgs: ["a", "b"]', '    constructorArgs: [{ref: "nothing"}]')
    message = error_of(path)
    assert_points_at(message, path, 5, "ref")
    assert "'nothing' names no component" in message


def test_a_config_method_the_class_lacks(tmp_path: Path) -> None:
    path = broken(tmp_path, '    className: "tests.flux.parts.Sink"\n',
                  '    className: "tests.flux.parts.Sink"\n    configMethods:\n'
                  '      - name: "withNothing"\n        args: [1]\n')
    message = error_of(path)
    assert_points_at(message, path, 10, "configMethods")
    assert "has no method 'withNothing'" in message


def test_a_duplicate_id(tmp_path: Path) -> None:
    path = broken(tmp_path, '  - id: "sink"', '  - id: "words"')
    message = error_of(path)
    assert_points_at(message, path, 7, "id")
    assert "already used by a spout" in message


def test_a_bad_parallelism(tmp_path: Path) -> None:
    path = broken(tmp_path, '    className: "tests.flux.parts.Sink"\n',
                  '    className: "tests.flux.parts.Sink"\n    parallelism: 0\n')
    assert_points_at(error_of(path), path, 9, "parallelism")


def test_an_ill_typed_config_key(tmp_path: Path) -> None:
    path = broken(tmp_path, 'name: "t"\n', 'name: "t"\nconfig:\n  topology.workers: "two"\n')
    message = error_of(path)
    assert_points_at(message, path, 3, "topology.workers")
    assert "must be int" in message


def test_a_yaml_syntax_error_names_its_line(tmp_path: Path) -> None:
    path = broken(tmp_path, '    to: "sink"', '    to: ["sink"')
    message = error_of(path)
    assert message.startswith(f"{path}:") and "not valid YAML" in message


def test_an_error_in_an_included_file_names_that_file(tmp_path: Path) -> None:
    text = 'bolts:\n  - id: "other"\n    className: "tests.flux.parts.Nope"\n'
    included = write(tmp_path, text, "inc.yaml")
    path = broken(tmp_path, 'name: "t"\n', 'name: "t"\nincludes:\n  - file: "inc.yaml"\n')
    assert_points_at(error_of(path), included, 3, "className")


def test_unsupported_storm_sections_are_refused(tmp_path: Path) -> None:
    path = broken(tmp_path, 'name: "t"\n', 'name: "t"\ntopologySource:\n  className: "x.Y"\n')
    message = error_of(path)
    assert_points_at(message, path, 2, "topologySource")
    assert "not supported" in message


def test_a_source_without_a_default_stream(tmp_path: Path) -> None:
    text = BASE.replace('  - from: "words"', '  - from: "quiet"').replace("streams:\n", (
        '  - id: "quiet"\n    className: "tests.flux.parts.Quiet"\nstreams:\n'))
    text = text.replace("type: FIELDS", "type: SHUFFLE").replace('      args: ["word"]\n', "")
    path = write(tmp_path, text)
    message = error_of(path)
    assert_points_at(message, path, 12, "from")
    assert "'quiet' declares no stream 'default' (its streams: none)" in message


def test_the_resource_keys_become_the_components_declaration(tmp_path: Path) -> None:
    path = broken(tmp_path, '    className: "tests.flux.parts.Sink"\n',
                  '    className: "tests.flux.parts.Sink"\n    onHeapMemoryLoad: 256\n'
                  '    offHeapMemoryLoad: 64.5\n    cpuLoad: 50\n')
    sink = squall.flux.load(str(path)).definition().components["sink"]
    assert sink.config["topology.component.resources.onheap.memory.mb"] == 256
    assert sink.config["topology.component.resources.offheap.memory.mb"] == 64.5
    assert sink.config["topology.component.cpu.pcore.percent"] == 50


@pytest.mark.parametrize("value", ["-1", '"lots"', "true", ".nan"])
def test_a_bad_resource_value_names_its_key(tmp_path: Path, value: str) -> None:
    path = broken(tmp_path, '    className: "tests.flux.parts.Sink"\n',
                  f'    className: "tests.flux.parts.Sink"\n    onHeapMemoryLoad: {value}\n')
    message = error_of(path)
    assert_points_at(message, path, 9, "onHeapMemoryLoad")
    assert "topology.component.resources.onheap.memory.mb must be" in message
