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


def snapshot(core: WindowCore) -> dict[str, Any]:
    marks = core.watermarks
    return {
        "ts": list(core.ts), "tuples": [_encode(t) for t in core.tuples], "fresh": list(core.fresh),
        "expired": [_encode(t) for t in core.expired], "since_trigger": core.since_trigger,
        "count_pos": core.count_pos, "last_tick": core.last_tick, "next_end": core.next_end,
        # JSON keys are strings: the stream ids (component, stream) go as pairs.
        "latest": None if marks is None else [[list(s), ts] for s, ts in marks.latest.items()],
        "watermark": None if marks is None else marks.watermark,
    }


def restore(core: WindowCore, snap: dict[str, Any] | None) -> None:
    """Put ``core`` back as ``snap`` left it (None: empty)."""
    del core.ts[:]
    core.tuples[:] = []
    core.fresh[:] = b""
    core.expired = []
    if snap is None:
        core.since_trigger, core.count_pos, core.last_tick, core.next_end = 0, 0, None, None
        if core.watermarks is not None:
            core.watermarks.latest, core.watermarks.watermark = {}, None
        return
    core.ts.extend(snap["ts"])
    core.tuples.extend(_decode(t) for t in snap["tuples"])
    core.fresh.extend(snap["fresh"])
    core.expired = [_decode(t) for t in snap["expired"]]
    core.since_trigger, core.count_pos = snap["since_trigger"], snap["count_pos"]
    core.last_tick, core.next_end = snap["last_tick"], snap["next_end"]
    if core.watermarks is not None:
        core.watermarks.latest = {tuple(s): ts for s, ts in snap["latest"] or []}
        core.watermarks.watermark = snap["watermark"]
