"""Topologies: a class body of component specs, validated when defined.

    class WordCount(Topology):
        sentences = Sentences.spec()
        split = Split.spec(inputs=[sentences], par=2)
        count = Count.spec(inputs={split: Grouping.fields("word")})

Defining the class checks it (unknown inputs and streams, fields a source
does not declare, duplicate names) and builds a :class:`TopologyDef`, the
plain description every runtime works from.  Cycles are allowed, as in Storm.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from squall import config as config_mod
from squall.errors import ConfigError, TopologyValidationError
from squall.topology import resources
from squall.topology.component import (
    DEFAULT_STREAM,
    Bolt,
    ComponentSpec,
    Spout,
    Stream,
    StreamRef,
    grouping_of,
    normalize_outputs,
)
from squall.topology.grouping import GROUPING_TYPES, Grouping, GroupingSpec, class_path


@dataclass(frozen=True)
class InputDef:
    component: str
    stream: str
    grouping: GroupingSpec


@dataclass
class ComponentDef:
    name: str
    kind: str  # "spout" | "bolt"
    cls: Any  # the class (local mode) or "module:Class"
    par: int
    tasks: int
    config: dict[str, Any]
    streams: dict[str, Stream]
    inputs: list[InputDef] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "class": class_path(self.cls),
            "par": self.par,
            "tasks": self.tasks,
            "config": self.config,
            "streams": [s.to_dict() for s in self.streams.values()],
            "inputs": [
                {"component": i.component, "stream": i.stream, "grouping": i.grouping.to_dict()}
                for i in self.inputs
            ],
            # Classes in options (a wrapped user class, in local mode) travel as paths.
            "options": {k: class_path(v) if isinstance(v, type) else v for k, v in self.options.items()},
        }


@dataclass
class TopologyDef:
    name: str
    config: dict[str, Any]
    components: dict[str, ComponentDef]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "config": self.config,
            "components": [c.to_dict() for c in self.components.values()],
        }


class Topology:
    """Subclass and assign component specs as class attributes."""

    config: ClassVar[dict[str, Any]] = {}
    _definition: ClassVar[TopologyDef | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if vars(cls).get("_abstract"):
            return  # a base for topologies of a kind (TransactionalTopology), not one itself
        specs: dict[str, ComponentSpec] = {}
        for klass in reversed(cls.__mro__):
            for attr, value in vars(klass).items():
                if isinstance(value, ComponentSpec):
                    if attr in _RESERVED:
                        _fail(f"topology {cls.__name__}: {attr!r} is a Topology attribute; "
                              f"give the component another name")
                    specs[attr] = value
        if not isinstance(cls.config, Mapping):
            _fail(f"topology {cls.__name__}: config must be a dict, got {cls.config!r}")
        cls._definition = cls._build(specs)

    @classmethod
    def _build(cls, specs: dict[str, ComponentSpec]) -> TopologyDef:
        """The definition of this class body's specs (a kind of topology may rewrite them)."""
        # A feature whose components need more than the user wrote (stateful bolts:
        # a checkpoint spout and wrappers, squall.state) names its rewrite on the
        # component class, so the core builds it without importing the feature.
        rewrites = {rewrite for spec in specs.values()
                    if (rewrite := getattr(spec.cls, "_topology_rewrite", None)) is not None}
        if len(rewrites) > 1:
            _fail(f"topology {cls.__name__}: its components need {len(rewrites)} different rewrites "
                  f"({sorted(r.__qualname__ for r in rewrites)}); one topology can take one")
        if rewrites:
            return rewrites.pop()(cls.__name__, specs, dict(cls.config))
        return build_definition(cls.__name__, specs, dict(cls.config))

    @classmethod
    def definition(cls) -> TopologyDef:
        if cls._definition is None:
            msg = "Topology itself is abstract: subclass it and assign component specs"
            raise TopologyValidationError(msg)
        return cls._definition

    @classmethod
    def from_specs(
        cls, name: str, specs: Mapping[str, ComponentSpec], config: Mapping[str, Any] | None = None
    ) -> type[Topology]:
        """Build a topology class from a mapping of attribute name -> spec."""
        namespace: dict[str, Any] = dict(specs)
        namespace["config"] = dict(config or {})
        return type(name, (Topology,), namespace)


_RESERVED = frozenset({"config", "definition", "from_specs", "transactional_id"})


def check_topology_resources(conf: Mapping[str, Any], where: str) -> None:
    """The resource keys of a topology's own conf (squall.topology.resources)."""
    for key in resources.KEYS:
        if key in conf:
            resources.check(key, conf[key], where)
    resources.check_strategy(conf)


