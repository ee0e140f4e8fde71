"""Nimbus's side of worker profiling (Storm's setWorkerProfiler): a request for one worker of
one topology checked and written to ZooKeeper under the worker's node, whose supervisor
carries it out (the requests and what they do: squall.runtime.profiling).

The worker is named as Storm names it, ``host:port`` (its supervisor's host, or its node id),
and must be one the topology's assignment places now; the answer is Storm's
(``{"status", "id", "timeout", "dumplink"}``, the link listing the worker's outputs on its
node's logviewer) with the request's id, which names the file it produces.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import structlog

from squall import config as config_mod
from squall.cluster.state import ClusterState
from squall.errors import Conflict, InvalidRequest, NotFound, TooBusy, Unavailable
from squall.nimbus.views import resolve
from squall.runtime import profiling

log = structlog.get_logger("squall.nimbus.profiling")

# Requests waiting for one node's supervisor at most: each is a py-spy run (or a restart)
# there, and a node whose supervisor is down takes none; past it, 429 at once.
MAX_PENDING_PER_NODE = 16


def _setting(conf: dict[str, Any], key: str) -> Any:
    return conf.get(key, config_mod.DEFAULTS[key])


class WorkerProfiling:
    def __init__(self, state: ClusterState, conf: dict[str, Any],
                 now: Callable[[], float] = time.time) -> None:
        self.state = state
        self.conf = conf
        self.now = now

    def ask(self, ident: str, action: str, worker: str, timeout: str | None = None, fmt: str | None = None,
            locals_: bool = False, user: str | None = None) -> dict[str, Any]:
        """Storm's ``/topology/:id/profiling/<action>/:host-port[/:timeout]``; ``fmt``: a record's
        format (flamegraph, speedscope), ``locals_``: a stack dump with each frame's locals."""
        if not _setting(self.conf, "worker.profiler.enabled"):
            msg = "worker profiling is off on this cluster (worker.profiler.enabled)"
            raise Unavailable(msg)
        kind = profiling.STORM_ACTIONS.get(action)
        if kind is None:
            known = ", ".join(a for a, k in profiling.STORM_ACTIONS.items() if k)
            raise NotFound(f"no such profiling action {action!r} ({known})")
        record = resolve(self.state, ident)
        if record["status"] == "killing":
            raise Conflict(f"topology {record['name']!r} is being killed")
        node, host, port = self._worker(record, worker)
        seconds = 0.0
        if kind == "record":
            try:
                longest = float(_setting(self.conf, "worker.profiler.max.secs"))
                seconds = profiling.record_secs(timeout or "", longest)
            except ValueError as e:
                raise InvalidRequest(str(e)) from e
        request = profiling.ProfileRequest(
            id=os.urandom(8).hex(), topology_id=record["id"], node=node, port=port, kind=kind,
            requested=self.now(), seconds=seconds, format=fmt or "flamegraph",
            locals=locals_ and kind == "jstack", user=user)
        try:
            profiling.check(request)
        except ValueError as e:
            raise InvalidRequest(str(e)) from e
        self._make_room(node)
        self.state.put_profile_request(node, request.id, request.to_record())
        log.info("worker profile asked", topology=record["name"], worker=f"{host}:{port}", kind=kind,
                 seconds=seconds or None, request=request.id, user=user)
        answer: dict[str, Any] = {"status": "ok", "id": f"{host}:{port}", "request": request.id, "kind": kind,
                                  "dumplink": self._dumplink(node, record["id"], f"{host}:{port}")}
        if kind == "record":
            answer["timeout"] = timeout
            answer["seconds"] = seconds
        return answer

    def _worker(self, record: dict[str, Any], worker: str) -> tuple[str, str, int]:
        """(node, host, port) of the topology's worker ``worker`` names."""
        try:
            host, port = profiling.host_port(worker)
        except ValueError as e:
            raise InvalidRequest(str(e)) from e
        assignment = self.state.assignment(record["id"]) or {}
        hosts = assignment.get("hosts") or {}
        for w in assignment.get("workers") or []:
            node = w.get("node")
            if int(w.get("port", -1)) == port and host in (node, hosts.get(node)):
                return str(node), str(hosts.get(node, node)), port
        raise NotFound(f"topology {record['name']!r} has no worker {worker[:200]!r} "
                       "(its workers: GET /api/v1/topology-workers/:id)")

    def _make_room(self, node: str) -> None:
        """Drop ``node``'s requests its supervisor can no longer take (stale: it was down), and
        refuse a new one while MAX_PENDING_PER_NODE wait."""
        pending = self.state.profile_requests(node)
        now = self.now()
        for name, raw in list(pending.items()):
            requested = raw.get("requested") if isinstance(raw, dict) else None
            if not isinstance(requested, (int, float)) or now - requested > 2 * profiling.PICKUP_SECS:
                self.state.remove_profile_request(node, name)
                del pending[name]
        if len(pending) >= MAX_PENDING_PER_NODE:
            msg = (f"{len(pending)} profiling requests wait for the supervisor of node {node} already; "
                   "ask again once it has taken them")
            raise TooBusy(msg)

    def _dumplink(self, node: str, topology_id: str, worker: str) -> str:
        base = (self.state.supervisors().get(node) or {}).get("logviewer")
        if not base:
            return ""
        return f"{base}/api/v1/dumps/{quote(topology_id, safe='')}/{quote(worker, safe='')}"
