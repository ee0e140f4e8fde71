"""The rewrite of a topology with stateful bolts or a checkpointed spout
(Storm's TopologyBuilder does the same when it sees an IStatefulBolt):

- a checkpoint spout, ``$checkpointspout``, of one task; or, when the topology
  has a :class:`~squall.state.bolts.CheckpointedSpout`, that spout's own task
  becomes the checkpoint spout (its data and its barriers then share one
  ordered path, which is what makes its position exact);
- every bolt runs inside a :class:`~squall.state.bolt_wrapper.CheckpointedBolt`
  and declares a ``$checkpoint`` stream; it subscribes (all grouping) to the
  ``$checkpoint`` stream of each bolt it reads, and once of the checkpoint spout
  if it reads any spout (one barrier per upstream task per checkpoint).

What comes out is an ordinary :class:`TopologyDef`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from squall.errors import ConfigError, TopologyValidationError
from squall.state.bolt_wrapper import wrapper_for
from squall.state.checkpoint import CHECKPOINT_COMPONENT, CHECKPOINT_FIELDS, CHECKPOINT_STREAM
from squall.state.providers import check_state_conf
from squall.state.spout import CheckpointSpout
from squall.topology.component import (
    OPERATIONS_OPTION,
    Bolt,
    ComponentSpec,
    Stream,
    StreamRef,
    normalize_outputs,
)
from squall.topology.grouping import Grouping
from squall.topology.topology import TopologyDef, _source_of, build_definition


def _fail(message: str) -> None:
    raise TopologyValidationError(message)


def is_checkpointed(specs: Mapping[str, ComponentSpec]) -> bool:
    return any(getattr(spec.cls, "_checkpointed", False) for spec in specs.values())


def build_checkpointed(name: str, specs: Mapping[str, ComponentSpec], conf: dict[str, Any]) -> TopologyDef:
    where = f"topology {name}"
    try:
        check_state_conf(conf)
    except ConfigError as e:
        _fail(f"{where}: {e}")
    if conf.get("topology.acker.executors") == 0:
        _fail(f"{where}: topology.acker.executors is 0, but checkpoints are tuple trees the acker "
              "tracks through every bolt")
    by_name: dict[str, ComponentSpec] = {}
    for attr, spec in specs.items():
        by_name[spec.name if spec.name is not None else attr] = spec
    name_of = {id(spec): cname for cname, spec in by_name.items()}
    if CHECKPOINT_COMPONENT in by_name:
        _fail(f"{where}: the name {CHECKPOINT_COMPONENT!r} is the checkpoint spout's; rename that component")

    rewinding = [c for c, s in by_name.items()
                 if s.kind == "spout" and getattr(s.cls, "_checkpointed", False)]
    if len(rewinding) > 1:
        _fail(f"{where}: {sorted(rewinding)} are all CheckpointedSpouts; a topology may have one "
              "(its task drives the checkpoints)")
    coordinator = rewinding[0] if rewinding else CHECKPOINT_COMPONENT

    out: dict[str, ComponentSpec] = {}
    inputs: dict[str, list[tuple[str, str, Any]]] = {}
    for cname, spec in by_name.items():
        here = f"{where}: component {cname!r}"
        streams = list(normalize_outputs(spec.raw_outputs, here).values())
        if any(s.name == CHECKPOINT_STREAM for s in streams):
            _fail(f"{here}: the stream name {CHECKPOINT_STREAM!r} is the checkpoints'; rename that stream")
        checkpoint = Stream(list(CHECKPOINT_FIELDS), name=CHECKPOINT_STREAM)
        if spec.kind == "spout":
            if cname == coordinator and rewinding:
                if spec.par != 1 or spec.tasks != 1:
                    _fail(f"{here}: a CheckpointedSpout runs as one task (par=1): its task drives "
                          f"the checkpoints, got par={spec.par} tasks={spec.tasks}")
                out[cname] = ComponentSpec(CheckpointSpout, "spout", name=cname, par=1, tasks=1,
                                           config=spec.config, outputs=[*streams, checkpoint],
                                           options={"spout": spec.cls, "spout_options": dict(spec.options)})
            else:
                out[cname] = ComponentSpec(spec.cls, "spout", name=cname, par=spec.par, tasks=spec.tasks,
                                           config=spec.config, outputs=streams, options=spec.options)
            continue
        if not (isinstance(spec.cls, type) and issubclass(spec.cls, Bolt)):
            _fail(f"{here}: {spec.cls!r} is not a Bolt subclass")
        if spec.raw_inputs is None:
            _fail(f"{here}: a bolt needs inputs")
        inputs[cname] = _resolve(here, spec.raw_inputs, by_name, name_of)
        wired: dict[Any, Any] = {}
        for src, stream, grouping in inputs[cname]:
            if stream == CHECKPOINT_STREAM:
                _fail(f"{here}: stream {CHECKPOINT_STREAM!r} of {src!r} is internal to checkpointing")
            wired[StreamRef(src, stream)] = grouping
        # Once per barrier source: every spout's barriers come from the one checkpoint
        # spout, so two spouts read are one subscription (a StreamRef key is compared by
        # identity: two of them to the same stream would subscribe twice).
        barrier_sources = {coordinator if by_name[src].kind == "spout" else src
                           for src, _s, _g in inputs[cname]}
        for source in sorted(barrier_sources):
            wired[StreamRef(source, CHECKPOINT_STREAM)] = Grouping.all()
        # The user's options go along whole: a recipe ("construct", Flux's) in them is
        # what the wrapper builds the user's bolt from (squall.topology.loading.build_instance).
        shown = {k: spec.options[k] for k in (OPERATIONS_OPTION,) if k in spec.options}  # for the UI
        out[cname] = ComponentSpec(wrapper_for(spec.cls), "bolt", name=cname, inputs=wired, par=spec.par,
                                   tasks=spec.tasks, config=spec.config, outputs=[*streams, checkpoint],
                                   options={"bolt": spec.cls, "bolt_options": dict(spec.options), **shown})
    if not rewinding:
        out[CHECKPOINT_COMPONENT] = ComponentSpec(CheckpointSpout, "spout", name=CHECKPOINT_COMPONENT,
                                                  par=1, tasks=1)
    _check_acyclic(where, inputs)
    return build_definition(name, out, conf)


def _resolve(where: str, raw: Any, by_name: Mapping[str, ComponentSpec],
             name_of: Mapping[int, str]) -> list[tuple[str, str, Any]]:
    if isinstance(raw, (ComponentSpec, StreamRef, str)):
        raw = [raw]
    pairs = list(raw.items()) if isinstance(raw, Mapping) else [(key, Grouping.SHUFFLE) for key in raw]
    return [(*_source_of(where, key, by_name, name_of), grouping) for key, grouping in pairs]


def _check_acyclic(where: str, inputs: Mapping[str, list[tuple[str, str, Any]]]) -> None:
    """A bolt in a cycle waits for its own barrier: checkpoints would never complete."""
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> None:
        if node in done:
            return
        if node in path:
            cycle = [*path[path.index(node):], node]
            _fail(f"{where}: the bolts form a cycle ({' -> '.join(cycle)}); a checkpoint barrier "
                  "could never reach every input of a bolt in it")
        for src, _s, _g in inputs.get(node, []):
            visit(src, [*path, node])
        done.add(node)

    for node in inputs:
        visit(node, [])
