"""TransactionalTopology: a class body of a transactional spout and batch
bolts, rewritten into the plain topology that runs it.

The rewrite is the seed's "Implementation" section, in Storm's own shape
(TransactionalTopologyBuilder):

- the user's spout ``S`` becomes ``S/coordinator``, a spout of one task,
  and ``S``, the emitter bolt with the user's parallelism, all-grouped to
  the coordinator's batch stream (and to its commit stream for an opaque
  spout, whose emitters store metadata on commit);
- every bolt runs inside a :class:`BatchCoordinatedBolt`, subscribed besides its
  own inputs to a direct count stream from each component it reads;
  committers also to the coordinator's commit stream.

What comes out is an ordinary :class:`TopologyDef`: nimbus, the scheduler
and the workers need to know nothing of transactions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from squall.errors import TopologyValidationError
from squall.topology.component import Bolt, ComponentSpec, Spout, Stream, StreamRef, normalize_outputs
from squall.topology.grouping import Grouping
from squall.topology.topology import Topology, TopologyDef, _source_of, build_definition
from squall.transactional.bolts import BatchBolt, Committer
from squall.transactional.coordinated import BatchCoordinatedBolt
from squall.transactional.coordinator_spout import CoordinatorSpout
from squall.transactional.emitter import EmitterBolt
from squall.transactional.output import BATCH_STREAM, COMMIT_STREAM, COUNT_STREAM, coordinator_name
from squall.transactional.spouts import SPOUT_KINDS


def _fail(message: str) -> None:
    raise TopologyValidationError(message)


class TransactionalTopology(Topology):
    """Subclass and assign one transactional spout and batch bolts (or plain bolts)."""

    _abstract = True
    # The key of this topology's state (current txid, batch metadata); None:
    # the name it is submitted under, so a resubmission continues.
    transactional_id: ClassVar[str | None] = None

    @classmethod
    def _build(cls, specs: dict[str, ComponentSpec]) -> TopologyDef:
        return build_transactional(cls.__name__, specs, dict(cls.config), cls.transactional_id)


def build_transactional(name: str, specs: Mapping[str, ComponentSpec], conf: dict[str, Any],
                        transactional_id: str | None) -> TopologyDef:
    where = f"transactional topology {name}"
    if transactional_id is not None and (not isinstance(transactional_id, str) or not transactional_id
                                         or "/" in transactional_id):
        _fail(f"{where}: transactional_id must be a non-empty string without '/', got {transactional_id!r}")
    # The class attribute, if set; else topology.transactional.id from the
    # config as run (a submit may set it), else the submitted name: see state_id.
    tid = transactional_id
    if conf.get("topology.acker.executors") == 0:
        _fail(f"{where}: topology.acker.executors is 0, but the acker is how the coordinator learns "
              "that a batch was processed or committed")
    by_name: dict[str, ComponentSpec] = {}
    for attr, spec in specs.items():
        by_name[spec.name if spec.name is not None else attr] = spec
    name_of = {id(spec): cname for cname, spec in by_name.items()}

    spouts = [c for c, s in by_name.items() if isinstance(s.cls, type) and issubclass(s.cls, SPOUT_KINDS)]
    plain = [c for c, s in by_name.items() if s.kind == "spout" and c not in spouts]
    if plain:
        _fail(f"{where}: {plain} are not transactional spouts; a transactional topology reads "
              "from exactly one TransactionalSpout, PartitionedTransactionalSpout or "
              "OpaquePartitionedTransactionalSpout")
    if len(spouts) != 1:
        _fail(f"{where}: needs exactly one transactional spout, got {len(spouts)}"
              + (f" ({sorted(spouts)})" if spouts else ""))
    spout = spouts[0]
    coordinator = coordinator_name(spout)
    if coordinator in by_name:
        _fail(f"{where}: the name {coordinator!r} is the spout's coordinator; rename that component")

    # Sources of each bolt, as (source, stream, grouping), names resolved.
    inputs: dict[str, list[tuple[str, str, Any]]] = {}
    for cname, spec in by_name.items():
        if cname == spout:
            continue
        here = f"{where}: component {cname!r}"
        cls = spec.cls
        if not (isinstance(cls, type) and issubclass(cls, (BatchBolt, Bolt))):
            _fail(f"{here}: {cls!r} is neither a BatchBolt nor a Bolt")
        if issubclass(cls, Spout):
            _fail(f"{here}: only the transactional spout may be a spout")
        if issubclass(cls, Bolt) and not cls.auto_ack:
            # Its emits must happen inside process(), counted against the batch;
            # one that acks by hand later (ShellBolt, SparkBolt) cannot be counted.
            _fail(f"{here}: {cls.__name__} acks by hand (auto_ack = False); inside a transactional "
                  "topology Squall acks, and a plain bolt must emit from process() itself")
        if (_is_committer(spec) or "committer" in spec.options) and not issubclass(cls, BatchBolt):
            _fail(f"{here}: only a BatchBolt can be a committer (its finish_batch is the commit)")
        if (getattr(cls, "skips_replayed_txids", False)
                and by_name[spout].cls.transactional_kind == "opaque"):
            _fail(f"{here}: {cls.__name__} skips a replayed txid whole, which is exact only when a replay "
                  f"carries the same batch; the opaque spout {spout!r} may replay another (write "
                  "with an OpaqueMap, or read with a partitioned spout)")
        if spec.raw_inputs is None:
            _fail(f"{here}: a bolt needs inputs")
        inputs[cname] = _resolve(here, spec.raw_inputs, by_name, name_of)
        for source, stream, _g in inputs[cname]:
            if stream.startswith("$"):
                _fail(f"{here}: stream {stream!r} of {source!r} is internal to the transactional topology")

    streams = {cname: _streams(f"{where}: component {cname!r}", spec) for cname, spec in by_name.items()}
    _check_acyclic(where, inputs)
    late = _commit_phase(by_name, inputs)

    sspec = by_name[spout]
    spout_opts = {"spout": sspec.cls, "spout_options": dict(sspec.options), "transactional_id": tid}
    out: dict[str, ComponentSpec] = {}
    out[coordinator] = ComponentSpec(CoordinatorSpout, "spout", name=coordinator, par=1, tasks=1,
                                     config=sspec.config, options=spout_opts)
    emitter_inputs: dict[Any, Any] = {StreamRef(coordinator, BATCH_STREAM): Grouping.all()}
    if sspec.cls.transactional_kind == "opaque":
        emitter_inputs[StreamRef(coordinator, COMMIT_STREAM)] = Grouping.all()
    out[spout] = ComponentSpec(EmitterBolt, "bolt", name=spout, inputs=emitter_inputs, par=sspec.par,
                               tasks=sspec.tasks, config=sspec.config, outputs=streams[spout],
                               options=spout_opts)
    for cname, sources in inputs.items():
        spec = by_name[cname]
        wired: dict[Any, Any] = {StreamRef(src, stream): grouping for src, stream, grouping in sources}
        for src in sorted({src for src, _s, _g in sources}):
            wired[StreamRef(src, COUNT_STREAM)] = Grouping.direct()
        committer = _is_committer(spec)
        if committer:
            wired[StreamRef(coordinator, COMMIT_STREAM)] = Grouping.all()
        out[cname] = ComponentSpec(
            BatchCoordinatedBolt, "bolt", name=cname, inputs=wired, par=spec.par, tasks=spec.tasks,
            config=spec.config, outputs=streams[cname],
            options={"bolt": spec.cls, "bolt_options": dict(spec.options), "committer": committer,
                     "coordinator": coordinator, "transactional_id": tid,
                     "late_sources": sorted({s for s, _st, _g in sources if s in late})},
        )
    return build_definition(name, out, conf)


def _is_committer(spec: ComponentSpec) -> bool:
    return bool(getattr(spec, "committer", False)) or (isinstance(spec.cls, type)
                                                       and issubclass(spec.cls, Committer))


def _resolve(where: str, raw: Any, by_name: Mapping[str, ComponentSpec],
             name_of: Mapping[int, str]) -> list[tuple[str, str, Any]]:
    if isinstance(raw, (ComponentSpec, StreamRef, str)):
        raw = [raw]
    pairs = list(raw.items()) if isinstance(raw, Mapping) else [(key, Grouping.SHUFFLE) for key in raw]
    return [(*_source_of(where, key, by_name, name_of), grouping) for key, grouping in pairs]


def _streams(where: str, spec: ComponentSpec) -> list[Stream]:
    """The component's own streams, checked, plus its count stream."""
    declared = normalize_outputs(spec.raw_outputs, where)
    for sname, stream in declared.items():
        if sname.startswith("$"):
            _fail(f"{where}: stream names starting with '$' are internal to transactional topologies")
        if not stream.fields:
            _fail(f"{where}: stream {sname!r} declares no fields; the first field of every stream "
                  "in a transactional topology carries the TransactionAttempt")
    return [*declared.values(), Stream(["tx", "count"], name=COUNT_STREAM, direct=True)]


def _check_acyclic(where: str, inputs: Mapping[str, list[tuple[str, str, Any]]]) -> None:
    """A batch completes when every upstream task reported: a cycle never does."""
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        if state.get(node) == 2:
            return
        if state.get(node) == 1:
            cycle = [*path[path.index(node):], node]
            _fail(f"{where}: the components form a cycle ({' -> '.join(cycle)}); "
                  "a batch through a cycle could never be known complete")
        state[node] = 1
        for src, _s, _g in inputs.get(node, []):
            visit(src, [*path, node])
        state[node] = 2

    for node in inputs:
        visit(node, [])


def _commit_phase(by_name: Mapping[str, ComponentSpec],
                  inputs: Mapping[str, list[tuple[str, str, Any]]]) -> set[str]:
    """Committers and every component downstream of one: they finish in the commit phase."""
    late = {c for c in inputs if _is_committer(by_name[c])}
    changed = True
    while changed:
        changed = False
        for cname, sources in inputs.items():
            if cname not in late and any(src in late for src, _s, _g in sources):
                late.add(cname)
                changed = True
    return late
