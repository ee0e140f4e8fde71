"""Log levels changed on a running topology (Storm's ``set_log_level``), as a pure core.

Storm names log4j loggers; Squall's names map onto its own logging (structlog, see
squall.runtime.logging):

* ``ROOT`` (any case): every line of the worker;
* a component id (``split``): that component's own logger (``self.logger``, and what a
  multilang child logs), not the engine's lines about it;
* a logger name, or a dotted prefix of one (``squall.worker``, ``squall.component.Split``,
  ``myapp`` for a ``structlog.get_logger("myapp.db")``): every logger so named or below.

The most specific name wins, as a log4j logger's own level beats its parent's: the
component id, then the longest logger-name prefix, then ROOT; with none of them the
worker's own level stands (its ``--log-level``; a component's lines from info up).

Nimbus keeps a topology's levels in ZooKeeper, each with an absolute expiry (wall
seconds) computed from the timeout when it was set (:func:`merge`); supervisors pass them
to their workers in assignment.json, and a worker holds them in a :class:`LogLevels`
that its log filter asks on every line and that drops an entry once its time has come.

On the wire (ZooKeeper, assignment.json)::

    {"ROOT": {"level": "DEBUG", "timeout_secs": 30, "expires_at": 1718000030.0},
     "split": {"level": "INFO", "timeout_secs": 0, "expires_at": null}}   # until reset
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

ROOT = "ROOT"
OFF = logging.CRITICAL + 10  # above every level: nothing passes
# Storm's (log4j's) level names, and the few Python spells differently.
LEVELS = {"ALL": logging.DEBUG, "TRACE": logging.DEBUG, "DEBUG": logging.DEBUG, "INFO": logging.INFO,
          "WARN": logging.WARNING, "WARNING": logging.WARNING, "ERROR": logging.ERROR,
          "FATAL": logging.CRITICAL, "CRITICAL": logging.CRITICAL, "OFF": OFF}
STORM_LEVELS = ("ALL", "TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF")
MAX_TIMEOUT_SECS = 2**31 - 1  # Storm's is an int
MAX_NAMES = 100  # per topology: the whole set travels in every worker's assignment
MAX_NAME_CHARS = 256


def level_number(name: Any) -> int:
    """The numeric level of a level's name (any case); ValueError naming the known ones."""
    number = LEVELS.get(name.upper()) if isinstance(name, str) else None
    if number is None:
        msg = f"unknown log level {name!r} (one of {', '.join(STORM_LEVELS)})"
        raise ValueError(msg)
    return number


def logger_name(name: Any) -> str:
    """A name levels may be set for, ROOT spelled as Storm does; ValueError if it cannot be one."""
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME_CHARS or name != name.strip():
        msg = (f"a logger name must be a non-empty string of at most {MAX_NAME_CHARS} characters "
               f"without surrounding blanks (ROOT for the root logger), got {name!r}")
        raise ValueError(msg)
    return ROOT if name.upper() == ROOT else name


