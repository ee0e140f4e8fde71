"""What ``TridentTopology.new_stream`` reads from, and how the compiler places each kind on
the transactional core (a coordinator spout and emitter bolts, squall.transactional):

* a ``BatchSpout`` (anything with ``emit_batch``): carried, encoded, by
  :class:`~squall.trident.spout.TridentSpout`;
* one of Squall's transactional spouts (``TransactionalSpout``,
  ``PartitionedTransactionalSpout``, ``OpaquePartitionedTransactionalSpout``: the memory and
  Redis stream spouts among them): placed itself, run by the core as a
  ``TransactionalTopology`` runs it (partitioned batches replayed from stored metadata, opaque
  emitters hearing of commits); its ``[attempt, ...]`` emits are the stream's tuples;
* a plain ``squall.Spout``: batched by
  :class:`~squall.trident.rich_spout.RichSpoutBatchExecutor` (Storm's name).

Each may be given as ``Cls.spec(...)`` (how Squall places spouts: options and outputs, and
``par`` as the stream's parallelism unless ``parallelism_hint`` says otherwise), as a class
(no options), or as an instance, as Storm's users write ``new OpaqueSpout(...)``.  An instance
travels by value (cloudpickle, as Trident's operations do), rebuilt in each task and then
given the task's runtime like any component; the class the definition names is then the
kind's base class, which every worker can import.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from squall.errors import TopologyValidationError
from squall.topology.component import Component, ComponentSpec, Spout, Stream, normalize_outputs
from squall.topology.loading import BUILDER_KEY, CONSTRUCT_OPTION, RUNTIME_ATTRS, resolve_class
from squall.transactional.spouts import SPOUT_KINDS
from squall.trident.graph import as_fields
from squall.trident.spout import TridentSpout, decode, encode

WHERE = "TridentTopology.new_stream"


@dataclass
class SpoutSource:
    """One ``new_stream``'s spout, as the compiler places it."""

    kind: str  # "batch", "plain", or a transactional kind: "transactional", "partitioned", "opaque"
    fields: list[str]  # the Trident stream's fields (the attempt aside)
    stream: str = "default"  # the emitter's stream Trident reads
    streams: list[Stream] = field(default_factory=list)  # every stream the emitter declares
    parallelism: int | None = None  # a spec's par above 1
    config: dict[str, Any] = field(default_factory=dict)  # a spec's component config
    label: str = ""  # the user's spout, as the UI shows it
    # What the coordinator and the emitters build (their "spout" and "spout_options").
    spout: Any = None
    options: dict[str, Any] = field(default_factory=dict)


def _fail(message: str) -> None:
    raise TopologyValidationError(message)


def _component_class(spout: Any) -> type | None:
    """The Squall component class ``spout`` is a spec, class or instance of (else None)."""
    if isinstance(spout, ComponentSpec):
        cls = resolve_class(spout.cls)
    elif isinstance(spout, type):
        cls = spout
    else:
        cls = type(spout)
    return cls if isinstance(cls, type) and issubclass(cls, (*SPOUT_KINDS, Spout)) else None


