"""Reading assignments: what this node should run, from the cluster state (Storm's
ReadClusterState).

Every ``supervisor.assignments.sync.secs``, and at once when the set of topologies,
a topology's log levels or the ZooKeeper session changes, when an environment's build
ends and when a slot turns out reassigned just before a launch, the supervisor reads the
assignments nimbus wrote and, for each topology that puts a worker on this node,
its record; has the localizer (squall.supervisor.localizer) make its code,
environment and secrets ready; and keeps, port by port, what each slot's worker
should run.  The process sync (squall.supervisor.sync) then launches, kills or
keeps the workers to match.

What follows from the assignments is decided by pure functions, tested with plain
data (tests/supervisor/test_assignments.py): which topologies run here
(:func:`assigned_here`), the conf their workers get (:func:`worker_conf`), what each
slot runs (:func:`workers_of_node`), and whether a slot is still assigned so just
before its worker launches (:func:`still_assigned`).  :class:`Assignments` is the
shell that reads ZooKeeper and carries them out.

A topology whose workers may not run here (an id or name that is not one, no CURVE
keypair in a secure cluster, code that does not unpack, no uid left, an environment
that does not build) is refused: said once per reason, in the log and as the
topology's error.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from squall.cluster.state import ClusterState
from squall.cluster.watches import DataWatch
from squall.config import DEFAULTS
from squall.errors import SquallError
from squall.runtime.envs import Requirements, from_record
from squall.security.admission import check_id, cluster_only_removed
from squall.supervisor import logfiles
from squall.supervisor.launcher import Launcher
from squall.supervisor.localizer import Localizer
from squall.supervisor.run_as import RunAs

log = structlog.get_logger("squall.supervisor.assignments")

# The keys of squall.yaml that reach the workers (when set to other than their defaults).
WORKER_KEY_PREFIXES = ("topology.", "worker.", "zmq.", "spark.", "drpc.",
                       # transactional state lives in the cluster's ZooKeeper
                       "storm.zookeeper.", "transactional.")


def worker_defaults(conf: Mapping[str, Any]) -> dict[str, Any]:
    """What the node's conf says about workers and topologies: what reaches its workers."""
    return {k: v for k, v in conf.items() if k.startswith(WORKER_KEY_PREFIXES) and v != DEFAULTS.get(k)}


