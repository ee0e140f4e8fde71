"""The submit-time check that a topology's classes load: every component class,
and every custom grouping, imports and has the right base.  The client and local
mode run it in their own process; nimbus runs it in a sandboxed child
(squall.nimbus.sandboxed_import)."""

from __future__ import annotations

from squall.errors import TopologyValidationError
from squall.topology.component import Bolt, Spout
from squall.topology.grouping import CustomGrouping
from squall.topology.loading import resolve_class
from squall.topology.topology import TopologyDef


def verify_loadable(defn: TopologyDef) -> None:
    """Every component class and custom grouping loads and has the right base."""
    for cdef in defn.components.values():
        where = f"topology {defn.name}: component {cdef.name!r}"
        base = Spout if cdef.kind == "spout" else Bolt
        try:
            cls = resolve_class(cdef.cls)
        except TopologyValidationError as e:
            msg = f"{where}: {e}"
            raise TopologyValidationError(msg) from e
        if not (isinstance(cls, type) and issubclass(cls, base)):
            msg = f"{where}: {cdef.cls!r} is not a {base.__name__} subclass"
            raise TopologyValidationError(msg)
        verify = getattr(cls, "verify_options", None)
        if verify is not None:
            # A wrapper component checks what it will load from its options
            # (a transactional topology's user classes) before the submit is accepted.
            verify(cdef.options, where)
        for inp in cdef.inputs:
            if inp.grouping.type != "custom":
                continue
            grouping = resolve_class(inp.grouping.custom)
            if not (isinstance(grouping, type) and issubclass(grouping, CustomGrouping)):
                msg = f"{where}: custom grouping {inp.grouping.custom!r} is not a CustomGrouping subclass"
                raise TopologyValidationError(msg)