def spout_source(spout: Any, carry: bool = True) -> SpoutSource:
    """How ``spout`` runs; without ``carry`` only its shape (kind, fields, parallelism): what
    ``new_stream`` checks at once, leaving the spout free to change until ``build()``."""
    cls = _component_class(spout)
    if cls is None:
        if isinstance(spout, ComponentSpec):
            _fail(f"{WHERE}: {spout!r} is neither a transactional spout nor a Spout; a spec places "
                  "one of those (a BatchSpout is given as an instance)")
        if isinstance(spout, type) or not callable(getattr(spout, "emit_batch", None)):
            _fail(f"{WHERE}: {spout!r} is not a spout: give a BatchSpout instance, a transactional "
                  "spout or a plain Spout (Cls.spec(...), the class, or an instance)")
        return _batch_source(spout, carry)
    if isinstance(spout, ComponentSpec):
        spec = spout
    elif isinstance(spout, type):
        spec = ComponentSpec(cls, "spout")
    else:
        spec = ComponentSpec(cls, "spout", outputs=getattr(spout, "outputs", None),
                             options=getattr(spout, "options", None) or {})
    label = getattr(cls, "__name__", repr(cls))
    declared = normalize_outputs(spec.raw_outputs, f"{WHERE}: {label}")
    if not declared:
        _fail(f"{WHERE}: {label} declares no output stream (outputs); a spout's spec(outputs=...) or "
              "its class's outputs name the fields")
    if "default" in declared:
        stream = declared["default"]
    elif len(declared) == 1:
        stream = next(iter(declared.values()))
    else:
        _fail(f"{WHERE}: {label} declares streams {sorted(declared)} and none is 'default'; Trident "
              "reads one stream of a spout (Storm's rule: a spout of one stream, or the default one)")
    source = SpoutSource(kind="plain", fields=[], stream=stream.name, label=label,
                         parallelism=spec.par if spec.par > 1 else None, config=dict(spec.config))
    if issubclass(cls, SPOUT_KINDS):
        source.kind = cls.transactional_kind
        if not stream.fields:
            _fail(f"{WHERE}: {label}'s stream {stream.name!r} declares no fields; the first carries the "
                  "batch's TransactionAttempt")
        source.fields = as_fields(list(stream.fields[1:]), WHERE)
        source.streams = list(declared.values())
    else:
        if stream.direct:
            _fail(f"{WHERE}: {label}'s stream {stream.name!r} is direct; Trident reads no direct stream")
        source.fields = as_fields(list(stream.fields), WHERE)
        source.streams = [Stream(["tx", *stream.fields], name=stream.name)]
    if carry:
        ref, options = _carried(spout, spec)
        if source.kind == "plain":
            from squall.trident.rich_spout import RichSpoutBatchExecutor

            source.spout = RichSpoutBatchExecutor
            source.options = {"spout": ref, "spout_options": options, "stream": stream.name}
        else:
            source.spout, source.options = ref, options
    return source


def _batch_source(spout: Any, carry: bool) -> SpoutSource:
    getter = getattr(spout, "get_output_fields", None)
    fields = getter() if callable(getter) else getattr(spout, "output_fields", None)
    if fields is None:
        _fail(f"{WHERE}: {spout!r} names no output fields (output_fields)")
    fields = as_fields(fields, WHERE)
    source = SpoutSource(kind="batch", fields=fields, streams=[Stream(["tx", *fields])],
                         label=type(spout).__name__)
    if carry:
        source.spout, source.options = TridentSpout, {"spout": encode(spout)}
    return source


def _carried(spout: Any, spec: ComponentSpec) -> tuple[Any, dict[str, Any]]:
    """The class reference and options a task builds the user's spout from (build_inner)."""
    if not isinstance(spout, (ComponentSpec, type)):
        return _carry_instance(spout)
    ref = spec.cls
    if isinstance(ref, type):
        ref = f"{ref.__module__}:{ref.__qualname__}"  # nested in options: a path, not a class
    return ref, dict(spec.options)


def _carry_instance(spout: Any) -> tuple[str, dict[str, Any]]:
    twin = copy.copy(spout)
    for attr in RUNTIME_ATTRS:
        vars(twin).pop(attr, None)
    base = next(kind for kind in (*SPOUT_KINDS, Spout) if isinstance(spout, kind))
    recipe = {BUILDER_KEY: f"{__name__}:rebuild", "instance": encode(twin)}
    options = {**(getattr(spout, "options", None) or {}), CONSTRUCT_OPTION: recipe}
    return f"{base.__module__}:{base.__qualname__}", options


def rebuild(_cls: Any, recipe: dict[str, Any], _resolve: Any) -> Any:
    """The builder of a carried instance (squall.topology.loading.build_instance): the user's
    object as given, with a component's fresh runtime (``build_inner`` then binds the task's)."""
    spout = decode(recipe["instance"])
    Component.__init__(spout)  # its options come back from the definition's, as any component's
    return spout
