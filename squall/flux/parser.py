"""Reading a Flux file: YAML nodes with their line marks, keys checked,
``includes`` merged as Storm's FluxParser merges them.

PyYAML composes the file into nodes (each knows its line); values are
constructed from the nodes by PyYAML's safe constructor.  Nothing is built
here: :mod:`squall.flux.builder` turns the merged :class:`FluxFile` into a
topology.  Every error names the file, the line and the key.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
import yaml

from squall.errors import TopologyValidationError
from squall.flux import filters

log = structlog.get_logger("squall.flux.parser")

TOP_KEYS = ("name", "config", "components", "spouts", "bolts", "streams", "includes")
UNSUPPORTED_TOP = {
    "workerHooks": "worker hooks are not supported by Squall",
    "topologySource": "topologySource is not supported: write the topology in Python, or as spouts, "
                      "bolts and streams here",
}
OBJECT_KEYS = ("id", "className", "constructorArgs", "properties", "configMethods", "factory", "factoryArgs")
# Storm's resource hints: the component config keys of the resource-aware scheduler
# (builder._resource_loads).
VERTEX_KEYS = (*OBJECT_KEYS, "parallelism", "numTasks", "config", "onHeapMemoryLoad", "offHeapMemoryLoad",
               "cpuLoad")
STREAM_KEYS = ("name", "from", "to", "grouping")
GROUPING_KEYS = ("type", "args", "streamId", "customClass")
INCLUDE_KEYS = ("file", "resource", "override")
PROPERTY_KEYS = ("name", "value", "ref")
METHOD_KEYS = ("name", "args")


class FluxError(TopologyValidationError):
    """An error in a Flux file: the message starts with ``file:line: key 'k':``."""


class Source:
    """One YAML file: its path (as the user named it) and its constructor."""

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.loader = yaml.SafeLoader(text)

    def close(self) -> None:
        self.loader.dispose()

    def error(self, node: yaml.Node | None, key: str, message: str) -> FluxError:
        line = node.start_mark.line + 1 if node is not None else 1
        return FluxError(f"{self.path}:{line}: key {key!r}: {message}")

    def value(self, node: yaml.Node) -> Any:
        return self.loader.construct_object(node, deep=True)

    def text(self, node: yaml.Node, key: str) -> str:
        value = self.value(node)
        if not isinstance(value, str) or not value:
            raise self.error(node, key, f"must be a non-empty string, got {value!r}")
        return value

    def mapping(self, node: yaml.Node, key: str, allowed: tuple[str, ...], what: str) -> Entry:
        if not isinstance(node, yaml.MappingNode):
            raise self.error(node, key, f"{what} must be a mapping, got {_kind(node)}")
        keys: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        for key_node, value_node in node.value:
            name = self.value(key_node)
            if not isinstance(name, str):
                raise self.error(key_node, str(name), f"keys of {what} must be strings")
            if name in keys:
                raise self.error(key_node, name, f"duplicate key in {what}")
            if name not in allowed:
                raise self.error(key_node, name, f"unknown key in {what} (known keys: {', '.join(allowed)})")
            keys[name] = (key_node, value_node)
        return Entry(self, node, keys, what)

    def sequence(self, node: yaml.Node, key: str) -> list[yaml.Node]:
        if isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null":
            return []
        if not isinstance(node, yaml.SequenceNode):
            raise self.error(node, key, f"must be a list, got {_kind(node)}")
        return list(node.value)


@dataclass
class Entry:
    """A mapping of the file (a spout, a bolt, a stream...) with its keys' nodes."""

    source: Source
    node: yaml.Node
    keys: dict[str, tuple[yaml.Node, yaml.Node]]
    what: str

    def __contains__(self, key: str) -> bool:
        return key in self.keys

    def node_of(self, key: str) -> yaml.Node | None:
        pair = self.keys.get(key)
        return pair[1] if pair is not None else None

    def key_node(self, key: str) -> yaml.Node:
        return self.keys[key][0]

    def value(self, key: str, default: Any = None) -> Any:
        node = self.node_of(key)
        return default if node is None else self.source.value(node)

    def text(self, key: str) -> str:
        node = self.node_of(key)
        if node is None:
            raise self.error(key, "missing")
        return self.source.text(node, key)

    def error(self, key: str, message: str, node: yaml.Node | None = None) -> FluxError:
        if node is None:
            node = self.node_of(key) if key in self.keys else self.node
        return self.source.error(node, key, f"{message} ({self.what})")


@dataclass
class FluxFile:
    """The merged definition: the main file plus its includes."""

    path: str
    name: tuple[str, Entry] | None = None
    # key -> (value, the entry holding it), so an error names where it was set
    config: dict[str, tuple[Any, Entry]] = field(default_factory=dict)
    components: dict[str, Entry] = field(default_factory=dict)
    spouts: dict[str, Entry] = field(default_factory=dict)
    bolts: dict[str, Entry] = field(default_factory=dict)
    streams: list[Entry] = field(default_factory=list)
    sources: list[Source] = field(default_factory=list)

    def close(self) -> None:
        for source in self.sources:
            source.close()


