"""A WindowCore's buffer as JSON and back: what a persisted stateful window
saves with each checkpoint (pure: no store, no clock).

Restored tuples carry their source, task and values but no anchors: the
tuples they were have been acked when the checkpoint holding them committed,
so there is nothing left to ack or anchor to.
"""

from __future__ import annotations

from typing import Any

from squall.topology.tuple import Tuple, record_type
from squall.windowing.core import WindowCore


def _encode(tup: Any) -> list[Any]:
    return [tup.component, tup.stream, tup.task, list(tup.values._fields), list(tup.values)]


def _decode(raw: list[Any]) -> Tuple:
    component, stream, task, fields, values = raw
    return Tuple(None, component, stream, task, record_type(tuple(fields))(*values))


CODEC = (_encode, _decode)


def snapshot(core: WindowCore) -> dict[str, Any]:
    """The core as JSON.  A paged buffer (max_events_in_memory) saves its changed
    partitions to its store here, and the snapshot names them instead of holding tuples."""
    marks = core.watermarks
    paged = not isinstance(core.tuples, list)
    return {
        "ts": list(core.ts), "fresh": list(core.fresh),
        "tuples": core.tuples.checkpoint() if paged else [_encode(t) for t in core.tuples],  # type: ignore[attr-defined]
        "expired": [_encode(t) for t in core.expired], "since_trigger": core.since_trigger,
        "count_pos": core.count_pos, "last_tick": core.last_tick, "next_end": core.next_end,
        # JSON keys are strings: the stream ids (component, stream) go as pairs.
        "latest": None if marks is None else [[list(s), ts] for s, ts in marks.latest.items()],
        "watermark": None if marks is None else marks.watermark,
    }


def restore(core: WindowCore, snap: dict[str, Any] | None) -> None:
    """Put ``core`` back as ``snap`` left it (None: empty)."""
    del core.ts[:]
    paged = not isinstance(core.tuples, list)
    if paged:
        core.tuples.restore(None if snap is None else snap["tuples"])  # type: ignore[attr-defined]
    else:
        core.tuples[:] = []
    core.fresh[:] = b""
    core.expired = []
    if snap is None:
        core.since_trigger, core.count_pos, core.last_tick, core.next_end = 0, 0, None, None
        if core.watermarks is not None:
            core.watermarks.latest, core.watermarks.watermark = {}, None
        return
    core.ts.extend(snap["ts"])
    if not paged:
        core.tuples.extend(_decode(t) for t in snap["tuples"])
    core.fresh.extend(snap["fresh"])
    core.expired = [_decode(t) for t in snap["expired"]]
    core.since_trigger, core.count_pos = snap["since_trigger"], snap["count_pos"]
    core.last_tick, core.next_end = snap["last_tick"], snap["next_end"]
    if core.watermarks is not None:
        core.watermarks.latest = {tuple(s): ts for s, ts in snap["latest"] or []}
        core.watermarks.watermark = snap["watermark"]
