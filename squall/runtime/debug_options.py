"""Debug sampling switched on a running topology (Storm's ``debug`` action), as a pure core.

Storm's UI has "Debug" and "Stop Debug" for a whole topology and for one component, each
with a sampling percentage: that share of the tuples the component emits is written to
the event log of the worker running it (``events.log`` beside ``worker.log``, see
squall.worker.event_log).  Nimbus keeps what was asked in ZooKeeper, apart from the
topology record (a change must not relaunch a worker, as with the log levels of
squall.runtime.log_levels); supervisors pass it to their workers in assignment.json, and
each worker applies it at once.

On the wire (ZooKeeper, assignment.json), Storm's DebugOptions per key, the topology's
own apart from its components'::

    {"topology": {"enable": true, "samplingpct": 10.0},
     "components": {"split": {"enable": false, "samplingpct": 10.0}}}

Which setting a component follows (:func:`component_pct`), the most specific first, as
Storm's executors do: its own entry (so "Stop Debug" on a component silences it under a
topology-wide "Debug"), then the topology's entry, then ``topology.debug: true`` in its
conf (the component's own or the topology's, set at submit: every tuple, 100 %).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

ACTIONS = ("enable", "disable")
DEFAULT_PCT = 10.0  # what Storm's UI shows (and offers) where debug is off
TOPOLOGY_DEBUG = "topology.debug"


@dataclass(frozen=True)
class Debug:
    """One key's setting: on or off, and the share of tuples sampled when on."""

    enable: bool
    pct: float

    def to_wire(self) -> dict[str, Any]:
        return {"enable": self.enable, "samplingpct": self.pct}

    @property
    def effective_pct(self) -> float:
        return self.pct if self.enable else 0.0


def parse_action(text: Any) -> bool:
    """``enable`` -> True, ``disable`` -> False; ValueError naming the two otherwise."""
    if text not in ACTIONS:
        msg = f"the debug action must be enable or disable, got {str(text)[:100]!r}"
        raise ValueError(msg)
    return text == "enable"


def parse_pct(value: Any) -> float:
    """A sampling percentage from a path segment or a number: 0 to 100, finite; ValueError
    naming what was given otherwise (Storm clamps; Squall says what is wrong instead)."""
    if isinstance(value, bool):
        pct = math.nan
    elif isinstance(value, (int, float)):
        pct = float(value)
    else:
        try:
            pct = float(str(value).strip()) if len(str(value)) <= 32 else math.nan
        except ValueError:
            pct = math.nan
    if not math.isfinite(pct) or not 0.0 <= pct <= 100.0:
        msg = f"the sampling percentage must be a number from 0 to 100, got {str(value)[:100]!r}"
        raise ValueError(msg)
    return pct


def _entry(value: Any) -> Debug | None:
    """A wire entry, or None for one that is not (a hand-written node, an older form)."""
    if not isinstance(value, Mapping) or not isinstance(value.get("enable"), bool):
        return None
    try:
        return Debug(value["enable"], parse_pct(value.get("samplingpct", DEFAULT_PCT)))
    except ValueError:
        return None


@dataclass(frozen=True)
class DebugOptions:
    """A topology's debug settings, as nimbus keeps them."""

    topology: Debug | None = None
    components: Mapping[str, Debug] | None = None

    @classmethod
    def from_wire(cls, data: Any) -> DebugOptions:
        """The wire form -> settings; what is malformed in it is left out, never fatal."""
        if not isinstance(data, Mapping):
            return cls()
        components = data.get("components")
        parsed = {name: e for name, value in (components.items() if isinstance(components, Mapping) else ())
                  if isinstance(name, str) and (e := _entry(value)) is not None}
        return cls(_entry(data.get("topology")), parsed)

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.topology is not None:
            out["topology"] = self.topology.to_wire()
        if self.components:
            out["components"] = {name: d.to_wire() for name, d in sorted(self.components.items())}
        return out

    def with_setting(self, component: str | None, enable: bool, pct: float) -> DebugOptions:
        """The settings after a debug action: of ``component``, or of the topology (None)."""
        entry = Debug(enable, pct if enable else DEFAULT_PCT)
        if component is None:
            return DebugOptions(entry, self.components)
        return DebugOptions(self.topology, {**(self.components or {}), component: entry})

    def component_pct(self, component: str, conf_debug: bool = False) -> float:
        """The share (0-100) of ``component``'s emitted tuples to sample; ``conf_debug``: its
        conf (its own, else the topology's) has ``topology.debug: true``."""
        entry = (self.components or {}).get(component) or self.topology
        if entry is not None:
            return entry.effective_pct
        return 100.0 if conf_debug else 0.0

    def topology_setting(self, conf_debug: bool = False) -> Debug:
        """The topology-wide setting as Storm's topology page shows it (``debug``, ``samplingPct``)."""
        entry = self.topology if self.topology is not None else Debug(True, 100.0) if conf_debug else None
        return entry if entry is not None and entry.enable else Debug(False, DEFAULT_PCT)

    def component_setting(self, component: str, conf_debug: bool = False) -> Debug:
        """What ``component`` follows, as its page shows it."""
        entry = (self.components or {}).get(component) or self.topology
        if entry is None:
            entry = Debug(True, 100.0) if conf_debug else None
        return entry if entry is not None and entry.enable else Debug(False, DEFAULT_PCT)


def conf_debug(conf: Mapping[str, Any]) -> bool:
    """``topology.debug`` as Storm reads it: true only when it is the boolean true."""
    return conf.get(TOPOLOGY_DEBUG) is True