def _fail(message: str) -> None:
    raise TopologyValidationError(message)


def build_definition(name: str, specs: Mapping[str, ComponentSpec], conf: dict[str, Any]) -> TopologyDef:
    try:
        config_mod.validate(conf)
    except ConfigError as e:
        msg = f"topology {name}: {e}"
        raise TopologyValidationError(msg) from e
    check_topology_resources(conf, f"topology {name}")
    by_name: dict[str, ComponentSpec] = {}
    attr_of: dict[int, str] = {}
    for attr, spec in specs.items():
        cname = spec.name if spec.name is not None else attr
        if id(spec) in attr_of:
            _fail(f"topology {name}: the same spec is assigned to both {attr_of[id(spec)]!r} and {attr!r}")
        attr_of[id(spec)] = attr
        if not isinstance(cname, str) or not cname:
            _fail(f"topology {name}: component names must be non-empty strings, got {cname!r}")
        if cname.startswith("__"):
            _fail(f"topology {name}: component name {cname!r} "
                  "uses the '__' prefix reserved for system components")
        if cname in by_name:
            _fail(f"topology {name}: duplicate component name {cname!r}")
        by_name[cname] = spec
    if not by_name:
        _fail(f"topology {name}: no components; assign specs such as `words = MySpout.spec()`")
    components = {cname: _component_def(name, cname, spec) for cname, spec in by_name.items()}
    if not any(c.kind == "spout" for c in components.values()):
        _fail(f"topology {name}: a topology needs at least one spout")
    name_of = {id(spec): cname for cname, spec in by_name.items()}
    for cname, spec in by_name.items():
        components[cname].inputs = _resolve_inputs(name, cname, spec, by_name, name_of, components)
        # A component class may check its settings against the topology's config
        # (a windowed bolt: its window against the message timeout).
        cdef = components[cname]
        where = f"topology {name}: component {cname!r}"
        check = getattr(spec.cls, "check_definition", None)
        if check is not None:
            check(cdef, config_mod.merge(conf, cdef.config), where)
        # And against the fields its inputs declare (a join: its keys and selected fields).
        check_inputs = getattr(spec.cls, "check_inputs", None)
        if check_inputs is not None:
            declared = {(i.component, i.stream): components[i.component].streams[i.stream].fields
                        for i in cdef.inputs}
            check_inputs(cdef, declared, where)
    return TopologyDef(name, conf, components)


