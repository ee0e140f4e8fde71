"""What an emit that breaks its stream's declaration is told (the emitters of emit.py
raise it): the cold path, kept out of the compiled module."""

from __future__ import annotations

from typing import Any


def bad_emit(component: str, stream: str, streams: dict[str, Any], values: Any,
             direct_task: Any) -> Exception:
    so = streams.get(stream)
    if so is None:
        return ValueError(f"component {component!r} emitted on undeclared stream {stream!r} "
                          f"(declared: {sorted(streams)})")
    if not isinstance(values, (list, tuple)):
        return TypeError(f"component {component!r} must emit a list or tuple of values, got {values!r}")
    if len(values) != so.nfields:
        return ValueError(f"component {component!r} emitted {len(values)} values on stream {stream!r}, "
                          f"which declares {so.nfields} fields {list(so.fields)}")
    if so.direct:
        return ValueError(f"stream {stream!r} of {component!r} is direct: emit with direct_task=")
    return ValueError(f"stream {stream!r} of {component!r} is not direct: direct_task is not allowed")
