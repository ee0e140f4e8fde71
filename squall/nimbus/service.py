"""What nimbus does, apart from HTTP and threads: submit, kill, activate,
deactivate, rebalance, and the reconciliation the monitor runs."""

from __future__ import annotations

import base64
import binascii
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import structlog

from squall import config as config_mod
from squall import plugins
from squall.cluster.state import ClusterState
from squall.errors import ApiError, ConfigError, TopologyValidationError
from squall.metrics.book import StatsBook
from squall.metrics.windows import ALL_TIME, WINDOW_IDS
from squall.nimbus.scheduler import Slot, schedule
from squall.runtime.package import extract
from squall.security.curve import new_keypair
from squall.topology.topology import definition_from_dict
from squall.ui import storm_api
from squall.ui.storm_api import TopologyView
from squall.worker.plan import plan_topology

log = structlog.get_logger("squall.nimbus.service")

NAME = re.compile(r"^[A-Za-z0-9_\-]{1,100}$")
VERIFY_TIMEOUT_SECS = 60
VERIFIED = "verified"
VERIFY_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV")


def verify_env() -> dict[str, str]:
    """User code imported on nimbus sees none of nimbus's environment but the basics."""
    return {k: v for k, v in os.environ.items() if k in VERIFY_ENV}


def bad_request(message: str) -> ApiError:
    return ApiError(400, message)


def worker_sample(beat: dict[str, Any]) -> dict[str, Any]:
    """What nimbus keeps of a worker's heartbeat for the worker view (storm_api.worker_system)."""
    depths = [e.get("queue_depth") for e in beat.get("executor_stats") or [] if isinstance(e, dict)]
    numbers = [d for d in depths if isinstance(d, (int, float)) and not isinstance(d, bool)]
    return {"time": beat["time"], "pid": beat.get("pid"), "topology_id": beat.get("topology_id"),
            "system": dict(beat.get("system") or {}), "transfer": dict(beat.get("transfer") or {}),
            "queue_depth": sum(numbers) if numbers else None}


