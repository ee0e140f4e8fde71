"""What a child is told at the handshake: Storm's context and the topology conf.

The context has Storm's full multilang shape (TopologyContext.toJSON):
``task->component`` with string keys, ``taskid``, ``componentid``,
``streams``, ``stream->outputfields``, ``stream->target->grouping``,
``source->stream->grouping`` and ``source->stream->fields``.  pystorm
builds its per-stream namedtuples from the last one, so it must be the
fields the sources really declare.
"""

from __future__ import annotations

import math
from typing import Any

from squall.topology.grouping import GroupingSpec

# Squall grouping -> Storm's Thrift Grouping field name.  Storm's global
# grouping is a fields grouping on no field; partial-key and custom groupings
# are serialized Java objects there.
_STORM_GROUPING = {
    "shuffle": "SHUFFLE",
    "fields": "FIELDS",
    "global": "FIELDS",
    "all": "ALL",
    "none": "NONE",
    "direct": "DIRECT",
    "local_or_shuffle": "LOCAL_OR_SHUFFLE",
    "partial_key": "CUSTOM_SERIALIZED",
    "custom": "CUSTOM_SERIALIZED",
}


def storm_grouping(grouping: GroupingSpec) -> dict[str, Any]:
    kind = _STORM_GROUPING.get(grouping.type, "CUSTOM_OBJECT")
    out: dict[str, Any] = {"type": kind}
    if kind == "FIELDS":
        out["fields"] = list(grouping.fields)
    return out


def storm_context(plan: Any, component: str, task: int) -> dict[str, Any]:
    """Storm's multilang context for ``task`` of ``component`` in a topology plan."""
    cdef = plan.components[component]
    targets: dict[str, dict[str, Any]] = {}
    for stream, subs in plan.subscribers.get(component, {}).items():
        for target, inp in subs:
            targets.setdefault(stream, {})[target] = storm_grouping(inp.grouping)
    source_grouping: dict[str, dict[str, Any]] = {}
    source_fields: dict[str, dict[str, list[str]]] = {}
    for inp in cdef.inputs:
        source_grouping.setdefault(inp.component, {})[inp.stream] = storm_grouping(inp.grouping)
        fields = plan.components[inp.component].streams[inp.stream].fields
        source_fields.setdefault(inp.component, {})[inp.stream] = list(fields)
    return {
        "task->component": {str(t): c for t, c in sorted(plan.task_component.items())},
        "taskid": task,
        "componentid": component,
        "streams": list(cdef.streams),
        "stream->outputfields": {name: list(s.fields) for name, s in cdef.streams.items()},
        "stream->target->grouping": targets,
        "source->stream->grouping": source_grouping,
        "source->stream->fields": source_fields,
    }


def wire_conf(conf: dict[str, Any], topology_name: str) -> dict[str, Any]:
    """The conf as the child gets it: every key, with values made JSON- and msgpack-safe.

    Adds ``topology.name`` (pystorm reads it) and ``storm.cluster.mode`` when absent.
    """
    out = {key: _plain(value) for key, value in conf.items() if isinstance(key, str)}
    out.setdefault("topology.name", topology_name)
    out.setdefault("storm.cluster.mode", "local")
    return out


def _plain(value: Any, depth: int = 0) -> Any:
    if value is None or type(value) in (str, bool, int):
        return value
    if type(value) is float:
        return value if math.isfinite(value) else str(value)
    if depth < 32 and isinstance(value, (list, tuple)):
        return [_plain(v, depth + 1) for v in value]
    if depth < 32 and isinstance(value, dict):
        return {str(k): _plain(v, depth + 1) for k, v in value.items()}
    # A class, a callable, bytes...: the child gets its description.
    return getattr(value, "__qualname__", None) or repr(value)