def assigned_here(node: str, assignments: Mapping[str, Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """The assignments (topology id -> assignment) that put a worker on ``node``."""
    return {topology_id: assignment for topology_id, assignment in assignments.items()
            if any(w["node"] == node for w in assignment["workers"])}


def worker_conf(defaults: Mapping[str, Any], topology_conf: Mapping[str, Any], extras: Mapping[str, Any],
                secure: bool, run_as: RunAs | None) -> dict[str, Any]:
    """Storm's worker conf: the cluster's settings (``defaults``), then the topology's own
    -- less any key only the cluster may set (admission refused them at submit; an older
    record may hold one) --, then what the node adds (``extras``: its Spark server's); the
    cluster's ``squall.secure``, never a topology's; and a sandboxed worker's state
    directory, the one its sandbox may write, unless the conf names one."""
    conf = {**defaults, **cluster_only_removed(topology_conf), **extras}
    conf["squall.secure"] = secure
    if run_as is not None and not conf.get("squall.state.dir"):
        conf["squall.state.dir"] = str(run_as.state_dir)
    return conf


def workers_of_node(node: str, host: str, topology_id: str, assignment: Mapping[str, Any],
                    record: Mapping[str, Any], worker_conf: dict[str, Any],
                    code_dir: str, log_levels: Mapping[str, Any] | None = None,
                    python: str | None = None,
                    debug: Mapping[str, Any] | None = None) -> dict[int, dict[str, Any]]:
    """Port -> what its worker runs, for the workers of one topology's assignment that
    ``node`` (reached at ``host``) runs: the worker's own address, its executors, and
    where every task of the topology listens (Storm's worker reads the same from its
    assignment), and the log levels and debug sampling set on the topology; ``python``: the topology
    environment's, which the launcher runs it with (None: the supervisor's own).  Empty
    when the assignment puts nothing on ``node``."""
    mine = [w for w in assignment["workers"] if w["node"] == node]
    if not mine:
        return {}
    task_address = {}
    for w in assignment["workers"]:
        address = f"zmq+tcp://{assignment['hosts'][w['node']]}:{w['port']}"
        for first, last in w["executors"]:
            for task in range(first, last + 1):
                task_address[str(task)] = address
    workers = {w["port"]: {
        "topology_id": topology_id, "topology": record["definition"], "conf": worker_conf,
        "owner": record.get("owner"), "code_dir": code_dir, "address": f"zmq+tcp://{host}:{w['port']}",
        "executors": w["executors"], "task_address": task_address,
        "active": assignment["active"], "version": assignment["version"],
        "log_levels": dict(log_levels or {}), "tuning": dict(assignment.get("tuning") or {}),
        "debug": dict(debug or {}),
        # The resource-aware scheduler's limit (squall.supervisor.memory holds the worker to it).
        **({"memory_limit_mb": w["memory_mb"]} if "memory_mb" in w else {}),
    } for w in mine}
    if python is not None:
        for want in workers.values():
            want["python"] = python
    return workers


def still_assigned(assignment: Mapping[str, Any] | None, node: str, port: int,
                   executors: list[list[int]]) -> bool:
    """Does ``assignment`` (the topology's as ZooKeeper holds it now; None: gone) still give
    ``node``'s ``port`` these ``executors``?"""
    mine = [w for w in (assignment or {}).get("workers", []) if w["node"] == node and w["port"] == port]
    return bool(mine) and mine[0]["executors"] == executors


@dataclass
class _Round:
    """What one assignment sync gathers."""

    desired: dict[int, dict[str, Any]] = field(default_factory=dict)  # port -> what its worker runs
    records: dict[str, dict[str, Any]] = field(default_factory=dict)  # topology id -> its record
    env_users: dict[str, set[str]] = field(default_factory=dict)  # environment key -> topologies in it
    pending: set[str] = field(default_factory=set)  # topologies whose environment is being built


class Assignments:
    """What this node should run (:attr:`desired`, port -> the worker's assignment), read
    from the cluster state; the localizer makes each topology ready, the launcher's
    run-as users give it a uid.  ``wake`` is set to sync again at once."""

    def __init__(self, conf: Mapping[str, Any], node: str, host: str, state: ClusterState, *,
                 localizer: Localizer, launcher: Launcher, wake: threading.Event, now: Callable[[], float],
                 secure: bool, credentials: list[tuple[str, str]],
                 worker_extras: Callable[[], Mapping[str, Any]] = dict) -> None:
        self.node, self.host, self.state = node, host, state
        self.localizer, self.launcher = localizer, launcher
        self.wake, self.now = wake, now
        self.secure, self.credentials = secure, credentials
        self.worker_defaults = worker_defaults(conf)
        self.worker_extras = worker_extras  # the node's Spark server's settings, when it runs one
        self.desired: dict[int, dict[str, Any]] = {}
        self._lock = threading.Lock()
        # Until the first sync, we do not know what should run: a freshly restarted
        # supervisor must not take its workers for strays.
        self.synced = threading.Event()
        self.refused: dict[str, str] = {}  # topology id -> why its workers are not launched
        # topology id -> who may read its workers' logs (squall.supervisor.logfiles.readers_record)
        self.log_readers: dict[str, dict[str, Any]] = {}
        # Per topology run here: a change of its log levels or debug sampling syncs at once,
        # not a round later.
        self._log_level_watches: dict[str, list[DataWatch]] = {}

    def current(self) -> dict[int, dict[str, Any]]:
        """What each slot should run, as the latest sync left it."""
        with self._lock:
            return dict(self.desired)

    def sync(self) -> None:
        round_ = _Round()
        for topology_id, assignment in assigned_here(self.node, self.state.assignments()).items():
            # (before any I/O: most topologies run nothing here)
            record = self.state.topology(topology_id)
            if record is None:
                continue
            round_.records[topology_id] = record
            round_.desired.update(self._workers_of(topology_id, assignment, record, round_))
        with self._lock:
            self.desired = round_.desired
        self.synced.set()
        self._forget(round_)

    def _workers_of(self, topology_id: str, assignment: Mapping[str, Any], record: dict[str, Any],
                    round_: _Round) -> dict[int, dict[str, Any]]:
        """The workers of one topology that run here, once the localizer made it ready;
        none while its environment builds or if it is refused."""
        try:
            code_dir, run_as, requirements = self._localize(topology_id, record)
        except SquallError as e:
            self.refuse(topology_id, record, str(e))
            return {}
        python = None
        if requirements is not None:
            key, python = self.localizer.environment(
                requirements, topology_id, lambda reason: self.refuse(topology_id, record, reason))
            round_.env_users.setdefault(key, set()).add(topology_id)
            if python is None:
                round_.pending.add(topology_id)  # launched once its environment is built
                return {}
        self.refused.pop(topology_id, None)
        self.log_readers[topology_id] = logfiles.readers_record(
            topology_id, record.get("name", topology_id), record.get("owner"), record["conf"])
        conf = worker_conf(self.worker_defaults, record["conf"], self.worker_extras(), self.secure, run_as)
        return workers_of_node(self.node, self.host, topology_id, assignment, record, conf, str(code_dir),
                               self.state.log_levels(topology_id), python,
                               self.state.debug_options(topology_id))

    def _localize(self, topology_id: str, record: dict[str, Any]) -> tuple[Path, RunAs | None,
                                                                           Requirements | None]:
        """The topology's code directory, the user its workers run as and its requirements;
        a SquallError if its workers may not run here."""
        # Again: they name directories here (a record nimbus wrote long ago, or by hand).
        check_id("topology id", topology_id)
        check_id("topology name", record.get("name"))
        if self.secure:
            self.localizer.ensure_secrets(topology_id, lambda: self.state.topology_secrets(topology_id),
                                          self.credentials)
        code_dir = self.localizer.ensure_code(topology_id, lambda: self.state.code(topology_id))
        run_as = self.launcher.run_as.for_topology(topology_id, record["definition"], record.get("owner"))
        if run_as is not None:
            self.localizer.share_code(code_dir, run_as.identity.gid)
        return code_dir, run_as, from_record(record.get("requirements"))

    def _forget(self, round_: _Round) -> None:
        """Let go of what topologies no longer run here had: secrets, uids, refusals, log
        readers, code, log-level watches, environments."""
        wanted = {d["topology_id"] for d in round_.desired.values()}
        self.localizer.forget_secrets(wanted)
        self.launcher.run_as.release(wanted | set(round_.records), self.launcher.running_uids)
        for gone in set(self.refused) - set(round_.records):
            del self.refused[gone]
        for gone in set(self.log_readers) - wanted:
            del self.log_readers[gone]
        self.localizer.remove_stale_code(wanted | round_.pending, self.launcher.running_topologies)
        self._watch_log_levels(wanted)
        self.localizer.sweep_envs(round_.env_users)

    def _watch_log_levels(self, topology_ids: set[str]) -> None:
        for gone in set(self._log_level_watches) - topology_ids:
            for watch in self._log_level_watches.pop(gone):
                watch.stop()
        for topology_id in topology_ids - set(self._log_level_watches):
            self._log_level_watches[topology_id] = [
                self.state.watch_log_levels(topology_id, self.wake.set),
                self.state.watch_debug_options(topology_id, self.wake.set)]

    def stop(self) -> None:
        for watches in self._log_level_watches.values():
            for watch in watches:
                watch.stop()

    def refuse(self, topology_id: str, record: dict[str, Any], reason: str) -> None:
        """Not launching this topology's workers: said once (log and topology errors) per reason."""
        if self.refused.get(topology_id) == reason:
            return
        self.refused[topology_id] = reason
        log.error("topology refused: its workers are not launched", topology=topology_id, reason=reason)
        self.state.add_error(topology_id, {
            "topology": record.get("name", topology_id), "topology_id": topology_id,
            "component": "__supervisor", "task": None, "error": f"SquallError: {reason}", "trace": "",
            "fatal": True, "worker": self.host, "time": self.now(), "node": self.node})

    def still_assigned(self, port: int, want: dict[str, Any]) -> bool:
        """Is ``want`` still this slot's assignment in ZooKeeper?  What this
        supervisor synced may be seconds old: nimbus may have moved the slot's
        executors elsewhere meanwhile, and a worker launched from the old
        assignment would run beside its replacement (a second coordinator of a
        transactional topology, for one).  One read before each launch."""
        try:
            current = self.state.assignment(want["topology_id"])
        except Exception as e:  # noqa: BLE001 - ZooKeeper unreachable: what was synced stands
            log.warning("cannot confirm the assignment before a launch", port=port, error=str(e))
            return True
        if still_assigned(current, self.node, port, want["executors"]):
            return True
        log.info("slot reassigned since the last sync: worker not launched", port=port,
                 topology=want["topology_id"])
        self.wake.set()
        return False
