"""Turning "module:Class" references back into classes, and checking that a
topology's references all load before it is accepted."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from squall.errors import TopologyValidationError
from squall.topology.grouping import CustomGrouping
from squall.topology.topology import TopologyDef


def resolve_class(ref: Any) -> Any:
    """A class, or "package.module:Qualified.Name" imported."""
    if not isinstance(ref, str):
        return ref
    module_name, _, qualname = ref.partition(":")
    if not module_name or not qualname:
        msg = f"class reference {ref!r} must look like 'package.module:ClassName'"
        raise TopologyValidationError(msg)
    try:
        obj: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as e:
        msg = f"cannot load class {ref!r}: {e}"
        raise TopologyValidationError(msg) from e
    return obj


# The option a Flux component's recipe travels in (see squall.flux.objects).
CONSTRUCT_OPTION = "flux.construct"


def build_instance(class_ref: Any, options: Mapping[str, Any] | None = None) -> Any:
    """An instance of a component class (or "module:Class"): ``cls()``, or built from
    the recipe a Flux file's constructorArgs/properties/configMethods left in its
    options.  Every place that makes a user's spout or bolt goes through here: the
    executor for a component, and a wrapper (checkpointing, transactional) for the
    class it runs inside itself, with that class's own options."""
    cls = resolve_class(class_ref)
    recipe = (options or {}).get(CONSTRUCT_OPTION)
    if recipe is None:
        return cls()
    from squall.flux.objects import construct

    return construct(cls, recipe, resolve_class)


def instantiate(cdef: Any) -> Any:
    """A task's instance of a component (see :func:`build_instance`)."""
    return build_instance(cdef.cls, cdef.options)


def verify_loadable(defn: TopologyDef) -> None:
    """Every component class and custom grouping loads and has the right base."""
    from squall.topology.component import Bolt, Spout

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
