"""LinearDRPCTopologyBuilder: a DRPC function as a chain of bolts (Storm's).

    builder = LinearDRPCTopologyBuilder("reach")
    builder.add_bolt(GetTweeters, 3)
    builder.add_bolt(GetFollowers, 12).shuffle_grouping()
    builder.add_bolt(PartialUniquer, 6).fields_grouping(["id", "follower"])
    builder.add_bolt(CountAggregator, 2).fields_grouping(["id"])
    Reach = builder.create_remote_topology()         # squall submit this file
    topology = builder.create_local_topology(drpc)   # LocalCluster.submit(name, topology)

The first bolt gets ``[request, args]``; every tuple after carries the request id
first; the last bolt emits ``[id, result]`` on its one stream, and the client gets
``str(result)``.  A bolt with a ``finished_id(request_id)`` method has it called once
its task has every tuple of the request (Storm's FinishedCallback; squall.drpc.tracking
says how that is known); ``FailedException`` raised there fails the request, and the
client's ``execute`` raises DRPCExecutionError.

What it builds is Storm's: ``spout`` (DRPCSpout) -> ``prepare-request`` (a random
request id; the args, the return info and the id on three streams) -> ``bolt0`` ...
(each user bolt in a RequestCoordinatedBolt, counts on a direct stream between them) ->
JoinResult (the last bolt's result joined with the return info, by request) ->
ReturnResults.
"""

from __future__ import annotations

import random
import re
import sys
from collections.abc import Mapping
from typing import Any

from squall.drpc.coordinated import COORD_STREAM, ID_STREAM, RequestCoordinatedBolt, has_finished_id
from squall.drpc.returns import ReturnResults
from squall.drpc.spout import DRPCSpout
from squall.errors import TopologyValidationError
from squall.topology.component import (
    DEFAULT_STREAM,
    BasicBolt,
    Bolt,
    ComponentSpec,
    Stream,
    normalize_outputs,
)
from squall.topology.grouping import Grouping, GroupingSpec
from squall.topology.topology import Topology

SPOUT = "spout"
PREPARE = "prepare-request"
RETURN_STREAM = "ret"


class PrepareRequest(BasicBolt):
    """``[args, return_info]`` -> a random request id with the args (default stream), the
    return info (``ret``) and alone (``id``)."""

    outputs = [Stream(["request", "args"]), Stream(["request", "return_info"], name=RETURN_STREAM),
               Stream(["request"], name=ID_STREAM)]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.random = random.SystemRandom()

    def process(self, tup: Any) -> None:
        args, info = tup.values[0], tup.values[1]
        request = self.random.getrandbits(63)
        self.emit([request, args])
        self.emit([request, info], stream=RETURN_STREAM)
        self.emit([request], stream=ID_STREAM)


