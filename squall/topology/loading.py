"""Turning "module:Class" references back into classes, and checking that a
topology's references all load before it is accepted."""

from __future__ import annotations

import base64
import copy
import importlib
from collections.abc import Mapping
from typing import Any

import cloudpickle

from squall.errors import TopologyValidationError


def by_value(obj: Any) -> str:
    """An object as a topology's options carry it by value (cloudpickle: lambdas, closures and
    classes of the topology's own module too), as text; :func:`from_value` makes it again."""
    return base64.b64encode(cloudpickle.dumps(obj)).decode()


def from_value(text: str) -> Any:
    return cloudpickle.loads(base64.b64decode(text))


# A component's runtime, bound afresh in the task that runs it: not carried with an instance
# (Trident's and the Streams API's).  A logger would carry this process's logging setup, and
# once that is configured, as in a worker importing the topology's module, holds its
# stream's lock: no pickle at all; a context would carry this process's topology.
RUNTIME_ATTRS = ("conf", "context", "logger", "clock", "metrics", "emit", "call_soon", "stopping",
                 "report_error")


def instance_by_value(component: Any) -> str:
    """A component instance by value, without its runtime: its builder (a construct recipe's,
    see CONSTRUCT_OPTION) gives it a fresh one, as ``Component.__init__`` makes it."""
    twin = copy.copy(component)
    for attr in RUNTIME_ATTRS:
        vars(twin).pop(attr, None)
    return by_value(twin)


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


def wrapped_class(options: Mapping[str, Any], key: str, kinds: type | tuple[type, ...], refusal: str,
                  where: str) -> Any:
    """The class a wrapper runs inside itself (``options[key]``), checked to be one of
    ``kinds``; TopologyValidationError ``"<where>: <ref> <refusal>"`` otherwise."""
    found = resolve_class(options[key])
    if not (isinstance(found, type) and issubclass(found, kinds)):
        msg = f"{where}: {options[key]!r} {refusal}"
        raise TopologyValidationError(msg)
    return found


# The option that holds a recipe for a component's instance (constructor
# arguments, properties, method calls), with the "builder" that makes an
# instance from it: "module:function", called as builder(cls, recipe, resolve).
# Flux writes such recipes (squall.flux.objects.construct builds them); the
# recipe travels with the definition, so a worker builds the instance without
# the core knowing which feature wrote it.
CONSTRUCT_OPTION = "construct"
BUILDER_KEY = "builder"


def build_instance(class_ref: Any, options: Mapping[str, Any] | None = None) -> Any:
    """An instance of a component class (or "module:Class"): ``cls()``, or built from
    the recipe in its options (see CONSTRUCT_OPTION).  Every place that makes a user's
    spout or bolt goes through here: the executor for a component, and a wrapper
    (checkpointing, transactional) for the class it runs inside itself, with that
    class's own options."""
    cls = resolve_class(class_ref)
    recipe = (options or {}).get(CONSTRUCT_OPTION)
    if recipe is None:
        return cls()
    builder_ref = recipe.get(BUILDER_KEY) if isinstance(recipe, Mapping) else None
    if not builder_ref:
        msg = f"the {CONSTRUCT_OPTION!r} option of {class_ref!r} names no {BUILDER_KEY!r} to build it with"
        raise TopologyValidationError(msg)
    return resolve_class(builder_ref)(cls, recipe, resolve_class)


def instantiate(cdef: Any) -> Any:
    """A task's instance of a component (see :func:`build_instance`)."""
    return build_instance(cdef.cls, cdef.options)
