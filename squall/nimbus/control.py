"""What nimbus changes: a topology's status (activate, deactivate, kill), its
size (rebalance), its workers' log levels (set_log_level) and debug sampling (Storm's
debug action), and the reconciliation
that follows every change and runs each monitor round.

The decisions of a reconciliation are :class:`squall.nimbus.reconcile.Reconciler`'s;
here they are fed what ZooKeeper holds and carried out.

A round is fenced by the leadership term in force when it began (``leadership``
gives it): its assignment writes carry the writer and the term, and are made
only while that term holds, so a nimbus deposed mid-round (partitioned from
ZooKeeper, paused) writes nothing after its successor took over.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Any

import structlog

from squall import config as config_mod
from squall.cluster.election import LeaderFence, NotLeader
from squall.cluster.state import ClusterState
from squall.errors import Conflict, InvalidRequest, NotFound, Unavailable
from squall.nimbus.profiling import WorkerProfiling
from squall.nimbus.reconcile import (
    Action,
    Observed,
    Reconciler,
    RemoveOrphanAssignment,
    RemoveTopology,
    SetSchedulerStatus,
    WriteAssignment,
)
from squall.nimbus.views import record_named, resolve
from squall.runtime.debug_options import DebugOptions, parse_action, parse_pct
from squall.runtime.log_levels import merge
from squall.ui import logconfig, storm_api

log = structlog.get_logger("squall.nimbus.control")


def _setting(conf: dict[str, Any], key: str) -> Any:
    return conf.get(key, config_mod.DEFAULTS[key])


class TopologyControl:
    """Changes to running topologies, and the reconciliation that carries them out."""

    def __init__(self, state: ClusterState, conf: dict[str, Any],
                 now: Callable[[], float] = time.time,
                 leadership: Callable[[], LeaderFence | None] | None = None,
                 local: Callable[[], float] = time.monotonic) -> None:
        self.state = state
        self.conf = conf
        self.now = now
        self.local = local  # what liveness is judged on: this machine's, no other's (reconcile.py)
        # The term held now (None: not leading); without it (a lone nimbus in tests) writes are unfenced.
        self.leadership = leadership
        self.reconciler = Reconciler(_setting(conf, "nimbus.task.timeout.secs"),
                                     _setting(conf, "nimbus.task.launch.secs"))
        # One reconciliation at a time: the monitor thread's pass and an API call's (a kill,
        # a submit) read a topology and write its assignment; interleaved, a pass that read
        # the topology before a kill removed it wrote its assignment back after, and the
        # slots of a topology that no longer exists stayed taken for ever.
        self._reconcile_lock = threading.RLock()
        self._log_levels_lock = threading.Lock()  # two changes at once: neither lost
        self.profiling = WorkerProfiling(state, conf, now)
        self._debug_lock = threading.Lock()  # two debug changes at once: neither lost

    # -- lifecycle -----------------------------------------------------------

    def set_status(self, name: str, status: str) -> dict[str, Any]:
        return self._set_status(record_named(self.state, name), status)

    def _set_status(self, record: dict[str, Any], status: str) -> dict[str, Any]:
        name = record["name"]
        if record["status"] in ("killing", "rebalancing"):
            raise Conflict(f"topology {name!r} is being {_BEING[record['status']]}")
        record["status"] = status
        self.put_topology(record)
        self.reconcile(record["id"])
        return {"name": name, "status": status}

    def kill(self, name: str, wait: Any = None) -> dict[str, Any]:
        return self._kill(record_named(self.state, name), wait)

    def _kill(self, record: dict[str, Any], wait: Any = None) -> dict[str, Any]:
        name = record["name"]
        if wait is None:
            wait = record["conf"].get("topology.message.timeout.secs",
                                      config_mod.DEFAULTS["topology.message.timeout.secs"])
        _check_wait(wait)
        record.pop("rebalance", None)  # a kill overrides a rebalance waiting to happen
        record["status"] = "killing"
        record["kill_at"] = self.now() + wait
        self.put_topology(record)
        log.info("topology killed", topology=name, wait_secs=wait)
        self.reconcile(record["id"])
        return {"name": name, "status": "killing", "wait_secs": wait}

    def rebalance(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._rebalance(record_named(self.state, name), body)

    def _rebalance(self, record: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        """Change the workers or executors; with ``wait_secs`` (Storm's ``-w``) the spouts
        are deactivated first and the move waits that long for the tuples in flight."""
        name = record["name"]
        if record["status"] in ("killing", "rebalancing"):
            raise Conflict(f"topology {name!r} is being {_BEING[record['status']]}")
        wait = body.get("wait_secs") or 0
        _check_wait(wait)
        self._rebalance_changes(record, body)  # refused now, not when the wait is over
        if wait > 0:
            record["rebalance"] = {"at": self.now() + wait, "resume": record["status"],
                                   "workers": body.get("workers"), "executors": body.get("executors") or {}}
            record["status"] = "rebalancing"
            self.put_topology(record)
            log.info("topology rebalancing: spouts deactivated", topology=name, wait_secs=wait)
            self.reconcile(record["id"])
            return {"name": name, "status": "rebalancing", "wait_secs": wait,
                    "workers": body.get("workers") or record["num_workers"],
                    "executors": body.get("executors") or {}}
        return self._apply_rebalance(record, body)

    def _apply_rebalance(self, record: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        self._rebalance_changes(record, body, apply=True)
        self.put_topology(record)
        self.reconcile(record["id"], reschedule=True)
        return {"name": record["name"], "status": record["status"], "workers": record["num_workers"],
                "executors": body.get("executors") or {}}

    def _rebalance_changes(self, record: dict[str, Any], body: dict[str, Any], apply: bool = False) -> None:
        """Check (and with ``apply`` make) a rebalance's changes to the record."""
        name = record["name"]
        workers = body.get("workers")
        executors = body.get("executors") or {}
        if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool) or workers < 1):
            raise InvalidRequest(f"'workers' must be an integer >= 1, got {workers!r}")
        if workers is not None and workers > self.conf["nimbus.slots.perTopology"]:
            raise InvalidRequest(f"{workers} workers is over this cluster's nimbus.slots.perTopology "
                              f"({self.conf['nimbus.slots.perTopology']})")
        if not isinstance(executors, dict):
            raise InvalidRequest("'executors' must map component names to executor counts")
        definition = record["definition"]
        by_name = {c["name"]: c for c in definition["components"]}
        for component, count in executors.items():
            if component not in by_name:
                raise InvalidRequest(f"topology {name!r} has no component {component!r}")
            tasks = by_name[component]["tasks"]
            if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= tasks:
                raise InvalidRequest(f"component {component!r} can run 1..{tasks} executors "
                                  f"(its task count), got {count!r}")
            if apply:
                by_name[component]["par"] = count
        if workers is not None and apply:
            record["conf"]["topology.workers"] = workers
            record["num_workers"] = workers

    def storm_action(self, ident: str, action: str, wait: int = 0, body: Any = None) -> dict[str, Any]:
        """Storm's POST /topology/:id/<action>; Storm's answer."""
        record = resolve(self.state, ident)
        if action in ("activate", "deactivate"):
            self._set_status(record, "active" if action == "activate" else "inactive")
        elif action == "kill":
            self._kill(record, wait)
        elif action == "rebalance":
            try:
                request = storm_api.rebalance_request(body)
            except ValueError as e:
                raise InvalidRequest(str(e)) from e
            self._rebalance(record, {**request, "wait_secs": wait})
        else:
            msg = f"no such action {action!r} (activate, deactivate, rebalance, kill)"
            raise NotFound(msg)
        return storm_api.op_response(record["id"], action)

    # -- log levels ----------------------------------------------------------

    def log_config(self, ident: str) -> dict[str, Any]:
        """Storm's GET /topology/:id/logconfig: the levels set, those whose time has passed left out."""
        record = resolve(self.state, ident)
        return logconfig.logconfig_answer(merge(self.state.log_levels(record["id"]), {}, self.now()))

    def set_log_config(self, ident: str, changes: logconfig.Changes) -> dict[str, Any]:
        """Storm's POST /topology/:id/logconfig: ``changes`` made, each timeout counted from
        now; the supervisors carry them to the topology's running workers."""
        record = resolve(self.state, ident)
        if record["status"] == "killing":  # its levels would outlive it in ZooKeeper
            raise Conflict(f"topology {record['name']!r} is being killed")
        with self._log_levels_lock:
            try:
                levels = merge(self.state.log_levels(record["id"]), changes, self.now())
            except ValueError as e:
                raise InvalidRequest(str(e)) from e
            self.state.put_log_levels(record["id"], levels)
        log.info("log levels set", topology=record["name"],
                 changes={name: level or "reset" for name, (level, _secs) in changes.items()})
        answer = logconfig.logconfig_answer(levels)
        warnings = logconfig.unmatched(changes, record["name"], logconfig.components_of(record))
        return {**answer, "warnings": warnings} if warnings else answer

    # -- worker profiling ----------------------------------------------------

    def profile(self, ident: str, action: str, worker: str, timeout: str | None = None,
                fmt: str | None = None, locals_: bool = False, user: str | None = None) -> dict[str, Any]:
        """Storm's /topology/:id/profiling/<action>/:host-port (squall.nimbus.profiling)."""
        return self.profiling.ask(ident, action, worker, timeout, fmt, locals_, user)

    # -- debug sampling ------------------------------------------------------

    def debug(self, ident: str, component: str | None, action: str, pct: str) -> dict[str, Any]:
        """Storm's POST /topology/:id[/component/:component]/debug/:action/:spct: sample ``pct``
        percent of the tuples the topology's components (or ``component``'s) emit into their
        workers' events.log, or stop; the supervisors carry it to the running workers."""
        try:
            enable, share = parse_action(action), parse_pct(pct)
        except ValueError as e:
            raise InvalidRequest(str(e)) from e
        record = resolve(self.state, ident)
        name = record["name"]
        if component is not None and component not in logconfig.components_of(record):
            raise NotFound(f"topology {name!r} has no component {component!r}")
        if record["status"] == "killing":  # its settings would outlive it in ZooKeeper
            raise Conflict(f"topology {name!r} is being killed")
        if (record.get("conf") or {}).get("topology.eventlogger.executors") == 0:
            raise InvalidRequest(f"topology {name!r} runs no event logger (topology.eventlogger.executors "
                                 f"is 0): resubmit it without that setting to debug it")
        with self._debug_lock:
            options = DebugOptions.from_wire(self.state.debug_options(record["id"]))
            options = options.with_setting(component, enable, share)
            self.state.put_debug_options(record["id"], options.to_wire())
        log.info("debug sampling set", topology=name, component=component, enable=enable, sampling_pct=share)
        return storm_api.op_response(record["id"], f"debug/{action}")

    # -- reconciliation ------------------------------------------------------

    def reconcile_all(self) -> None:
        for topology_id in self.state.topology_ids():
            try:
                self._reconcile(topology_id)
            except NotLeader as e:  # deposed: the other topologies are the new leader's
                log.warning("reconciliation stopped: no longer the leader", reason=str(e))
                return
            except Exception:  # noqa: BLE001 - one bad topology must not stop the others
                log.exception("reconciling a topology failed", id=topology_id)
        try:
            self.remove_orphan_assignments()
        except NotLeader as e:
            log.warning("reconciliation stopped: no longer the leader", reason=str(e))

    def remove_orphan_assignments(self) -> None:
        """Drop the assignments of topologies that no longer exist, freeing their slots."""
        with self._reconcile_lock:
            fence = self.fence()
            self._execute(Reconciler.orphans(self.state.topology_ids(), self.state.assignment_ids()), fence)

    def reconcile(self, topology_id: str, reschedule: bool = False) -> None:
        """One topology's round, for a change asked over the API: a 503 if this nimbus
        is deposed before it writes (the change asked for is recorded; the leader carries it out)."""
        try:
            self._reconcile(topology_id, reschedule)
        except NotLeader as e:
            raise Unavailable(f"this nimbus is no longer the leader: {e}") from e

    def put_topology(self, record: dict[str, Any]) -> None:
        """A topology's record (a submit, or a change asked over the API), written only while
        this nimbus's term holds: a 503 for a nimbus deposed since (the leader's API takes the
        change instead)."""
        try:
            self.state.put_topology(record, self.fence())
        except NotLeader as e:
            raise Unavailable(f"this nimbus is no longer the leader: {e}") from e

    def fence(self) -> LeaderFence | None:
        """The term writes are fenced by (None: no election, a lone nimbus in tests)."""
        if self.leadership is None:
            return None
        fence = self.leadership()
        if fence is None:
            raise NotLeader(None)
        return fence

    def _reconcile(self, topology_id: str, reschedule: bool = False) -> None:
        with self._reconcile_lock:
            fence = self.fence()  # the term the round's decisions are made in
            record = self.state.topology(topology_id)
            if record is None:
                return
            now = self.now()
            waiting = record.get("rebalance")
            if record["status"] == "rebalancing" and waiting and now >= waiting["at"]:
                # The drain is over: move, then let the spouts go again.
                record["status"] = waiting["resume"]
                del record["rebalance"]
                self._rebalance_changes(record, waiting, apply=True)
                self.state.put_topology(record, fence)
                log.info("topology rebalanced after its wait", topology=record["name"])
                reschedule = True
            supervisors, beats = self.state.supervisors(), self.state.worker_beats()
            current = self.state.assignment(topology_id)
            observed = Observed(supervisors, beats, self.state.assignments())
            self._execute(self.reconciler.topology(record, current, observed, now, reschedule,
                                                   local=self.local()), fence)

    def _execute(self, actions: list[Action], fence: LeaderFence | None = None) -> None:
        for action in actions:
            if isinstance(action, RemoveTopology):
                self.state.remove_topology(action.topology_id, fence)
                log.info("topology removed", topology=action.name, id=action.topology_id)
            elif isinstance(action, WriteAssignment):
                a = action.assignment
                if fence is not None:  # who wrote it, in which term: what a leader audit reads
                    a = {**a, "writer": fence.leader, "term": fence.term}
                try:
                    zxid = self.state.put_assignment(action.topology_id, a, fence)
                except NotLeader as e:
                    log.warning("assignment write refused: the term has ended", topology=action.name,
                                version=a["version"], reason=str(e))
                    raise
                log.info("assignment written", topology=action.name, version=a["version"],
                         slots=[f"{w['node']}:{w['port']}" for w in a["workers"]], active=a["active"],
                         writer=a.get("writer"), term=a.get("term"), zxid=zxid)
            elif isinstance(action, SetSchedulerStatus):
                self._set_scheduler_status(action, fence)
            elif isinstance(action, RemoveOrphanAssignment) and self._orphaned(action.topology_id):
                self.state.remove_assignment(action.topology_id, fence)
                log.warning("orphan assignment removed", id=action.topology_id)

    def _set_scheduler_status(self, action: SetSchedulerStatus, fence: LeaderFence | None) -> None:
        """Keep what the scheduler says on the record (the topology's REST answer shows it),
        and say it in the log once, when it changes."""
        record = self.state.topology(action.topology_id)
        if record is None:
            return
        record["scheduler"] = action.message
        self.state.put_topology(record, fence)
        if action.message is None:
            log.info("topology scheduled by resources", topology=action.name)
        else:
            log.warning("topology not scheduled: resources short", topology=action.name,
                        reason=action.message)

    def _orphaned(self, topology_id: str) -> bool:
        # Under the lock, an assignment is only ever written after its topology,
        # so one whose topology is missing now is an orphan, not a submit under way.
        return self.state.topology(topology_id) is None


_BEING = {"killing": "killed", "rebalancing": "rebalanced"}


def _check_wait(wait: Any) -> None:
    # NaN passes "< 0" and would leave the topology waiting for ever.
    if (not isinstance(wait, (int, float)) or isinstance(wait, bool) or not math.isfinite(wait)
            or wait < 0):
        raise InvalidRequest(f"'wait_secs' must be a number >= 0, got {wait!r}")
