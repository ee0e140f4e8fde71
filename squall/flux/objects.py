"""Building the objects a Flux file describes, from plain data.

A Flux spout, bolt, component or custom grouping with ``constructorArgs``,
``factory``/``factoryArgs``, ``properties`` or ``configMethods`` travels in
the topology spec as a *recipe*, JSON-able like the rest of the spec::

    {"class": "pkg.mod:Cls", "factory": None, "args": [...],
     "properties": [["name", value], ...], "calls": [["method", [args]], ...]}

A value that is another object (Flux's ``ref``) is ``{OBJECT: recipe}``; a
``reflist`` is a list of those.  Each task builds its own objects from the
recipe, as each Storm task deserializes its own copy; within one build, a
component referenced twice is built once and shared.

Properties follow Storm's rule in Python terms: a ``set_<name>`` method if
the object has one, else the attribute is set.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from squall.errors import TopologyValidationError
from squall.topology.grouping import CustomGrouping
from squall.topology.loading import BUILDER_KEY, CONSTRUCT_OPTION

OBJECT = "__flux_object__"
# What a recipe names as its builder (squall.topology.loading.build_instance calls it).
BUILDER = "squall.flux.objects:construct"
__all__ = ["BUILDER", "BUILDER_KEY", "CONSTRUCT_OPTION", "OBJECT", "FluxGrouping", "RecipeError", "construct"]


class RecipeError(TopologyValidationError):
    """A step of a recipe failed; ``step`` says which (for the file's line)."""

    def __init__(self, message: str, step: tuple[str, int]) -> None:
        super().__init__(message)
        self.step = step


def construct(cls: Any, recipe: dict[str, Any], resolve: Callable[[str], Any],
              built: dict[str, Any] | None = None) -> Any:
    """An instance of ``cls`` made as ``recipe`` says; ``resolve`` loads "module:Class"."""
    built = {} if built is None else built

    def value(v: Any) -> Any:
        if isinstance(v, dict) and OBJECT in v and len(v) == 1:
            inner = v[OBJECT]
            key = inner.get("id") or repr(inner)
            if key not in built:
                built[key] = construct(resolve(inner["class"]), inner, resolve, built)
            return built[key]
        if isinstance(v, list):
            return [value(x) for x in v]
        return v

    args = [value(a) for a in recipe.get("args") or []]
    factory = recipe.get("factory")
    try:
        if factory:
            make = getattr(cls, factory, None)
            if not callable(make):
                msg = f"{_name(cls)} has no factory method {factory!r}"
                raise RecipeError(msg, ("factory", 0))
            obj = make(*args)
        else:
            obj = cls(*args)
    except RecipeError:
        raise
    except Exception as e:  # noqa: BLE001 - any constructor error becomes the file's error
        how = f"{_name(cls)}.{factory}" if factory else _name(cls)
        msg = f"cannot construct {how}({_args(args)}): {type(e).__name__}: {e}"
        raise RecipeError(msg, ("factory" if factory else "args", 0)) from e
    for i, (name, raw) in enumerate(recipe.get("properties") or []):
        v = value(raw)
        setter = getattr(obj, f"set_{name}", None)
        try:
            if callable(setter):
                setter(v)
            else:
                setattr(obj, name, v)
        except Exception as e:  # noqa: BLE001
            msg = f"cannot set property {name!r} of {_name(cls)}: {type(e).__name__}: {e}"
            raise RecipeError(msg, ("properties", i)) from e
    for i, (name, raw_args) in enumerate(recipe.get("calls") or []):
        method = getattr(obj, name, None)
        if not callable(method):
            msg = f"{_name(cls)} has no method {name!r}"
            raise RecipeError(msg, ("configMethods", i))
        call_args = [value(a) for a in raw_args]
        try:
            result = method(*call_args)
        except Exception as e:  # noqa: BLE001
            msg = f"{_name(cls)}.{name}({_args(call_args)}) failed: {type(e).__name__}: {e}"
            raise RecipeError(msg, ("configMethods", i)) from e
        # A builder-style method returns a new object: keep going with that one.
        if result is not None and isinstance(result, type(obj)):
            obj = result
    return obj


def _name(cls: Any) -> str:
    return getattr(cls, "__qualname__", repr(cls))


def _args(args: list[Any]) -> str:
    return ", ".join(repr(a) for a in args)


class FluxGrouping(CustomGrouping):
    """A Flux ``CUSTOM`` grouping whose ``customClass`` has a recipe: built in
    the emitting task, then every call goes to the user's grouping."""

    def __init__(self, recipe: dict[str, Any]) -> None:
        from squall.topology.loading import resolve_class

        self.inner = construct(resolve_class(recipe["class"]), recipe, resolve_class)

    def prepare(self, context: Any, stream: str, target_tasks: list[int]) -> None:
        self.inner.prepare(context, stream, target_tasks)

    def choose_tasks(self, task_id: int, values: Any) -> list[int]:
        return self.inner.choose_tasks(task_id, values)

