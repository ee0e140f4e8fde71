"""Self-regulation's shell on the leading nimbus: each round it reads the heartbeats of
every topology that sizes itself, hands the round to its :class:`Regulator` (the pure
core, squall.tuning.regulator) and carries out the answer through the rebalance an
operator uses (executors, workers) or the assignment's live ``tuning`` (max spout
pending, applied by the workers without a relaunch).  The regulator's state, with the
switch, lives in ZooKeeper (``autoscale/<id>``), written only while this nimbus's term
holds: a nimbus that takes over reads it and carries on; a deposed one writes nothing.

Safe under faults by refusing to judge what it cannot see whole: a round with an
executor that did not beat twice (a dead or restarting worker, a rebalance moving
executors) is skipped, and nothing changes while the topology is not active (a
rebalance waiting, deactivated, being killed).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import structlog

from squall import config as config_mod
from squall.cluster.election import NotLeader
from squall.cluster.state import ClusterState
from squall.errors import Conflict, InvalidRequest, SquallError, Unavailable
from squall.nimbus.control import TopologyControl
from squall.nimbus.views import resolve
from squall.topology.topology import definition_from_dict
from squall.tuning.policies import Settings, Shape
from squall.tuning.regulator import Regulator
from squall.tuning.signals import Reading, reading_from_beats, signals
from squall.worker.plan import plan_topology

log = structlog.get_logger("squall.nimbus.autoscale")


def settings_of(conf: dict[str, Any], cluster: dict[str, Any]) -> Settings:
    def key(name: str) -> Any:
        return conf.get(name, config_mod.DEFAULTS[name])

    ceiling = key("topology.autoscale.max.workers") or cluster.get(
        "nimbus.slots.perTopology", config_mod.DEFAULTS["nimbus.slots.perTopology"])
    return Settings(period_secs=float(key("topology.autoscale.period.secs")),
                    capacity_high=float(key("topology.autoscale.capacity.high")),
                    capacity_low=float(key("topology.autoscale.capacity.low")),
                    capacity_target=float(key("topology.autoscale.capacity.target")),
                    rounds=int(key("topology.autoscale.rounds")),
                    quiet_rounds=int(key("topology.autoscale.quiet.rounds")),
                    settle_rounds=int(key("topology.autoscale.settle.rounds")),
                    cooldown_secs=float(key("topology.autoscale.cooldown.secs")),
                    max_workers=int(min(ceiling, cluster.get("nimbus.slots.perTopology", ceiling))),
                    latency_p99_ms=key("topology.autoscale.latency.p99.ms"))


def enabled(record: dict[str, Any], saved: dict[str, Any]) -> bool:
    """The switch set at run time, else the topology's conf."""
    if isinstance(saved.get("enabled"), bool):
        return bool(saved["enabled"])
    return bool(record["conf"].get("topology.autoscale", False))