def read_text(path: str, properties: Mapping[str, str] | None, env: Mapping[str, str] | None) -> str:
    try:
        text = Path(path).read_text()
    except OSError as e:
        msg = f"cannot read Flux file {path}: {e.strerror or e}"
        raise FluxError(msg) from e
    result = filters.substitute(text, properties, env)
    for line, var in result.missing:
        log.warning("flux property not found", file=path, line=line, reference="${" + var + "}")
    return result.text


def parse(path: str, properties: Mapping[str, str] | None = None,
          env: Mapping[str, str] | None = None) -> FluxFile:
    """The file at ``path`` with its includes merged (``properties``: ``--filter``;
    ``env``: the environment when ``--env-filter`` is given)."""
    flux = FluxFile(path)
    top = _read(flux, path, properties, env)
    _merge(flux, top, override=True, main=True)
    includes = top.node_of("includes")
    if includes is not None:
        base = os.path.dirname(path)
        for node in top.source.sequence(includes, "includes"):
            inc = top.source.mapping(node, "includes", INCLUDE_KEYS, "an include")
            file = inc.text("file")
            resource = inc.value("resource", False)
            override = inc.value("override", False)
            for key, flag in (("resource", resource), ("override", override)):
                if not isinstance(flag, bool):
                    raise inc.error(key, f"must be true or false, got {flag!r}")
            target = _find_resource(inc, file) if resource else os.path.join(base, file)
            included = _read(flux, target, properties, env)
            if "includes" in included:
                log.warning("flux includes are not recursive: ignored", file=target)
            _merge(flux, included, override=override, main=False)
    if flux.name is None:
        raise top.error("name", "a topology needs a name")
    return flux


def _find_resource(inc: Entry, file: str) -> str:
    """Storm's classpath resource, in Python terms: the first entry of sys.path holding it."""
    for entry in sys.path:
        candidate = os.path.join(entry or os.getcwd(), file)
        if os.path.isfile(candidate):
            return candidate
    raise inc.error("file", f"resource {file!r} is on no entry of sys.path")


def _read(flux: FluxFile, path: str, properties: Mapping[str, str] | None,
          env: Mapping[str, str] | None) -> Entry:
    source = Source(path, read_text(path, properties, env))
    flux.sources.append(source)
    try:
        root = source.loader.get_single_node()
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        msg = f"{path}:{line}: not valid YAML: {getattr(e, 'problem', None) or e}"
        raise FluxError(msg) from e
    if root is None:
        msg = f"{path}:1: the file is empty"
        raise FluxError(msg)
    for key_node, _value in getattr(root, "value", []) if isinstance(root, yaml.MappingNode) else []:
        name = source.value(key_node)
        if name in UNSUPPORTED_TOP:
            raise source.error(key_node, name, UNSUPPORTED_TOP[name])
    return source.mapping(root, "(top)", TOP_KEYS, "the topology")


def _merge(flux: FluxFile, top: Entry, *, override: bool, main: bool) -> None:
    """Storm's include rules: name and config keys, components, spouts and bolts
    (by id) replace the main file's only with ``override: true``; streams add up."""
    source = top.source
    if "name" in top:
        name = top.text("name")
        if flux.name is None or override:
            flux.name = (name, top)
        else:
            log.info("flux include: name ignored (override is false)", file=source.path)
    config = top.node_of("config")
    if config is not None and not (isinstance(config, yaml.ScalarNode) and config.tag.endswith(":null")):
        conf = source.mapping(config, "config", tuple(_keys(source, config)), "config")
        for key in conf.keys:
            if key in flux.config and not override:
                log.info("flux include: config key ignored (override is false)", key=key,
                            file=source.path)
                continue
            flux.config[key] = (conf.value(key), conf)
    for section, allowed, table in (("components", OBJECT_KEYS, flux.components),
                                    ("spouts", VERTEX_KEYS, flux.spouts),
                                    ("bolts", VERTEX_KEYS, flux.bolts)):
        node = top.node_of(section)
        if node is None:
            continue
        seen: set[str] = set()
        for item in source.sequence(node, section):
            what = {"components": "a component", "spouts": "a spout", "bolts": "a bolt"}[section]
            entry = source.mapping(item, section, allowed, what)
            ident = entry.text("id")
            entry.what = f"{section[:-1]} {ident!r}"
            if ident in seen:
                raise entry.error("id", f"duplicate id {ident!r} in {section}")
            seen.add(ident)
            if "className" not in entry:
                raise entry.error("className", "missing")
            if ident in table and not override and not main:
                log.info("flux include: definition ignored (override is false)", id=ident,
                            file=source.path)
                continue
            table[ident] = entry
    node = top.node_of("streams")
    if node is not None:
        for item in source.sequence(node, "streams"):
            entry = source.mapping(item, "streams", STREAM_KEYS, "a stream")
            flux.streams.append(entry)


def _keys(source: Source, node: yaml.MappingNode) -> list[str]:
    return [str(source.value(k)) for k, _v in node.value]


def _kind(node: yaml.Node) -> str:
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    return repr(node.value)
