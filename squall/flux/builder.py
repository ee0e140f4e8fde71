"""A parsed Flux file -> the same Topology a Python topology file defines.

Spouts and bolts become :class:`ComponentSpec` objects, streams become
their inputs, and ``Topology.from_specs`` checks and builds the
definition: nothing downstream knows the topology came from YAML.  The
checks that need a line of the file (unknown ids, classes, grouping types,
undeclared streams and fields) are made here first, so their errors name
the file, the line and the key.

``constructorArgs``, ``factory``, ``properties`` and ``configMethods`` go
into the spec as a recipe (:mod:`squall.flux.objects`) that each task
builds its instance from; each is also built once here, so a bad argument
is reported against its line now rather than by a worker later.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import yaml

from squall import config as config_mod
from squall.errors import ConfigError, TopologyValidationError
from squall.flux.objects import (
    BUILDER,
    BUILDER_KEY,
    CONSTRUCT_OPTION,
    OBJECT,
    FluxGrouping,
    RecipeError,
    construct,
)
from squall.flux.parser import (
    METHOD_KEYS,
    OBJECT_KEYS,
    PROPERTY_KEYS,
    Entry,
    FluxFile,
)
from squall.topology import resources
from squall.topology.component import DEFAULT_STREAM, Bolt, ComponentSpec, Spout, Stream, StreamRef
from squall.topology.grouping import CustomGrouping, Grouping, GroupingSpec, class_path
from squall.topology.loading import resolve_class
from squall.topology.topology import Topology

GROUPINGS = {
    "SHUFFLE": Grouping.SHUFFLE,
    "ALL": Grouping.ALL,
    "GLOBAL": Grouping.GLOBAL,
    "NONE": Grouping.NONE,
    "DIRECT": Grouping.DIRECT,
    "LOCAL_OR_SHUFFLE": Grouping.LOCAL_OR_SHUFFLE,
    "FIELDS": None,  # built from args
    "CUSTOM": None,  # built from customClass
}
# Storm's Flux shell wrappers, for files written for Storm.
STORM_SHELL = {
    "org.apache.storm.flux.wrappers.bolts.FluxShellBolt": "squall.multilang.bolt:ShellBolt",
    "org.apache.storm.flux.wrappers.spouts.FluxShellSpout": "squall.multilang.spout:ShellSpout",
}
# What a shell component's `properties` may set (ShellBolt/ShellSpout options).
SHELL_PROPERTIES = ("command", "script", "args", "cwd", "env", "heartbeat_secs", "metrics", "outputs")
# A child command `python` or `python3` runs the worker's own interpreter, so the
# child imports the same packages (Squall's adapter among them) as the worker.
PYTHON_COMMANDS = ("python", "python3")


class _Vertex:
    """A spout or bolt of the file, with what the checks need."""

    def __init__(self, ident: str, kind: str, entry: Entry, cls: Any, shell: bool,
                 streams: dict[str, Stream], options: dict[str, Any]) -> None:
        self.id = ident
        self.kind = kind
        self.entry = entry
        self.cls = cls
        self.shell = shell
        self.streams = streams
        self.options = options
        self.inputs: dict[StreamRef, GroupingSpec] = {}


def build(flux: FluxFile) -> type[Topology]:
    name, name_entry = flux.name  # type: ignore[misc]
    conf = _config(flux)
    components: dict[str, dict[str, Any]] = {}
    for ident, entry in flux.components.items():
        cls = load_class(entry, "className")
        components[ident] = _recipe(entry, cls, components, ident)
    vertices: dict[str, _Vertex] = {}
    for kind, table in (("spout", flux.spouts), ("bolt", flux.bolts)):
        for ident, entry in table.items():
            if ident in vertices:
                raise entry.error("id", f"id {ident!r} is already used by a {vertices[ident].kind}")
            if ident.startswith("__"):
                raise entry.error("id", "ids starting with '__' are reserved for system components")
            vertices[ident] = _vertex(ident, kind, entry, components)
    if not any(v.kind == "spout" for v in vertices.values()):
        raise name_entry.error("spouts", "a topology needs at least one spout")
    for entry in flux.streams:
        _stream(entry, vertices, components)
    # Each spec carries its id as its name; the attribute names only have to stay
    # clear of Topology's own (an id may be "config" or "_abstract").
    specs = {f"_flux_{i}": _spec(v) for i, v in enumerate(vertices.values())}
    try:
        return Topology.from_specs(name, specs, conf)
    except TopologyValidationError as e:
        raise name_entry.error("name", str(e)) from e


def load_class(entry: Entry, key: str) -> Any:
    """The class a ``className`` names: a dotted Python path (``pkg.mod.Class``)
    or ``pkg.mod:Class``."""
    path = entry.text(key)
    path = STORM_SHELL.get(path, path)
    node = entry.node_of(key)
    if ":" in path:
        try:
            return resolve_class(path)
        except TopologyValidationError as e:
            raise entry.error(key, f"cannot import {path!r}: {e}", node) from e
    parts = path.split(".")
    if len(parts) < 2 or not all(p.isidentifier() for p in parts):
        raise entry.error(key, f"{path!r} is not a dotted Python path such as 'package.module.Class'", node)
    last: BaseException | None = None
    for cut in range(len(parts) - 1, 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            obj: Any = importlib.import_module(module_name)
        except ModuleNotFoundError as e:
            last = e
            if e.name is not None and not module_name.startswith(e.name):
                break  # the module exists but imports something missing
            continue
        except Exception as e:  # noqa: BLE001 - the module itself fails to import
            raise entry.error(key, f"cannot import {module_name!r}: {type(e).__name__}: {e}", node) from e
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError as e:
            raise entry.error(key, f"cannot import {path!r}: {e}", node) from e
        return obj
    raise entry.error(key, f"cannot import {path!r}: {last}", node)


def _config(flux: FluxFile) -> dict[str, Any]:
    conf = {key: value for key, (value, _entry) in flux.config.items()}
    for key, (value, entry) in flux.config.items():
        try:
            config_mod.validate({key: value})
        except ConfigError as e:
            raise entry.error(key, str(e)) from e
    return conf


def _vertex(ident: str, kind: str, entry: Entry, components: dict[str, dict[str, Any]]) -> _Vertex:
    cls = load_class(entry, "className")
    base = Spout if kind == "spout" else Bolt
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise entry.error("className", f"{entry.value('className')!r} is not a {base.__name__} subclass")
    from squall.multilang.base import ShellComponent

    shell = issubclass(cls, ShellComponent)
    options = _shell_options(entry, cls) if shell else {}
    if not shell:
        recipe = _recipe(entry, cls, components, None)
        if any(recipe.get(k) for k in ("factory", "args", "properties", "calls")):
            options[CONSTRUCT_OPTION] = {**recipe, BUILDER_KEY: BUILDER}
    outputs = options.get("outputs", getattr(cls, "outputs", None))
    try:
        from squall.topology.component import normalize_outputs

        streams = normalize_outputs(outputs, f"{kind} {ident!r}")
    except TopologyValidationError as e:
        raise entry.error("className", str(e)) from e
    return _Vertex(ident, kind, entry, cls, shell, streams, options)


def _shell_options(entry: Entry, cls: Any) -> dict[str, Any]:
    """A multilang component: ``constructorArgs: [command line, output fields]``
    as Storm's FluxShellBolt/FluxShellSpout, and properties naming options."""
    options: dict[str, Any] = {"defined_in": os.path.dirname(os.path.abspath(entry.source.path))}
    for key in ("configMethods", "factory", "factoryArgs"):
        if key in entry:
            raise entry.error(key, f"a multilang component takes constructorArgs and properties, not {key}")
    args_node = entry.node_of("constructorArgs")
    args = entry.source.sequence(args_node, "constructorArgs") if args_node is not None else []
    if len(args) > 2:
        raise entry.error("constructorArgs", "a multilang component takes [command line, output fields]")
    if args:
        command = entry.source.value(args[0])
        if isinstance(command, str):
            command = command.split()
        if not (isinstance(command, list) and command and all(isinstance(c, str) for c in command)):
            msg = f"the command line must be a list of strings, got {command!r}"
            raise entry.error("constructorArgs", msg, args[0])
        if command[0] in PYTHON_COMMANDS:
            command = [sys.executable, *command[1:]]
        options["command"] = command
    if len(args) == 2:
        options["outputs"] = _field_list(entry, args[1], "constructorArgs")
    for node in entry.source.sequence(entry.node_of("properties") or _null(), "properties"):
        prop = entry.source.mapping(node, "properties", PROPERTY_KEYS, f"a property of {entry.what}")
        name = prop.text("name")
        if name not in SHELL_PROPERTIES:
            raise prop.error("name", f"a multilang component has no property {name!r} "
                                     f"(known: {', '.join(SHELL_PROPERTIES)})")
        if "ref" in prop:
            raise prop.error("ref", "a multilang component's properties are plain values")
        value = prop.value("value")
        if name == "outputs":
            value = _field_list(prop, prop.node_of("value"), "value")
        options[name] = value
    if "command" not in options and getattr(cls, "command", None) is None:
        raise entry.error("constructorArgs", "a multilang component needs its command line, "
                                             "e.g. constructorArgs: [[python, split.py], [word]]")
    return options