class Autoscaler:
    def __init__(self, state: ClusterState, control: TopologyControl, conf: dict[str, Any],
                 now: Callable[[], float] = time.time, local: Callable[[], float] = time.monotonic) -> None:
        self.state = state
        self.control = control
        self.conf = conf
        self.now = now
        self.local = local  # when a round is due: this machine's clock
        self.regulators: dict[str, Regulator] = {}
        self.readings: dict[str, Reading] = {}
        self.due: dict[str, float] = {}

    def forget(self) -> None:
        """Leadership lost: what is in memory may be stale once a round runs elsewhere."""
        self.regulators.clear()
        self.readings.clear()
        self.due.clear()

    # -- the rounds --------------------------------------------------------------

    def tick(self) -> None:
        """Every topology whose round is due (on the leader only)."""
        records = {r["id"]: r for r in self.state.topologies()}
        for gone in set(self.regulators) - set(records):
            self._drop(gone)
        beats: dict[str, Any] | None = None
        for tid, record in records.items():
            if self.local() < self.due.get(tid, 0.0):  # not due: its record is not read either
                continue
            saved = self.state.autoscale(tid)
            if not enabled(record, saved):
                self._drop(tid)
                continue
            settings = settings_of(record["conf"], self.conf)
            self.due[tid] = self.local() + settings.period_secs
            if beats is None:
                beats = self.state.worker_beats()
            try:
                self._round(record, saved, settings, beats)
            except NotLeader:
                raise
            except Exception:  # noqa: BLE001 - one topology's trouble never stops the others
                log.exception("self-regulation round failed", topology=record["name"])

    def _drop(self, tid: str) -> None:
        self.regulators.pop(tid, None)
        self.readings.pop(tid, None)
        self.due.pop(tid, None)

    def _round(self, record: dict[str, Any], saved: dict[str, Any], settings: Settings,
               beats: dict[str, Any]) -> None:
        tid = record["id"]
        regulator = self.regulators.get(tid)
        if regulator is None or regulator.settings != settings:
            regulator = self.regulators[tid] = Regulator(settings, saved.get("state"))
        plan = plan_topology(definition_from_dict(record["definition"]), overrides=record["conf"])
        component_of = {e.id: e.component for e in plan.executors}
        running = {(first, last): component_of[(first, last)]
                   for w in (self.state.assignment(tid) or {}).get("workers", [])
                   for first, last in w["executors"] if (first, last) in component_of}
        reading = reading_from_beats(beats, tid, self.now())
        before = self.readings.get(tid)
        self.readings[tid] = reading
        round_signals = signals(before, reading, running) if before is not None else None
        shape = self._shape(record, plan)
        blocked = None if record["status"] == "active" else f"the topology is {record['status']}"
        step = regulator.round(self.now(), shape, round_signals, blocked)
        if step.kind in ("act", "undo") and step.entry is not None:
            log.info("self-regulation " + ("acts" if step.kind == "act" else "undoes an action"),
                     topology=record["name"], policy=step.entry["policy"], component=step.entry["component"],
                     symptom=step.entry["symptom"], diagnosis=step.entry["diagnosis"],
                     resolution=step.resolution, outcome=step.entry.get("outcome"))
            try:
                self._apply(record, step.resolution)
            except (Conflict, InvalidRequest, Unavailable, SquallError) as e:
                regulator.failed(step.entry["id"], f"not carried out: {e}")
                log.warning("self-regulation could not act", topology=record["name"], reason=str(e))
        state = regulator.to_dict()
        if state != saved.get("state"):
            self.state.put_autoscale(tid, {**saved, "state": state}, self.control.fence())

    def _shape(self, record: dict[str, Any], plan: Any) -> Shape:
        components = record["definition"]["components"]
        executors = {c["name"]: sum(1 for e in plan.executors if e.component == c["name"])
                     for c in components}
        tasks = {c["name"]: len(plan.component_tasks.get(c["name"], [])) for c in components}
        spouts = frozenset(c["name"] for c in components if c.get("kind") == "spout")
        used = {(w["node"], w["port"]) for a in self.state.assignments().values() for w in a["workers"]}
        free = sum(1 for node, info in self.state.supervisors().items() if info.get("healthy", True)
                   for port in info["ports"] if (node, port) not in used)
        overrides = (record.get("tuning") or {}).get("max_spout_pending") or {}
        default = record["conf"].get("topology.max.spout.pending")
        return Shape(executors=executors, tasks=tasks, spouts=spouts, workers=int(record["num_workers"]),
                     free_slots=free, baseline_workers=int(record["num_workers"]),
                     max_pending={s: overrides.get(s, default) for s in spouts})

    def _apply(self, record: dict[str, Any], resolution: dict[str, Any]) -> None:
        body = {k: resolution[k] for k in ("executors", "workers") if k in resolution}
        if body:
            self.control.rebalance(record["name"], body)
        if "max_pending" in resolution:
            fresh = resolve(self.state, record["id"])
            tuning = dict(fresh.get("tuning") or {})
            values = dict(tuning.get("max_spout_pending") or {})
            for spout, value in resolution["max_pending"].items():
                if value is None:
                    values.pop(spout, None)
                else:
                    values[spout] = int(value)
            tuning["max_spout_pending"] = values
            fresh["tuning"] = tuning if values else {}
            self.control.put_topology(fresh)
            self.control.reconcile(fresh["id"])

    # -- what the API shows and switches ------------------------------------------

    def describe(self, ident: str) -> dict[str, Any]:
        """The switch, the settings and the action log (newest first)."""
        record = resolve(self.state, ident)
        saved = self.state.autoscale(record["id"])
        state = saved.get("state") or {}
        settings = settings_of(record["conf"], self.conf)
        return {"topology": record["name"], "id": record["id"], "enabled": enabled(record, saved),
                "settings": dict(settings.__dict__),
                "maxSpoutPending": (record.get("tuning") or {}).get("max_spout_pending") or {},
                "judging": (state.get("evaluating") or {}).get("id"),
                "coolDowns": state.get("cooldowns") or {},
                "actions": list(reversed(state.get("actions") or []))}

    def switch(self, ident: str, on: bool) -> dict[str, Any]:
        record = resolve(self.state, ident)
        if record["status"] == "killing":
            raise Conflict(f"topology {record['name']!r} is being killed")
        saved = self.state.autoscale(record["id"])
        try:
            self.state.put_autoscale(record["id"], {**saved, "enabled": on}, self.control.fence())
        except NotLeader as e:
            raise Unavailable(f"this nimbus is no longer the leader: {e}") from e
        self._drop(record["id"])  # a fresh window: rounds from before the switch say nothing now
        log.info("self-regulation " + ("enabled" if on else "disabled"), topology=record["name"])
        return {"topology": record["name"], "enabled": on}
