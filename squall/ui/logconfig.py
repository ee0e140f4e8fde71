"""Storm's ``/api/v1/topology/:id/logconfig`` (GET and POST), shaped by pure functions.

Storm's UI answers both with the topology's levels::

    {"namedLoggerLevels": {"ROOT": {"target_level": "DEBUG", "reset_level": null,
                                    "timeout": 30, "timeout_epoch": 1718000030000}}}

(``timeout_epoch`` in milliseconds, 0 for a level set until reset; ``reset_level`` is null
as in Storm's answer: it is each worker's own level, its ``--log-level``, which nimbus
does not know), and takes a body of the same shape, ``target_level`` null (or absent)
resetting a name.  What the names mean in Squall is squall.runtime.log_levels'.

Squall's addition: a POST's answer carries ``warnings`` when a name it set matches no
component of the topology and has no dot (a typo of a component id, most likely).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from squall.runtime.log_levels import ROOT, decode, level_number, logger_name, timeout_secs

Changes = dict[str, tuple[str | None, int]]  # name -> (level, or None to reset; timeout secs)


def logconfig_request(body: Any) -> Changes:
    """Storm's POST body -> the changes it asks for; ValueError naming what is malformed."""
    if not isinstance(body, dict) or not isinstance(body.get("namedLoggerLevels"), dict):
        msg = ('the request body must be {"namedLoggerLevels": {NAME: {"target_level": LEVEL or null, '
               '"timeout": SECONDS}}}')
        raise ValueError(msg)
    changes: Changes = {}
    for name, setting in body["namedLoggerLevels"].items():
        where = f"namedLoggerLevels[{name!r}]"
        if setting is None:
            setting = {}
        if not isinstance(setting, dict):
            msg = f"{where} must be an object with 'target_level' and 'timeout'"
            raise ValueError(msg)
        try:
            level = setting.get("target_level")
            if level is not None:
                level_number(level)
            changes[logger_name(name)] = (None if level is None else level.upper(),
                                          timeout_secs(setting.get("timeout")))
        except ValueError as e:
            msg = f"{where}: {e}"
            raise ValueError(msg) from e
    return changes


def logconfig_answer(levels: Any) -> dict[str, Any]:
    """The wire form of a topology's levels -> Storm's answer."""
    valid, _invalid = decode(levels)
    return {"namedLoggerLevels": {
        name: {"target_level": entry.level, "reset_level": None, "timeout": entry.timeout_secs,
               "timeout_epoch": 0 if entry.expires_at is None else round(entry.expires_at * 1000)}
        for name, entry in sorted(valid.items())}}


def unmatched(changes: Changes, topology: str, components: Iterable[str]) -> list[str]:
    """Warnings for the names set that are neither ROOT, a component id, nor dotted."""
    known = sorted(components)
    return [f"{name!r} is not a component of topology {topology!r} (its components: {', '.join(known)}) "
            f"nor a dotted logger name: it covers only loggers named {name!r} or {name}.*"
            for name, (level, _timeout) in changes.items()
            if level is not None and name != ROOT and "." not in name and name not in known
            and not name.startswith("__")]


def components_of(record: Mapping[str, Any]) -> list[str]:
    """The component ids of a stored topology record's definition."""
    return [c["name"] for c in (record.get("definition") or {}).get("components") or ()
            if isinstance(c, Mapping) and isinstance(c.get("name"), str)]