def _field_list(entry: Entry, node: yaml.Node | None, key: str) -> list[str]:
    value = entry.source.value(node) if node is not None else None
    if isinstance(value, str):
        value = [value]
    if not (isinstance(value, list) and all(isinstance(f, str) for f in value)):
        raise entry.error(key, f"output fields must be a list of names, got {value!r}", node)
    return value


def _null() -> yaml.Node:
    return yaml.ScalarNode("tag:yaml.org,2002:null", "")


def _recipe(entry: Entry, cls: Any, components: dict[str, dict[str, Any]],
            ident: str | None) -> dict[str, Any]:
    source = entry.source
    if "factoryArgs" in entry and "constructorArgs" in entry:
        raise entry.error("factoryArgs", "give constructorArgs or factory with factoryArgs, not both")
    factory = entry.value("factory")
    if factory is not None and not isinstance(factory, str):
        raise entry.error("factory", f"must be a method name, got {factory!r}")
    arg_key = "factoryArgs" if factory else "constructorArgs"
    if "factoryArgs" in entry and not factory:
        raise entry.error("factoryArgs", "factoryArgs without factory")
    arg_nodes = source.sequence(entry.node_of(arg_key) or _null(), arg_key)
    recipe: dict[str, Any] = {
        "class": class_path(cls),
        "factory": factory,
        "args": [_arg(entry, n, arg_key, components) for n in arg_nodes],
        "properties": [],
        "calls": [],
    }
    if ident is not None:
        recipe["id"] = ident
    prop_nodes = source.sequence(entry.node_of("properties") or _null(), "properties")
    for node in prop_nodes:
        prop = source.mapping(node, "properties", PROPERTY_KEYS, f"a property of {entry.what}")
        name = prop.text("name")
        if ("value" in prop) == ("ref" in prop):
            raise prop.error("name", f"property {name!r} needs either value or ref")
        value = (_ref(prop, prop.node_of("ref"), components) if "ref" in prop
                 else _arg(prop, prop.node_of("value"), "value", components))  # type: ignore[arg-type]
        recipe["properties"].append([name, value])
    method_nodes = source.sequence(entry.node_of("configMethods") or _null(), "configMethods")
    for node in method_nodes:
        method = source.mapping(node, "configMethods", METHOD_KEYS, f"a configMethod of {entry.what}")
        args = source.sequence(method.node_of("args") or _null(), "args")
        recipe["calls"].append([method.text("name"), [_arg(method, n, "args", components) for n in args]])
    try:
        construct(cls, recipe, resolve_class)
    except RecipeError as e:
        part, index = e.step
        nodes = {"properties": prop_nodes, "configMethods": method_nodes}.get(part)
        node = nodes[index] if nodes else entry.node_of(part if part == "factory" else arg_key)
        raise entry.error(part if part != "args" else arg_key, str(e), node) from e
    return recipe