def _component_def(topo: str, cname: str, spec: ComponentSpec) -> ComponentDef:
    where = f"topology {topo}: component {cname!r}"
    cls = spec.cls
    if not isinstance(cls, str):
        base = Spout if spec.kind == "spout" else Bolt
        if not (isinstance(cls, type) and issubclass(cls, base)):
            if getattr(cls, "transactional_kind", None) or hasattr(cls, "finish_batch"):
                _fail(f"{where}: {cls.__name__} is a transactional component; "
                      "it belongs in a squall.transactional.TransactionalTopology")
            _fail(f"{where}: {cls!r} is not a {base.__name__} subclass")
    for key, value in (("par", spec.par), ("tasks", spec.tasks)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            _fail(f"{where}: {key} must be an integer >= 1, got {value!r}")
    try:
        config_mod.validate(spec.config)
    except ConfigError as e:
        _fail(f"{where}: {e}")
    for key in resources.COMPONENT_KEYS:
        if key in spec.config:
            resources.check(key, spec.config[key], where)
    streams = normalize_outputs(spec.raw_outputs, where)
    return ComponentDef(
        name=cname,
        kind=spec.kind,
        cls=cls,
        par=min(spec.par, spec.tasks),
        tasks=spec.tasks,
        config=dict(spec.config),
        streams=streams,
        options=dict(spec.options),
    )


def _resolve_inputs(
    topo: str,
    cname: str,
    spec: ComponentSpec,
    by_name: Mapping[str, ComponentSpec],
    name_of: Mapping[int, str],
    components: Mapping[str, ComponentDef],
) -> list[InputDef]:
    where = f"topology {topo}: component {cname!r}"
    raw = spec.raw_inputs
    if raw is None:
        return []
    if spec.kind == "spout":
        _fail(f"{where}: a spout cannot have inputs")
    if isinstance(raw, (ComponentSpec, StreamRef, str)):
        raw = [raw]
    if isinstance(raw, Mapping):
        pairs = [(key, grouping_of(value)) for key, value in raw.items()]
    else:
        pairs = [(key, Grouping.SHUFFLE) for key in raw]
    inputs: list[InputDef] = []
    seen: set[tuple[str, str]] = set()
    for key, grouping in pairs:
        source, stream = _source_of(where, key, by_name, name_of)
        src_def = components[source]
        declared = src_def.streams.get(stream)
        if declared is None:
            known = sorted(src_def.streams) or "none"
            _fail(f"{where}: input {source!r} has no stream {stream!r} (declared streams: {known})")
        if (source, stream) in seen:
            _fail(f"{where}: subscribes twice to stream {stream!r} of {source!r}")
        seen.add((source, stream))
        _check_grouping(where, source, declared, grouping)
        inputs.append(InputDef(source, stream, grouping))
    return inputs


def _source_of(where: str, key: Any, by_name: Mapping[str, ComponentSpec],
               name_of: Mapping[int, str]) -> tuple[str, str]:
    stream = DEFAULT_STREAM
    if isinstance(key, StreamRef):
        key, stream = key.spec, key.stream
    if isinstance(key, ComponentSpec):
        source = name_of.get(id(key))
        if source is None:
            _fail(f"{where}: input {key!r} is not a component of this topology")
        return source, stream  # type: ignore[return-value]
    if isinstance(key, str):
        if key not in by_name:
            _fail(f"{where}: unknown input component {key!r} (components: {sorted(by_name)})")
        return key, stream
    _fail(f"{where}: inputs must be specs, spec['stream'] or component names, got {key!r}")
    raise AssertionError  # unreachable; _fail raises


def _check_grouping(where: str, source: str, stream: Stream, grouping: GroupingSpec) -> None:
    label = f"stream {stream.name!r} of {source!r}"
    if grouping.type in ("fields", "partial_key"):
        for f in grouping.fields:
            if f not in stream.fields:
                _fail(f"{where}: {grouping.type} grouping on field {f!r}, "
                      f"but {label} declares {list(stream.fields)}")
    if grouping.type == "direct" and not stream.direct:
        _fail(f"{where}: direct grouping on {label}, which is not declared direct")
    if grouping.type != "direct" and stream.direct:
        _fail(f"{where}: {label} is a direct stream and needs Grouping.direct()")
    if grouping.type == "custom" and grouping.custom is None:
        _fail(f"{where}: custom grouping without a grouping class")


def definition_from_dict(data: Any) -> TopologyDef:
    """The inverse of :meth:`TopologyDef.to_dict`, validated like a class body.

    What arrives over an API is rebuilt into specs and goes through the same
    checks as a topology class, so a malformed request gets the same clear
    errors a bad class definition would.
    """
    from squall.topology.grouping import grouping_from_dict

    def need(obj: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
        if not isinstance(obj, Mapping) or key not in obj:
            _fail(f"{where}: missing {key!r}")
        value = obj[key]
        if not isinstance(value, kind):
            _fail(f"{where}: {key!r} has the wrong type ({type(value).__name__})")
        return value

    if not isinstance(data, Mapping):
        _fail(f"a topology must be a JSON object, got {type(data).__name__}")
    name = need(data, "name", str, "topology")
    conf = dict(data.get("config") or {})
    specs: dict[str, ComponentSpec] = {}
    for item in need(data, "components", list, f"topology {name}"):
        where = f"topology {name}: component"
        cname = need(item, "name", str, where)
        where = f"topology {name}: component {cname!r}"
        kind = need(item, "kind", str, where)
        if kind not in ("spout", "bolt"):
            _fail(f"{where}: kind must be 'spout' or 'bolt', got {kind!r}")
        inputs: dict[Any, GroupingSpec] = {}
        for inp in item.get("inputs") or []:
            source = need(inp, "component", str, f"{where} input")
            stream = inp.get("stream", DEFAULT_STREAM) if isinstance(inp, Mapping) else DEFAULT_STREAM
            try:
                grouping = grouping_from_dict(need(inp, "grouping", dict, f"{where} input {source!r}"))
            except (KeyError, TypeError) as e:
                _fail(f"{where}: input {source!r} has a malformed grouping: {e}")
            if grouping.type not in GROUPING_TYPES:
                _fail(f"{where}: input {source!r} has an unknown grouping {grouping.type!r}")
            inputs[StreamRef(source, stream)] = grouping
        specs[cname] = ComponentSpec(
            need(item, "class", str, where), kind, name=cname,
            inputs=inputs or None, par=item.get("par", 1), tasks=item.get("tasks"),
            config=item.get("config") or {}, outputs=item.get("streams") or [],
            options=item.get("options") or {},
        )
    return build_definition(name, specs, conf)