class JoinResult(Bolt):
    """The last bolt's ``[id, result]`` and PrepareRequest's ``[request, return_info]``,
    joined by request: ``[str(result), return_info]``.  The first result of a request
    wins; what waits for its other half longer than the message timeout is failed."""

    auto_ack = False
    auto_anchor = False
    outputs = ["result", "return_info"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.returns_from = self.options.get("returns_from", PREPARE)
        self.timeout = conf["topology.message.timeout.secs"]
        self.returns: dict[Any, tuple[float, Any]] = {}
        self.results: dict[Any, tuple[float, Any]] = {}
        self.next_purge = self.clock.now() + self.timeout

    def process(self, tup: Any) -> None:
        now = self.clock.now()
        if now >= self.next_purge:
            self._purge(now - self.timeout)
            self.next_purge = now + self.timeout
        request = tup.values[0]
        mine, other = (self.returns, self.results) if tup.component == self.returns_from else \
            (self.results, self.returns)
        if request in mine:  # a second result (or return) of the request: the first wins
            self.ack(tup)
            return
        match = other.pop(request, None)
        if match is None:
            mine[request] = (now, tup)
            return
        result, returner = (match[1], tup) if mine is self.returns else (tup, match[1])
        self.emit([str(result.values[1]), returner.values[1]], [result, returner])
        self.ack(result)
        self.ack(returner)

    def _purge(self, before: float) -> None:
        for waiting in (self.returns, self.results):
            for request in [r for r, (when, _tup) in waiting.items() if when < before]:
                self.fail(waiting.pop(request)[1])


class LinearDRPCInputDeclarer:
    """How a bolt of the chain reads the one before it (Storm's LinearDRPCInputDeclarer).
    Each method subscribes it to a stream of the previous bolt (its default stream unless
    ``stream`` is given) with a grouping; none: shuffle."""

    def __init__(self, component: _Component) -> None:
        self._component = component

    def _add(self, grouping: GroupingSpec, stream: str) -> LinearDRPCInputDeclarer:
        self._component.declarations.append((stream, grouping))
        return self

    def shuffle_grouping(self, stream: str = DEFAULT_STREAM) -> LinearDRPCInputDeclarer:
        return self._add(Grouping.SHUFFLE, stream)

    def local_or_shuffle_grouping(self, stream: str = DEFAULT_STREAM) -> LinearDRPCInputDeclarer:
        return self._add(Grouping.LOCAL_OR_SHUFFLE, stream)

    def none_grouping(self, stream: str = DEFAULT_STREAM) -> LinearDRPCInputDeclarer:
        return self._add(Grouping.NONE, stream)

    def global_grouping(self, stream: str = DEFAULT_STREAM) -> LinearDRPCInputDeclarer:
        return self._add(Grouping.GLOBAL, stream)

    def all_grouping(self, stream: str = DEFAULT_STREAM) -> LinearDRPCInputDeclarer:
        return self._add(Grouping.ALL, stream)

    def fields_grouping(self, fields: Any, stream: str = DEFAULT_STREAM) -> LinearDRPCInputDeclarer:
        """``fields``: a field name or a list of them (Storm's ``new Fields(...)``)."""
        return self._add(Grouping.fields(*([fields] if isinstance(fields, str) else fields)), stream)

    def partial_key_grouping(self, fields: Any, stream: str = DEFAULT_STREAM) -> LinearDRPCInputDeclarer:
        return self._add(Grouping.partial_key(*([fields] if isinstance(fields, str) else fields)), stream)

    def custom_grouping(self, grouping: GroupingSpec,
                        stream: str = DEFAULT_STREAM) -> LinearDRPCInputDeclarer:
        return self._add(grouping, stream)

    def add_configuration(self, key: str, value: Any) -> LinearDRPCInputDeclarer:
        self._component.config[key] = value
        return self

    def add_configurations(self, conf: Mapping[str, Any] | None) -> LinearDRPCInputDeclarer:
        self._component.config.update(conf or {})
        return self


class _Component:
    def __init__(self, cls: Any, par: int, options: dict[str, Any], config: dict[str, Any],
                 outputs: Any, tasks: int | None) -> None:
        self.cls = cls
        self.par = par
        self.tasks = tasks
        self.options = options
        self.config = config
        self.outputs = outputs
        self.declarations: list[tuple[str, GroupingSpec]] = []


class LinearDRPCTopologyBuilder:
    def __init__(self, function: str) -> None:
        if not isinstance(function, str) or not function:
            msg = f"LinearDRPCTopologyBuilder: the DRPC function is a non-empty string, got {function!r}"
            raise TopologyValidationError(msg)
        self.function = function
        self._components: list[_Component] = []

    def add_bolt(self, bolt: Any, par: int | None = None) -> LinearDRPCInputDeclarer:
        """The next bolt of the chain: a Bolt subclass, or its spec (``MyBolt.spec(config=...,
        option=...)``: its options, config and outputs come along); ``par``: its parallelism
        (else the spec's, else 1)."""
        if isinstance(bolt, ComponentSpec):
            cls, options, config, outputs = bolt.cls, dict(bolt.options), dict(bolt.config), bolt.raw_outputs
            par = bolt.par if par is None else par
            tasks = None if bolt.tasks == bolt.par else bolt.tasks
        else:
            cls, options, config, outputs, tasks = bolt, {}, {}, getattr(bolt, "outputs", None), None
        where = f"LinearDRPCTopologyBuilder({self.function!r}): bolt {len(self._components)}"
        if not (isinstance(cls, type) and issubclass(cls, Bolt)):
            msg = f"{where}: {cls!r} is not a Bolt subclass (nor a Bolt's spec)"
            raise TopologyValidationError(msg)
        component = _Component(cls, 1 if par is None else par, options, config, outputs, tasks)
        self._components.append(component)
        return LinearDRPCInputDeclarer(component)

    def create_local_topology(self, local_drpc: Any) -> type[Topology]:
        """The topology, its requests from ``local_drpc`` (a LocalDRPC): for LocalCluster.submit."""
        if local_drpc is None:
            msg = "create_local_topology needs the LocalDRPC its requests come from"
            raise TopologyValidationError(msg)
        return self._create(DRPCSpout.spec(function=self.function, local_drpc=local_drpc, name=SPOUT),
                            _caller_module())

    def create_remote_topology(self) -> type[Topology]:
        """The topology, its requests from ``drpc.servers``: for ``squall submit`` (a file
        that assigns it to a name at top level is a topology file) or LocalCluster.submit."""
        return self._create(DRPCSpout.spec(function=self.function, name=SPOUT), _caller_module())

    # -- building -------------------------------------------------------------------------------

    def _create(self, spout: ComponentSpec, module: str) -> type[Topology]:
        where = f"LinearDRPCTopologyBuilder({self.function!r})"
        if not self._components:
            msg = f"{where}: add at least one bolt (add_bolt) before creating the topology"
            raise TopologyValidationError(msg)
        prepare = PrepareRequest.spec(name=PREPARE, inputs={spout: Grouping.NONE})
        specs: dict[str, ComponentSpec] = {SPOUT: spout, PREPARE: prepare}
        previous: ComponentSpec = prepare
        last = len(self._components) - 1
        for i, component in enumerate(self._components):
            name = f"bolt{i}"
            streams = normalize_outputs(component.outputs, f"{where}: bolt {i} ({component.cls.__name__})")
            needs_id = i == last and has_finished_id(component.cls)
            if i == last:
                _check_last(where, component, streams)
            inputs: dict[Any, GroupingSpec] = {}
            # The first bolt's one tuple of a request goes where the request's id will, when
            # it waits for it (Storm shuffles it, and the two may part).
            default = Grouping.SHUFFLE if i > 0 else Grouping.fields("request") if needs_id else Grouping.NONE
            for stream, grouping in component.declarations or [(DEFAULT_STREAM, default)]:
                inputs[previous[stream]] = grouping
            if i > 0:
                inputs[previous[COORD_STREAM]] = Grouping.DIRECT
            if needs_id:
                inputs[prepare[ID_STREAM]] = Grouping.fields("request")
            sources = {} if i == 0 else {f"bolt{i - 1}": "single" if i == 1 else "all"}
            spec = ComponentSpec(
                RequestCoordinatedBolt, "bolt", name=name, inputs=inputs, par=component.par,
                tasks=component.tasks, config=component.config,
                outputs=[*streams.values(), Stream(["id", "count"], name=COORD_STREAM, direct=True)],
                options={"bolt": component.cls, "bolt_options": component.options, "sources": sources,
                         "id_source": PREPARE if needs_id else None})
            specs[name] = previous = spec
        result = next(iter(normalize_outputs(self._components[-1].outputs, where).values()))
        join_name, returns_name = f"bolt{last + 1}", f"bolt{last + 2}"
        specs[join_name] = join = JoinResult.spec(name=join_name, returns_from=PREPARE, inputs={
            previous[result.name]: Grouping.fields(result.fields[0]),
            prepare[RETURN_STREAM]: Grouping.fields("request")})
        specs[returns_name] = ReturnResults.spec(name=returns_name, inputs={join: Grouping.NONE})
        name = "LinearDRPC_" + re.sub(r"\W", "_", self.function)
        return type(name, (Topology,), {**specs, "config": {}, "__module__": module})


def _check_last(where: str, component: _Component, streams: Mapping[str, Stream]) -> None:
    if len(streams) != 1:
        msg = (f"{where}: the last bolt ({component.cls.__name__}) must declare exactly one stream "
               f"(it declares {sorted(streams) or 'none'})")
        raise TopologyValidationError(msg)
    stream = next(iter(streams.values()))
    if len(stream.fields) != 2:
        msg = (f"{where}: the last bolt's stream ({component.cls.__name__}: {list(stream.fields)}) must have "
               "exactly two fields: the request id, then the result")
        raise TopologyValidationError(msg)


def _caller_module() -> str:
    """The module that asked for the topology: a file that assigns it at top level is then a
    topology file for ``squall submit`` and ``squall local`` (which take the Topology
    classes a file defines)."""
    return str(sys._getframe(2).f_globals.get("__name__", __name__))