def _arg(entry: Entry, node: yaml.Node, key: str, components: dict[str, dict[str, Any]]) -> Any:
    """A constructor or method argument: a plain value, ``ref: id`` or ``reflist: [ids]``."""
    if isinstance(node, yaml.MappingNode) and len(node.value) == 1:
        word = entry.source.value(node.value[0][0])
        if word == "ref":
            return _ref(entry, node.value[0][1], components)
        if word == "reflist":
            ids = entry.source.sequence(node.value[0][1], "reflist")
            return [_ref(entry, n, components) for n in ids]
    value = entry.source.value(node)
    bad = _not_plain(value)
    if bad is not None:
        msg = f"{bad!r} cannot travel in a topology (use strings, numbers, lists, maps)"
        raise entry.error(key, msg, node)
    return value


def _ref(entry: Entry, node: yaml.Node, components: dict[str, dict[str, Any]]) -> dict[str, Any]:
    ident = entry.source.value(node)
    if ident not in components:
        known = ", ".join(components) or "none"
        msg = f"{ident!r} names no component declared above it (components: {known})"
        raise entry.error("ref", msg, node)
    return {OBJECT: components[ident]}


def _not_plain(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return None
    if isinstance(value, list):
        return next((b for b in map(_not_plain, value) if b is not None), None)
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                return k
            bad = _not_plain(v)
            if bad is not None:
                return bad
        return None
    return value


def _stream(entry: Entry, vertices: dict[str, _Vertex], components: dict[str, dict[str, Any]]) -> None:
    ends = {}
    for key in ("from", "to"):
        ident = entry.text(key)
        if ident not in vertices:
            raise entry.error(key, f"{ident!r} names no spout or bolt (known: {', '.join(vertices)})")
        ends[key] = vertices[ident]
    source, target = ends["from"], ends["to"]
    if target.kind == "spout":
        raise entry.error("to", f"{target.id!r} is a spout; a spout has no inputs")
    if "grouping" not in entry:
        raise entry.error("grouping", "missing: every stream needs a grouping (e.g. type: SHUFFLE)")
    grouping = entry.source.mapping(entry.node_of("grouping"), "grouping",  # type: ignore[arg-type]
                                    ("type", "args", "streamId", "customClass"),
                                    f"the grouping of stream {source.id} -> {target.id}")
    kind = grouping.value("type")
    if not isinstance(kind, str) or kind.upper() not in GROUPINGS:
        raise grouping.error("type", f"unknown grouping type {kind!r} (known: {', '.join(GROUPINGS)})")
    kind = kind.upper()
    stream_id = grouping.value("streamId", DEFAULT_STREAM)
    declared = source.streams.get(stream_id)
    if declared is None:
        known = ", ".join(source.streams) or "none"
        msg = f"{source.id!r} declares no stream {stream_id!r} (its streams: {known})"
        if "streamId" in grouping:
            raise grouping.error("streamId", msg)
        raise entry.error("from", msg)
    if "args" in grouping and kind != "FIELDS":
        raise grouping.error("args", f"args belong to a FIELDS grouping, not {kind}")
    if "customClass" in grouping and kind != "CUSTOM":
        raise grouping.error("customClass", f"customClass belongs to a CUSTOM grouping, not {kind}")
    spec: GroupingSpec
    if kind == "FIELDS":
        if "args" not in grouping:
            raise grouping.error("type", "a FIELDS grouping needs args: [field names]")
        fields = _field_list(grouping, grouping.node_of("args"), "args")
        for name in fields:
            if name not in declared.fields:
                raise grouping.error("args", f"field {name!r} is not declared by {source.id!r} on stream "
                                             f"{stream_id!r} (it declares {list(declared.fields)})")
        spec = Grouping.fields(fields)
    elif kind == "CUSTOM":
        if "customClass" not in grouping:
            raise grouping.error("type", "a CUSTOM grouping needs customClass: {className: ...}")
        custom = entry.source.mapping(grouping.node_of("customClass"), "customClass",  # type: ignore[arg-type]
                                      OBJECT_KEYS, f"the customClass of stream {source.id} -> {target.id}")
        cls = load_class(custom, "className")
        if not (isinstance(cls, type) and issubclass(cls, CustomGrouping)):
            raise custom.error("className", f"{custom.value('className')!r} is not a CustomGrouping subclass")
        recipe = _recipe(custom, cls, components, None)
        if any(recipe.get(k) for k in ("factory", "args", "properties", "calls")):
            spec = Grouping.custom(FluxGrouping, recipe=recipe)
        else:
            spec = Grouping.custom(cls)
    else:
        spec = GROUPINGS[kind]  # type: ignore[assignment]
    if (kind == "DIRECT") != declared.direct:
        need = "is declared direct: it needs" if declared.direct else "is not declared direct: it cannot take"
        raise grouping.error("type", f"stream {stream_id!r} of {source.id!r} {need} a DIRECT grouping")
    ref = StreamRef(source.id, stream_id)
    if any(r.spec == source.id and r.stream == stream_id for r in target.inputs):
        msg = f"{target.id!r} already subscribes to stream {stream_id!r} of {source.id!r}"
        raise entry.error("from", msg)
    target.inputs[ref] = spec


def _spec(v: _Vertex) -> ComponentSpec:
    entry = v.entry
    par = entry.value("parallelism", 1)
    if isinstance(par, bool) or not isinstance(par, int) or par < 1:
        raise entry.error("parallelism", f"must be an integer >= 1, got {par!r}")
    tasks = entry.value("numTasks", -1)
    if isinstance(tasks, bool) or not isinstance(tasks, int) or (tasks < 1 and tasks != -1):
        raise entry.error("numTasks", f"must be an integer >= 1, got {tasks!r}")
    conf = entry.value("config") or {}
    if not isinstance(conf, dict):
        raise entry.error("config", f"must be a mapping of config keys, got {conf!r}")
    try:
        config_mod.validate(conf)
    except ConfigError as e:
        raise entry.error("config", str(e)) from e
    task_count = None if tasks == -1 else tasks
    conf = {**conf, **_resource_loads(entry)}
    # Through the class's own spec(), as a Python topology file does: a kind of
    # component that adds options in spec() gets them here too.
    if v.kind == "bolt":
        return v.cls.spec(name=v.id, inputs=v.inputs or None, par=par, tasks=task_count, config=conf,
                          **v.options)
    return v.cls.spec(name=v.id, par=par, tasks=task_count, config=conf, **v.options)


# Flux's resource keys on a spout or bolt -> Storm's component config keys (docs/scheduling.md).
_RESOURCE_LOADS = {"onHeapMemoryLoad": resources.ON_HEAP, "offHeapMemoryLoad": resources.OFF_HEAP,
                   "cpuLoad": resources.CPU}


def _resource_loads(entry: Any) -> dict[str, float]:
    out = {}
    for flux_key, key in _RESOURCE_LOADS.items():
        value = entry.value(flux_key)
        if value is None:
            continue
        try:
            out[key] = resources.check(key, value, flux_key)
        except TopologyValidationError as e:
            raise entry.error(flux_key, str(e)) from e
    return out