def timeout_secs(value: Any) -> int:
    """A timeout as Storm takes it: whole seconds, 0 (or none) for until reset."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TIMEOUT_SECS:
        msg = f"a timeout must be a whole number of seconds from 0 to {MAX_TIMEOUT_SECS}, got {value!r}"
        raise ValueError(msg)
    return value


@dataclass(frozen=True)
class NamedLevel:
    level: str  # as set, upper case (DEBUG, WARN, ...)
    timeout_secs: int  # as asked; 0: until reset
    expires_at: float | None  # wall seconds; None: until reset

    @property
    def number(self) -> int:
        return LEVELS[self.level]

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and now >= self.expires_at

    def to_dict(self) -> dict[str, Any]:
        return {"level": self.level, "timeout_secs": self.timeout_secs, "expires_at": self.expires_at}

    @classmethod
    def from_dict(cls, data: Any) -> NamedLevel:
        """ValueError when ``data`` is not what :meth:`to_dict` writes."""
        if not isinstance(data, Mapping):
            msg = f"a named level must be an object, got {type(data).__name__}"
            raise ValueError(msg)
        level = data.get("level")
        level_number(level)
        expires = data.get("expires_at")
        if expires is not None and (isinstance(expires, bool) or not isinstance(expires, (int, float))):
            msg = f"'expires_at' must be wall seconds or null, got {expires!r}"
            raise ValueError(msg)
        return cls(level.upper(), timeout_secs(data.get("timeout_secs")),
                   None if expires is None else float(expires))


def decode(named: Any) -> tuple[dict[str, NamedLevel], dict[str, str]]:
    """The wire form read: (the valid entries, what is wrong with each invalid one)."""
    valid: dict[str, NamedLevel] = {}
    invalid: dict[str, str] = {}
    for name, data in (named.items() if isinstance(named, Mapping) else ()):
        try:
            valid[logger_name(name)] = NamedLevel.from_dict(data)
        except ValueError as e:
            invalid[str(name)[:MAX_NAME_CHARS]] = str(e)
    return valid, invalid


def merge(current: Any, changes: Mapping[str, tuple[str | None, int]], now: float) -> dict[str, Any]:
    """Nimbus's side: the wire form after ``changes`` (name -> (level, timeout secs); a level of
    None resets the name) made at wall time ``now``.  Entries whose time has passed go, as
    every worker has dropped them.  ValueError on a bad change, or past MAX_NAMES."""
    levels, _invalid = decode(current)
    levels = {name: entry for name, entry in levels.items() if not entry.expired(now)}
    for raw_name, (level, timeout) in changes.items():
        name = logger_name(raw_name)
        if level is None:
            levels.pop(name, None)
            continue
        level_number(level)
        secs = timeout_secs(timeout)
        levels[name] = NamedLevel(level.upper(), secs, now + secs if secs else None)
    if len(levels) > MAX_NAMES:
        msg = f"at most {MAX_NAMES} log levels may be set on a topology, this would make {len(levels)}"
        raise ValueError(msg)
    return {name: entry.to_dict() for name, entry in sorted(levels.items())}


@dataclass
class _Table:
    """One set of levels, never changed once made (a change makes a new table), with the
    answers found for it so far: a log call reads one table whatever changes meanwhile."""

    version: int
    levels: dict[str, NamedLevel]
    found: dict[tuple[str | None, str], int | None] = field(default_factory=dict)

    def resolve(self, component: str | None, logger: str) -> int | None:
        levels = self.levels
        if component is not None and component in levels:
            return levels[component].number
        name = logger
        while name:
            if name in levels:
                return levels[name].number
            name = name.rpartition(".")[0]
        root = levels.get(ROOT)
        return None if root is None else root.number


class LogLevels:
    """The levels in force in one worker: replaced by :meth:`apply` (a new assignment),
    dropped by :meth:`expire` once their time has come (by ``wall``, wall seconds), asked
    by :meth:`threshold` on every log line from any thread."""

    def __init__(self, wall: Callable[[], float] = time.time) -> None:
        self.wall = wall
        self._table = _Table(0, {})
        self._lock = threading.Lock()  # writers only: readers take whichever table is current
        self.active = False  # any level set: read on every call below the process's own level

    @property
    def version(self) -> int:
        return self._table.version

    def in_force(self) -> dict[str, NamedLevel]:
        return dict(self._table.levels)

    def apply(self, named: Any) -> dict[str, str]:
        """Make the wire form ``named`` the levels in force (entries already expired left out);
        what was invalid in it, by name (left out too)."""
        levels, invalid = decode(named)
        now = self.wall()
        self._replace({name: entry for name, entry in levels.items() if not entry.expired(now)})
        return invalid

    def expire(self) -> dict[str, NamedLevel]:
        """Drop the entries whose time has come; those dropped."""
        table = self._table
        if not any(entry.expires_at is not None for entry in table.levels.values()):
            return {}
        now = self.wall()
        gone = {name: entry for name, entry in table.levels.items() if entry.expired(now)}
        if gone:
            self._replace({name: entry for name, entry in table.levels.items() if name not in gone})
        return gone

    def _replace(self, levels: dict[str, NamedLevel]) -> None:
        with self._lock:
            if levels != self._table.levels:
                self._table = _Table(self._table.version + 1, levels)
                self.active = bool(levels)

    def threshold(self, component: str | None, logger: str) -> int | None:
        """The level a line must reach: of ``component``'s own logger (None: not a component's
        line) named ``logger``; None when no name set here covers it."""
        table = self._table
        if not table.levels:
            return None
        key = (component, logger)
        try:
            return table.found[key]
        except KeyError:
            found = table.found[key] = table.resolve(component, logger)
            return found
