"""``StreamBuilder``: where streams start (spouts, late tuples) and where they are built
into an ordinary topology."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from squall.errors import TopologyValidationError
from squall.streams import processors as ops
from squall.streams.functions import _Mapper, mapping_function
from squall.streams.stream import Node, PairStream, Stream
from squall.topology.component import (
    DEFAULT_STREAM,
    Bolt,
    Component,
    ComponentSpec,
    Spout,
    normalize_outputs,
)


def _fail(message: str) -> None:
    raise TopologyValidationError(message)


def _parallelism(what: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        _fail(f"{what}: the parallelism must be an integer >= 1, got {value!r}")
    return value


def component_of(what: str, given: Any, kind: type, parallelism: int | None) -> tuple[ComponentSpec, int]:
    """A spout or bolt given as a class, a spec or an instance, as a spec (an instance by
    value, through a construct recipe) and the parallelism it runs at."""
    from squall.topology.loading import CONSTRUCT_OPTION, instance_by_value

    noun = kind.__name__
    if isinstance(given, ComponentSpec):
        if given.kind != noun.lower():
            _fail(f"{what}: expected a {noun}, got a {given.kind} spec {given!r}")
        spec = given
    elif isinstance(given, type) and issubclass(given, kind):
        spec = ComponentSpec(given, noun.lower())
    elif isinstance(given, kind):
        recipe = {"builder": f"{__name__}:instance_from_value", "value": instance_by_value(given)}
        options = {**(getattr(given, "options", None) or {}), CONSTRUCT_OPTION: recipe}
        spec = ComponentSpec(type(given), noun.lower(), options=options)
    else:
        _fail(f"{what}: expected a {noun} class, spec or instance, got {given!r}")
    par = spec.par if parallelism is None else _parallelism(what, parallelism)
    return spec, par


def instance_from_value(cls: Any, recipe: Mapping[str, Any], resolve: Any) -> Any:
    """A construct recipe's builder (squall.topology.loading.build_instance) for a spout or
    bolt given as an instance: the instance itself, by value (a copy per task), with a
    component's fresh runtime (its options come back from the definition's)."""
    from squall.topology.loading import from_value

    component = from_value(recipe["value"])
    Component.__init__(component)
    return component


class StreamBuilder:
    """Storm's ``StreamBuilder``: ``new_stream(spout, value_mapper=None, parallelism=None)``,
    ``late_tuples(name)`` and ``build(name="StreamTopology", config=None)``."""

    def __init__(self) -> None:
        self._nodes: list[Node] = []
        self._stateful: list[Node] = []

    def _new_node(self, kind: str, parents: tuple[Node, ...], **attrs: Any) -> Node:
        node = Node(len(self._nodes) + 1, kind, parents, **attrs)
        self._nodes.append(node)
        for parent in parents:
            parent.children.append(node)
        return node

    def new_stream(self, spout: Any, value_mapper: Any = None, parallelism: int | None = None) -> Any:
        what = "new_stream"
        spec, par = component_of(what, spout, Spout, parallelism)
        if spec.raw_inputs is not None:
            _fail(f"{what}: a spout has no inputs")
        streams = normalize_outputs(spec.raw_outputs, f"{what}: spout {spec.cls.__name__}")
        if DEFAULT_STREAM not in streams:
            _fail(f"{what}: spout {spec.cls.__name__} declares no 'default' stream (it declares "
                  f"{sorted(streams) or 'none'}); a stream reads a spout's default stream")
        if getattr(spec.cls, "_checkpointed", False) and par > 1:
            _fail(f"{what}: {spec.cls.__name__} is a CheckpointedSpout: it runs as one task, "
                  f"got parallelism {par}")
        fields = streams[DEFAULT_STREAM].fields
        if value_mapper is not None and not isinstance(value_mapper, _Mapper) and not callable(value_mapper):
            _fail(f"{what}: a value mapper is ValueMapper, ValuesMapper, TupleValueMappers.of, "
                  f"PairValueMapper or a function of the Tuple, got {value_mapper!r}")
        if isinstance(value_mapper, _Mapper):
            value_mapper.check(what, fields)
        source = self._new_node("spout", (), par=par, shape="raw",
                                extra={"spec": spec, "fields": fields})
        source.spouts = frozenset({source.id})
        if value_mapper is None:
            return Stream(self, source)
        pair = isinstance(value_mapper, _Mapper) and value_mapper.pair
        shape = "pair" if pair else ("tuple" if type(value_mapper).__name__ == "_TupleMapper" else "value")
        mapper = Stream(self, source)._add("op", ops.MapTuple(mapping_function(value_mapper, fields)),
                                           pair=pair, shape=shape, mapper=True)
        return (PairStream if pair else Stream)(self, mapper)

    def late_tuples(self, name: str) -> Stream:
        """The values too late for the windows ``with_late_tuple_stream(name)``."""
        if not isinstance(name, str) or not name:
            _fail(f"late_tuples: a stream name, got {name!r}")
        node = self._new_node("late", (), par=1, shape="raw", extra={"late_stream": name})
        return Stream(self, node)

    def _sink_spec(self, bolt: Any, parallelism: int | None) -> tuple[ComponentSpec, int]:
        spec, par = component_of("to", bolt, Bolt, parallelism)
        if spec.raw_inputs is not None:
            _fail(f"to: the bolt {spec!r} has inputs; the stream is its input, give a spec without inputs")
        return spec, par

    def build(self, name: str | None = "StreamTopology", config: Mapping[str, Any] | None = None) -> Any:
        """A ``Topology`` subclass of the streams built so far (laid out afresh each call)."""
        from squall.streams.compile import build_topology

        return build_topology(self, name, config)
