"""Stream groupings as plain, JSON-able data.

The runtime turns each into a chooser (see ``squall.worker.executors.routing``).
Both Storm-style factory functions (``Grouping.fields("word")``) and
streamparse's constants (``Grouping.SHUFFLE``) are offered.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

GROUPING_TYPES = (
    "shuffle",
    "fields",
    "all",
    "global",
    "none",
    "direct",
    "local_or_shuffle",
    "partial_key",
    "custom",
)


@dataclass(frozen=True)
class GroupingSpec:
    type: str
    fields: tuple[str, ...] = ()
    # "module:Class" of a CustomGrouping subclass, or the class itself in local mode.
    custom: Any = None
    args: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type}
        if self.fields:
            out["fields"] = list(self.fields)
        if self.custom is not None:
            out["custom"] = class_path(self.custom)
            out["args"] = dict(self.args)
        return out


def class_path(obj: Any) -> str:
    if isinstance(obj, str):
        return obj
    return f"{obj.__module__}:{obj.__qualname__}"


def _field_names(fields: tuple[Any, ...]) -> tuple[str, ...]:
    if len(fields) == 1 and isinstance(fields[0], (list, tuple)):
        fields = tuple(fields[0])
    from squall.errors import TopologyValidationError

    if not fields:
        msg = "a fields grouping needs at least one field name"
        raise TopologyValidationError(msg)
    for name in fields:
        if not isinstance(name, str):
            msg = f"grouping field names must be strings, got {name!r}"
            raise TopologyValidationError(msg)
    return tuple(fields)


class CustomGrouping:
    """Base class of a user grouping, as Storm's CustomStreamGrouping.

    ``prepare`` is called once per emitting task with the list of target task
    ids; ``choose_tasks`` returns the subset of them a tuple goes to.
    """

    def __init__(self, **args: Any) -> None:
        self.args = args

    def prepare(self, context: Any, stream: str, target_tasks: list[int]) -> None:
        self.target_tasks = target_tasks

    def choose_tasks(self, task_id: int, values: Any) -> list[int]:
        raise NotImplementedError


class Grouping:
    SHUFFLE = GroupingSpec("shuffle")
    ALL = GroupingSpec("all")
    GLOBAL = GroupingSpec("global")
    NONE = GroupingSpec("none")
    DIRECT = GroupingSpec("direct")
    LOCAL_OR_SHUFFLE = GroupingSpec("local_or_shuffle")

    @staticmethod
    def shuffle() -> GroupingSpec:
        return Grouping.SHUFFLE

    @staticmethod
    def all() -> GroupingSpec:
        return Grouping.ALL

    @staticmethod
    def global_() -> GroupingSpec:
        return Grouping.GLOBAL

    @staticmethod
    def none() -> GroupingSpec:
        return Grouping.NONE

    @staticmethod
    def direct() -> GroupingSpec:
        return Grouping.DIRECT

    @staticmethod
    def local_or_shuffle() -> GroupingSpec:
        return Grouping.LOCAL_OR_SHUFFLE

    @staticmethod
    def fields(*fields: Any) -> GroupingSpec:
        return GroupingSpec("fields", _field_names(fields))

    @staticmethod
    def partial_key(*fields: Any) -> GroupingSpec:
        return GroupingSpec("partial_key", _field_names(fields))

    partial_key_grouping = partial_key

    @staticmethod
    def custom(grouping: Any, **args: Any) -> GroupingSpec:
        """A :class:`CustomGrouping` subclass (or "module:Class") and its kwargs."""
        if not isinstance(grouping, str) and not (
            isinstance(grouping, type) and issubclass(grouping, CustomGrouping)
        ):
            msg = f"a custom grouping must be a CustomGrouping subclass or 'module:Class', got {grouping!r}"
            raise TypeError(msg)
        return GroupingSpec("custom", custom=grouping, args=args)

    custom_object = custom


def grouping_from_dict(data: dict[str, Any]) -> GroupingSpec:
    return GroupingSpec(
        data["type"], tuple(data.get("fields", ())), data.get("custom"), dict(data.get("args", {}))
    )
