"""streamparse's topology DSL over Squall's: Stream, Grouping and what ``spec`` takes.

Squall's Topology already reads a class body of specs the way streamparse's does
(names from attributes, ``config``, inputs as a list or a dict of groupings), so
it is used as it is; what differs is here: streamparse's ``spec`` defaults (the
class's ``par`` and ``config``), a list input of a direct stream meaning a direct
grouping, and the Java parts, refused when the topology is defined.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn

from squall.errors import TopologyValidationError
from squall.topology.component import DEFAULT_STREAM, ComponentSpec, StreamRef, normalize_outputs
from squall.topology.component import Stream as SquallStream
from squall.topology.grouping import Grouping as SquallGrouping
from squall.topology.grouping import GroupingSpec

NO_JVM = ("Squall's workers are Python processes with no JVM, so Java code cannot run in them: "
          "port it to Python (a streamparse {kind} runs in-process) or, for a program in "
          "another language, use {shell}.spec(command=..., script=...) (multilang)")


class Stream(SquallStream):
    """streamparse's ``Stream(fields=None, name="default", direct=False)``."""

    def __init__(self, fields: Any = None, name: str = DEFAULT_STREAM, direct: bool = False) -> None:
        if fields is None:
            fields = []
        elif not isinstance(fields, (list, tuple)):
            msg = f"Stream fields must be a list, tuple, or None; given: {fields!r}"
            raise TypeError(msg)
        for field in fields:
            if not isinstance(field, str):
                msg = f"All field names must be strings; given: {field!r}"
                raise TypeError(msg)
        if not isinstance(name, str):
            msg = f"Stream name must be a string; given: {name!r}"
            raise TypeError(msg)
        if not isinstance(direct, bool):
            msg = f'"direct" must be either True or False; given: {direct!r}'
            raise TypeError(msg)
        super().__init__(fields, name, direct)


class Grouping(SquallGrouping):
    """streamparse's groupings: ``Grouping.SHUFFLE``, ``ALL``, ``GLOBAL``, ``NONE``,
    ``LOCAL_OR_SHUFFLE``, ``DIRECT`` and ``Grouping.fields(...)``; Squall's
    ``Grouping.custom(MyGrouping)`` for a Python custom grouping.  streamparse's
    ``custom_object``/``custom_serialized`` name Java classes and are refused."""

    @staticmethod
    def custom_object(java_class_name: Any, arg_list: Any = None) -> GroupingSpec:  # type: ignore[override]
        msg = (f"Grouping.custom_object({java_class_name!r}, ...) names a Java grouping class, which "
               "cannot run in Squall (no JVM): write a squall.CustomGrouping subclass and use "
               "Grouping.custom(MyGrouping, **kwargs)")
        raise TopologyValidationError(msg)

    @staticmethod
    def custom_serialized(java_serialized: Any) -> GroupingSpec:
        msg = ("Grouping.custom_serialized(...) is a serialized Java grouping, which cannot run in "
               "Squall (no JVM): write a squall.CustomGrouping subclass and use "
               "Grouping.custom(MyGrouping, **kwargs)")
        raise TopologyValidationError(msg)


def par_of(cls: type, par: Any) -> Any:
    """``par=`` or the class's ``par``; streamparse's per-environment dict is refused."""
    if par is None:
        par = getattr(cls, "par", 1)
    if isinstance(par, Mapping):
        msg = (f"{cls.__name__}.spec: par={dict(par)!r} gives a parallelism per sparse environment; "
               "give the number for this topology (an int)")
        raise TopologyValidationError(msg)
    return par  # checked (an int >= 1) with the rest of the topology


def config_of(cls: type, config: Any) -> dict[str, Any]:
    """``config=`` or the class's ``config``, as a new dict."""
    if config is None:
        config = getattr(cls, "config", None)
    if config is not None and not isinstance(config, Mapping):
        msg = f"{cls.__name__}.spec: config must be a dict or None; given: {config!r}"
        raise TopologyValidationError(msg)
    return dict(config or {})


def inputs_of(inputs: Any) -> Any:
    """streamparse's list form: each input shuffle-grouped, or direct-grouped when the
    stream it names is declared direct (what streamparse picks for a direct stream)."""
    if isinstance(inputs, (ComponentSpec, StreamRef)):
        inputs = [inputs]
    if not isinstance(inputs, (list, tuple)):
        return inputs  # a dict of groupings, None, or something Squall's checks refuse
    return {item: Grouping.DIRECT if _is_direct(item) else Grouping.SHUFFLE for item in inputs}


def _is_direct(item: Any) -> bool:
    spec, stream = (item.spec, item.stream) if isinstance(item, StreamRef) else (item, DEFAULT_STREAM)
    if not isinstance(spec, ComponentSpec):
        return False
    try:
        declared = normalize_outputs(spec.raw_outputs, repr(spec)).get(stream)
    except TopologyValidationError:
        return False  # reported with the topology, by the component's own checks
    return declared is not None and declared.direct


def refuse_java(kind: str, full_class_name: Any, serialized_java: Any) -> NoReturn:
    what = full_class_name or ("serialized Java" if serialized_java else "a Java class")
    plain = kind.removeprefix("Java")
    msg = (f"{kind}.spec({what!r}): " + NO_JVM.format(kind=plain, shell=f"Shell{plain}"))
    raise TopologyValidationError(msg)