class NimbusService:
    def __init__(self, state: ClusterState, conf: dict[str, Any],
                 now: Callable[[], float] = time.time, stats: StatsBook | None = None) -> None:
        self.state = state
        self.conf = conf
        self.now = now
        # Windows of the workers' statistics (every nimbus keeps them: see ingest_stats).
        self.stats = stats if stats is not None else StatsBook()
        self._stats_lock = threading.Lock()
        # (node, port) -> its worker's last two system samples [previous or None, latest] (see
        # worker_sample), read with the statistics: CPU and GC % are rates between the two.
        self.worker_samples: dict[tuple[str, int], list[dict[str, Any] | None]] = {}
        # node -> when this nimbus last saw its supervisor registered (or first missed it).
        self._node_seen: dict[str, float] = {}
        # One reconciliation at a time: the monitor thread's pass and an API call's (a kill,
        # a submit) read a topology and write its assignment; interleaved, a pass that read
        # the topology before a kill removed it wrote its assignment back after, and the
        # slots of a topology that no longer exists stayed taken for ever.
        self._reconcile_lock = threading.RLock()

    # -- lookups -------------------------------------------------------------

    def record(self, name: str) -> dict[str, Any]:
        for record in self.state.topologies():
            if record["name"] == name:
                return record
        raise ApiError(404, f"no topology named {name!r} is running")

    def list(self) -> list[dict[str, Any]]:
        out = []
        for record in self.state.topologies():
            assignment = self.state.assignment(record["id"]) or {}
            workers = assignment.get("workers", [])
            out.append({
                "name": record["name"], "id": record["id"], "status": record["status"],
                "workers": len(workers), "executors": sum(len(w["executors"]) for w in workers),
                "uptime_secs": round(self.now() - record["submitted"], 1),
            })
        return out

    def info(self, name: str) -> dict[str, Any]:
        record = self.record(name)
        assignment = self.state.assignment(record["id"]) or {}
        beats = self.state.worker_beats()
        stats: dict[str, dict[str, Any]] = {}
        metrics: dict[str, dict[str, Any]] = {}  # component -> task -> the task's own metrics
        workers = []
        for w in assignment.get("workers", []):
            beat = beats.get(w["node"], {}).get(str(w["port"]))
            alive = bool(beat and beat.get("topology_id") == record["id"])
            workers.append({**w, "alive": alive, "beat_age_secs":
                            round(self.now() - beat["time"], 1) if alive else None})
            if alive:
                for component, tasks in (beat.get("metrics") or {}).items():
                    metrics.setdefault(component, {}).update(tasks)
                for component, s in (beat.get("stats") or {}).items():
                    total = stats.setdefault(component, {})
                    for key, value in s.items():
                        if isinstance(value, (int, float)):
                            total[key] = total.get(key, 0) + value
        return {"name": record["name"], "id": record["id"], "status": record["status"],
                "conf": record["conf"], "definition": record["definition"], "workers": workers,
                "stats": stats, "metrics": metrics, "errors": self.state.errors(record["id"]),
                # Storm's numbers over the last 10 minutes (the windows nimbus keeps).
                "components": self.component_stats(name, "600")}

    # -- statistics ----------------------------------------------------------

    def ingest_stats(self) -> None:
        """Read every worker's cumulative statistics from ZooKeeper into the windows.
        A worker's incarnation is (node, port, pid): a restarted one counts from zero."""
        live = {r["id"] for r in self.state.topologies()}
        now = self.now()
        samples: dict[tuple[str, int], list[dict[str, Any] | None]] = {}
        with self._stats_lock:
            for node, ports in self.state.worker_beats().items():
                for port, beat in ports.items():
                    tid = beat.get("topology_id")
                    if tid in live and beat.get("executor_stats"):
                        self.stats.ingest(tid, (node, port, beat.get("pid")), beat["executor_stats"], now)
                    if tid in live and isinstance(beat.get("time"), (int, float)):
                        self._keep_sample((node, int(port)), worker_sample(beat), samples)
            self.worker_samples = samples
            for tid in set(self.stats.first_seen) - live:
                self.stats.forget(tid)

    def _keep_sample(self, slot: tuple[str, int], sample: dict[str, Any],
                     into: dict[tuple[str, int], list[dict[str, Any] | None]]) -> None:
        """The slot's latest sample, after the one before when it is the same worker (same
        topology and pid) and a newer beat; the same beat read again changes nothing."""
        previous, latest = self.worker_samples.get(slot, [None, None])
        if latest is not None and latest["time"] == sample["time"]:
            into[slot] = [previous, latest]
        elif latest is not None and (latest["topology_id"], latest["pid"]) == (sample["topology_id"],
                                                                             sample["pid"]):
            into[slot] = [latest, sample]
        else:
            into[slot] = [None, sample]

    def samples(self, topology_id: str) -> dict[tuple[str, int], list[dict[str, Any] | None]]:
        """(node, port) -> the last two samples of the topology's workers."""
        with self._stats_lock:
            return {slot: list(pair) for slot, pair in self.worker_samples.items()
                    if pair[1] is not None and pair[1]["topology_id"] == topology_id}

    def component_stats(self, name: str, window: str) -> dict[str, dict[str, Any]]:
        """component -> Storm's statistics over ``window`` ("600", "10800", "86400", ":all-time")."""
        record = self.record(name)
        with self._stats_lock:
            return self.stats.components(record["id"], window, self.now())

    # -- Storm's UI API: topologies by id or name (storm_api shapes the answers) ---

    def resolve(self, ident: str) -> dict[str, Any]:
        """A topology by Storm's ``:id`` (Squall's topology id) or by its name."""
        records = self.state.topologies()
        for record in records:
            if record["id"] == ident:
                return record
        named = [r for r in records if r["name"] == ident]
        if not named:
            msg = f"no topology with id or name {ident!r} is running"
            raise ApiError(404, msg)
        # A name killed and submitted again while the old one waits out its kill: the new one.
        return min(named, key=lambda r: r["status"] == "killing")

    def view(self, record: dict[str, Any], details: bool = False) -> TopologyView:
        """What nimbus knows of a topology; with ``details`` its errors and every window."""
        plan = plan_topology(definition_from_dict(record["definition"]), overrides=record["conf"])
        assignment = self.state.assignment(record["id"]) or {}
        hosts = assignment.get("hosts") or {}
        components = {name: {"kind": c.kind, "tasks": plan.component_tasks.get(name, []),
                             "executors": [e.id for e in plan.executors if e.component == name],
                             "inputs": [(i.component, i.stream) for i in c.inputs],
                             "streams": list(c.streams)}
                      for name, c in plan.components.items()}
        view = TopologyView(
            id=record["id"], name=record["name"], status=record["status"], submitted=record["submitted"],
            conf=plan.conf, components=components,
            workers=[{**w, "host": hosts.get(w["node"], w["node"])} for w in assignment.get("workers", [])],
            # The code lives in ZooKeeper: every nimbus has it.
            replication=max(len(self.state.nimbuses()), 1), samples=self.samples(record["id"]))
        if details:
            view.errors = self.state.errors(record["id"])
            now = self.now()
            with self._stats_lock:
                for window in WINDOW_IDS:
                    view.stats[window] = self.stats.components(record["id"], window, now)
                    view.executor_stats[window] = self.stats.executors(record["id"], window, now)
        return view

    def visualization(self, ident: str, window: str, sys: bool = False) -> dict[str, Any]:
        """The topology as a graph for the UI: nodes (spouts and bolts, with the numbers of the
        topology page over ``window``) and edges (the declared inputs, with their grouping and
        the tuples per second the consumer executed from them over the window).  The acker and
        system streams ("__...") only with ``sys``."""
        record = self.resolve(ident)
        view = self.view(record, details=True)
        now = self.now()
        with self._stats_lock:
            span = self.stats.span(record["id"], window, now)
        groupings = {(c["name"], i["component"], i["stream"]): i["grouping"]
                     for c in record["definition"]["components"] for i in c.get("inputs", [])}
        return storm_api.visualization(view, window, now, sys, span, groupings)

    def supervisors_started(self) -> dict[str, float]:
        """node -> when its supervisor registered: the creation of its ephemeral node."""
        return self.state.supervisors_started()

    def storm_action(self, ident: str, action: str, wait: int = 0, body: Any = None) -> dict[str, Any]:
        """Storm's POST /topology/:id/<action>; Storm's answer."""
        record = self.resolve(ident)
        if action in ("activate", "deactivate"):
            self._set_status(record, "active" if action == "activate" else "inactive")
        elif action == "kill":
            self._kill(record, wait)
        elif action == "rebalance":
            # Squall moves executors at once: Storm's wait (spouts paused first) has no counterpart.
            try:
                request = storm_api.rebalance_request(body)
            except ValueError as e:
                raise bad_request(str(e)) from e
            self._rebalance(record, request)
        else:
            msg = f"no such action {action!r} (activate, deactivate, rebalance, kill)"
            raise ApiError(404, msg)
        return storm_api.op_response(record["id"], action)

    def prometheus_snapshot(self) -> dict[str, Any]:
        """Plain data for squall.nimbus.prometheus: the cluster's slots, and per topology
        its executors' counters (all time), latencies and capacity (10 minutes), gauges and
        the components' own metrics, with where each executor runs, and its workers' latest
        system samples."""
        supervisors = self.state.supervisors()
        assignments = self.state.assignments()
        beats = self.state.worker_beats()
        used = {(w["node"], w["port"]) for a in assignments.values() for w in a["workers"]}
        now = self.now()
        topologies = []
        for record in self.state.topologies():
            view = self.view(record)
            placement = {e: {"node": w["node"], "worker": f"{w['host']}:{w['port']}"}
                         for e, w in view.placement().items()}
            user = [{"node": node, "worker": f"{view.hosts.get(node, node)}:{port}",
                     "metrics": beat["metrics"]}
                    for node, ports in beats.items() for port, beat in ports.items()
                    if beat.get("topology_id") == record["id"] and beat.get("metrics")]
            with self._stats_lock:
                all_time = self.stats.executors(record["id"], ALL_TIME, now)
                recent = self.stats.executors(record["id"], "600", now)
                latest = {e: dict(v) for (tid, e), v in self.stats.latest.items() if tid == record["id"]}
            topologies.append({
                "id": record["id"], "name": record["name"], "status": record["status"],
                "uptime": now - record["submitted"], "workers": len(view.workers),
                "executors": sum(len(w["executors"]) for w in view.workers),
                "tasks": sum(len(c["tasks"]) for c in view.components.values()),
                "kinds": {name: c["kind"] for name, c in view.components.items()},
                "placement": placement, "all_time": all_time, "recent": recent, "latest": latest,
                "user_metrics": user,
                "worker_system": [{"node": node, "port": port, "sample": pair[1]}
                                  for (node, port), pair in sorted(view.samples.items())]})
        return {"supervisors": len(supervisors),
                "slots_total": sum(len(s["ports"]) for s in supervisors.values()),
                "slots_used": sum(1 for n, s in supervisors.items() for p in s["ports"] if (n, p) in used),
                "topologies": topologies}

    # -- submit --------------------------------------------------------------

    def check_size(self, defn: Any, conf: dict[str, Any]) -> None:
        """Refuse what would exhaust the cluster (or nimbus, planning it) before planning it."""
        limits = self.conf
        merged = {**defn.config, **conf}
        workers = merged.get("topology.workers", 1)
        ackers = merged.get("topology.acker.executors")
        executors = sum(c.par for c in defn.components.values()) + (ackers if ackers is not None else workers)
        tasks = sum(c.tasks for c in defn.components.values()) + (ackers if ackers is not None else workers)
        for what, n, key in (("workers", workers, "nimbus.slots.perTopology"),
                             ("executors", executors, "nimbus.executors.perTopology"),
                             ("tasks", tasks, "nimbus.tasks.perTopology")):
            if isinstance(n, int) and n > limits[key]:
                raise bad_request(f"the topology asks for {n} {what}, over this cluster's {key} "
                                  f"({limits[key]})")

    def submit(self, body: Any, owner: str | None = None) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise bad_request("the request body must be a JSON object")
        name = body.get("name")
        if not isinstance(name, str) or not NAME.match(name):
            raise bad_request(f"topology name {name!r} must be 1-100 letters, digits, '_' or '-'")
        conf = body.get("conf") or {}
        if not isinstance(conf, dict):
            raise bad_request("'conf' must be a JSON object")
        try:
            defn = definition_from_dict(body.get("topology"))
            config_mod.validate(conf)
            config_mod.validate(defn.config)
            self.check_size(defn, conf)
            plan = plan_topology(defn, overrides=conf)
            # The features' own checks (squall.plugins): e.g. checkpointed state in a node-local
            # store is refused when workers may span hosts; Spark bolts near the timeout warned of.
            warnings = plugins.run_submit_checks(
                plan, [s.get("host", node) for node, s in self.state.supervisors().items()], log)
        except (TopologyValidationError, ConfigError) as e:
            raise bad_request(str(e)) from e
        if any(r["name"] == name and r["status"] != "killing" for r in self.state.topologies()):
            raise ApiError(409, f"a topology named {name!r} is already running")
        blob = self._decode_code(body.get("code"))
        self._verify(defn.to_dict(), blob)
        topology_id = f"{name}-{int(self.now())}-{os.urandom(3).hex()}"
        if self.conf["squall.secure"]:
            # Before the topology exists: a supervisor never sees it without its workers' key.
            self.state.put_topology_secrets(topology_id, {"curve": new_keypair()})
        self.state.put_code(topology_id, blob)
        # Storm's topology.name: the name submitted, which the workers' components see in
        # their conf (the definition's own name is its class's); a transactional id
        # defaults to it.
        topo_conf = {**defn.config, **conf, "topology.name": name}
        self.state.put_topology({
            "id": topology_id, "name": name, "status": "active", "definition": defn.to_dict(),
            "conf": topo_conf, "submitted": self.now(), "num_workers": plan.conf["topology.workers"],
            "owner": owner,
        })
        log.info("topology submitted", topology=name, id=topology_id, owner=owner,
                 executors=len(plan.executors), workers=plan.conf["topology.workers"])
        self.reconcile(topology_id)
        return {"name": name, "id": topology_id, **({"warnings": warnings} if warnings else {})}

    def _decode_code(self, code: Any) -> bytes:
        if code is None:
            return b""
        if not isinstance(code, str):
            raise bad_request("'code' must be a base64 string of a zip file")
        try:
            blob = base64.b64decode(code, validate=True)
        except (binascii.Error, ValueError) as e:
            raise bad_request(f"'code' is not valid base64: {e}") from e
        if len(blob) > self.conf["nimbus.code.max.bytes"]:
            raise bad_request(f"the code package is {len(blob)} bytes, over nimbus.code.max.bytes")
        return blob

    def _verify(self, definition: dict[str, Any], blob: bytes) -> None:
        """Load every class in a throwaway process: a missing class is refused now.

        Success must be said, not implied: the process prints ``verified <nonce>``
        (a nonce it is given on stdin) after loading everything, so user code that
        ends the process early at import (``os._exit(0)``) is refused, not waved on."""
        with tempfile.TemporaryDirectory(prefix="squall-verify-") as tmp:
            if blob:
                try:
                    extract(blob, tmp, max_bytes=self.conf["nimbus.code.max.uncompressed.bytes"],
                            max_entries=self.conf["nimbus.code.max.entries"])
                except Exception as e:  # noqa: BLE001 - a corrupt or oversized zip is bad input
                    raise bad_request(f"the code package is refused: {e}") from e
            nonce = os.urandom(16).hex()
            try:
                proc = subprocess.run(
                    [sys.executable, "-m", "squall.nimbus.verify", tmp],
                    input=json.dumps({"definition": definition, "nonce": nonce}),
                    capture_output=True, text=True, timeout=VERIFY_TIMEOUT_SECS, check=False, cwd=tmp,
                    env=verify_env())
            except subprocess.TimeoutExpired as e:
                raise bad_request("importing the topology's code did not finish in time") from e
            said = proc.stdout.strip().splitlines()
            if proc.returncode == 0 and said and said[-1] == f"{VERIFIED} {nonce}":
                return
            reason = ("\n".join(line for line in said if nonce not in line).strip()
                      or proc.stderr.strip()[-2000:])
            if proc.returncode == 0:
                reason = ("importing the topology's code ended the verification process before it "
                          f"reported success{': ' + reason[-500:] if reason else ''}")
            raise bad_request(reason or f"verifying the topology's code failed (exit {proc.returncode})")

    # -- lifecycle -----------------------------------------------------------

    def set_status(self, name: str, status: str) -> dict[str, Any]:
        return self._set_status(self.record(name), status)

    def _set_status(self, record: dict[str, Any], status: str) -> dict[str, Any]:
        name = record["name"]
        if record["status"] == "killing":
            raise ApiError(409, f"topology {name!r} is being killed")
        record["status"] = status
        self.state.put_topology(record)
        self.reconcile(record["id"])
        return {"name": name, "status": status}

    def kill(self, name: str, wait: Any = None) -> dict[str, Any]:
        return self._kill(self.record(name), wait)

    def _kill(self, record: dict[str, Any], wait: Any = None) -> dict[str, Any]:
        name = record["name"]
        if wait is None:
            wait = record["conf"].get("topology.message.timeout.secs",
                                      config_mod.DEFAULTS["topology.message.timeout.secs"])
        # NaN passes "< 0" and would leave the topology killing for ever.
        if (not isinstance(wait, (int, float)) or isinstance(wait, bool) or not math.isfinite(wait)
                or wait < 0):
            raise bad_request(f"'wait_secs' must be a number >= 0, got {wait!r}")
        record["status"] = "killing"
        record["kill_at"] = self.now() + wait
        self.state.put_topology(record)
        log.info("topology killed", topology=name, wait_secs=wait)
        self.reconcile(record["id"])
        return {"name": name, "status": "killing", "wait_secs": wait}

    def rebalance(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._rebalance(self.record(name), body)

    def _rebalance(self, record: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        name = record["name"]
        workers = body.get("workers")
        executors = body.get("executors") or {}
        if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool) or workers < 1):
            raise bad_request(f"'workers' must be an integer >= 1, got {workers!r}")
        if workers is not None and workers > self.conf["nimbus.slots.perTopology"]:
            raise bad_request(f"{workers} workers is over this cluster's nimbus.slots.perTopology "
                              f"({self.conf['nimbus.slots.perTopology']})")
        if not isinstance(executors, dict):
            raise bad_request("'executors' must map component names to executor counts")
        definition = record["definition"]
        by_name = {c["name"]: c for c in definition["components"]}
        for component, count in executors.items():
            if component not in by_name:
                raise bad_request(f"topology {name!r} has no component {component!r}")
            tasks = by_name[component]["tasks"]
            if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= tasks:
                raise bad_request(f"component {component!r} can run 1..{tasks} executors "
                                  f"(its task count), got {count!r}")
            by_name[component]["par"] = count
        if workers is not None:
            record["conf"]["topology.workers"] = workers
            record["num_workers"] = workers
        self.state.put_topology(record)
        self.reconcile(record["id"], reschedule=True)
        return {"name": name, "workers": record["num_workers"], "executors": executors}

    # -- reconciliation ------------------------------------------------------

    def reconcile_all(self) -> None:
        for topology_id in self.state.topology_ids():
            try:
                self.reconcile(topology_id)
            except Exception:  # noqa: BLE001 - one bad topology must not stop the others
                log.exception("reconciling a topology failed", id=topology_id)
        self.remove_orphan_assignments()

    def remove_orphan_assignments(self) -> None:
        """Drop the assignments of topologies that no longer exist, freeing their slots
        (Storm's nimbus cleans up the same way): whatever left one behind, a nimbus that
        died between removing a topology's parts, or an older nimbus's race."""
        with self._reconcile_lock:
            known = set(self.state.topology_ids())
            for topology_id in self.state.assignment_ids():
                # Under the lock, an assignment is only ever written after its topology,
                # so one whose topology is missing now is an orphan, not a submit under way.
                if topology_id not in known and self.state.topology(topology_id) is None:
                    self.state.remove_assignment(topology_id)
                    log.warning("orphan assignment removed", id=topology_id)

    def reconcile(self, topology_id: str, reschedule: bool = False) -> None:
        with self._reconcile_lock:
            self._reconcile(topology_id, reschedule)

    def _reconcile(self, topology_id: str, reschedule: bool) -> None:
        record = self.state.topology(topology_id)
        if record is None:
            return
        now = self.now()
        if record["status"] == "killing" and now >= record.get("kill_at", 0):
            self.state.remove_topology(topology_id)
            log.info("topology removed", topology=record["name"], id=topology_id)
            return
        plan = plan_topology(definition_from_dict(record["definition"]), overrides=record["conf"])
        executors = [e.id for e in plan.executors]
        supervisors = self.state.supervisors()
        beats = self.state.worker_beats()
        current = self.state.assignment(topology_id)
        used: set[Slot] = set()
        for other_id, other in self.state.assignments().items():
            if other_id != topology_id:
                used.update((w["node"], w["port"]) for w in other["workers"])
        for node in supervisors:
            self._node_seen[node] = now
        alive: dict[Slot, list[tuple[int, int]]] = {}
        since: dict[Slot, float] = {}
        if current and not reschedule:
            for w in current["workers"]:
                slot = (w["node"], w["port"])
                since[slot] = w["since"]
                if w["node"] not in supervisors:
                    # A supervisor restarting (an upgrade, a rotated keyring) leaves its workers
                    # running, and its ZooKeeper node is gone for a moment: its workers keep their
                    # executors for nimbus.task.timeout.secs from when it was last seen (from now
                    # for a nimbus that never saw it, as Storm gives a new leader's first look).
                    seen = self._node_seen.setdefault(w["node"], now)
                    if now - seen < self.conf["nimbus.task.timeout.secs"]:
                        alive[slot] = [tuple(e) for e in w["executors"]]  # type: ignore[misc]
                    continue
                beat = beats.get(w["node"], {}).get(str(w["port"]))
                fresh = bool(beat and beat.get("topology_id") == topology_id
                             and now - beat["time"] < self.conf["nimbus.task.timeout.secs"])
                if fresh or now - w["since"] < self.conf["nimbus.task.launch.secs"]:
                    alive[slot] = [tuple(e) for e in w["executors"]]  # type: ignore[misc]
        free = {node: [p for p in info["ports"] if (node, p) not in used and (node, p) not in alive]
                for node, info in supervisors.items()}
        placement = schedule(executors, record["num_workers"], free, alive,
                             {e.id: e.component for e in plan.executors})
        workers = [{"node": node, "port": port, "executors": [list(e) for e in sorted(execs)],
                    "since": since.get((node, port), now) if (node, port) in alive else now}
                   for (node, port), execs in sorted(placement.items())]
        active = record["status"] == "active"
        known = (current or {}).get("hosts", {})
        hosts = {w["node"]: supervisors[w["node"]]["host"] if w["node"] in supervisors else known[w["node"]]
                 for w in workers}
        if current and current["workers"] == workers and current["active"] == active:
            return
        version = (current or {}).get("version", 0) + 1
        self.state.put_assignment(topology_id, {"version": version, "time": now, "workers": workers,
                                                "hosts": hosts, "active": active})
        log.info("assignment written", topology=record["name"], version=version,
                 slots=[f"{w['node']}:{w['port']}" for w in workers], active=active)
