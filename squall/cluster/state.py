"""The cluster's shared state in ZooKeeper: the one module that knows the paths.

Layout under ``storm.zookeeper.root`` (Storm's tree as the model)::

    topologies/<id>        {"id", "name", "status", "definition", "conf", ...}
    code/<id>/<n>          the topology's code package (a zip), in chunks
    assignments/<id>       {"version", "workers": [{"node", "port", "executors"}],
                            "hosts": {node: host}, "time"}
    supervisors/<node>     ephemeral: {"node", "host", "ports", "time"}
    workerbeats/<node>     ephemeral: the node's worker heartbeats, one write
                           per supervisor heartbeat whatever the executor count
    errors/<id>/e-<seq>    the last errors of a topology's components
    nimbus/election/...    leader election (kazoo's Election recipe)
    nimbus/hosts/<id>      ephemeral: {"url"} of every running nimbus

Every write is JSON.  Idempotent steps treat NodeExists/NoNode as done.
"""

from __future__ import annotations

import json
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError

# ZooKeeper's default jute.maxbuffer is 1 MiB per node; stay well under.
CODE_CHUNK = 512 * 1024
MAX_ERRORS = 20


def _dump(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _load(data: bytes | None) -> Any:
    return json.loads(data.decode()) if data else None


class ClusterState:
    def __init__(self, client: KazooClient, root: str = "/squall") -> None:
        self.zk = client
        self.root = root.rstrip("/") or "/squall"

    def path(self, *parts: str) -> str:
        return "/".join((self.root, *parts))

    def setup(self) -> None:
        for part in ("topologies", "code", "assignments", "supervisors", "workerbeats", "errors",
                     "nimbus/election", "nimbus/hosts"):
            self.zk.ensure_path(self.path(part))

    # -- generic -------------------------------------------------------------

    def _get(self, path: str) -> Any:
        try:
            data, _stat = self.zk.get(path)
        except NoNodeError:
            return None
        return _load(data)

    def _put(self, path: str, obj: Any, ephemeral: bool = False) -> None:
        data = _dump(obj)
        try:
            self.zk.set(path, data)
        except NoNodeError:
            try:
                self.zk.create(path, data, ephemeral=ephemeral, makepath=True)
            except NodeExistsError:
                self.zk.set(path, data)

    def _children(self, path: str) -> list[str]:
        try:
            return sorted(self.zk.get_children(path))
        except NoNodeError:
            return []

    def _delete(self, path: str) -> None:
        try:
            self.zk.delete(path, recursive=True)
        except NoNodeError:
            pass

    # -- topologies ----------------------------------------------------------

    def topology_ids(self) -> list[str]:
        return self._children(self.path("topologies"))

    def topology(self, topology_id: str) -> dict[str, Any] | None:
        return self._get(self.path("topologies", topology_id))

    def topologies(self) -> list[dict[str, Any]]:
        return [t for t in (self.topology(i) for i in self.topology_ids()) if t is not None]

    def put_topology(self, record: dict[str, Any]) -> None:
        self._put(self.path("topologies", record["id"]), record)

    def remove_topology(self, topology_id: str) -> None:
        for part in ("assignments", "code", "errors", "topologies"):
            self._delete(self.path(part, topology_id))

    # -- code ----------------------------------------------------------------

    def put_code(self, topology_id: str, blob: bytes) -> None:
        base = self.path("code", topology_id)
        self._delete(base)
        self.zk.ensure_path(base)
        for i in range(0, max(len(blob), 1), CODE_CHUNK):
            self.zk.create(f"{base}/{i // CODE_CHUNK:06d}", blob[i:i + CODE_CHUNK])

    def code(self, topology_id: str) -> bytes | None:
        base = self.path("code", topology_id)
        chunks = self._children(base)
        if not chunks:
            return None
        return b"".join(self.zk.get(f"{base}/{c}")[0] for c in chunks)

    # -- assignments ---------------------------------------------------------

    def assignment(self, topology_id: str) -> dict[str, Any] | None:
        return self._get(self.path("assignments", topology_id))

    def assignments(self) -> dict[str, dict[str, Any]]:
        out = {}
        for topology_id in self._children(self.path("assignments")):
            record = self.assignment(topology_id)
            if record is not None:
                out[topology_id] = record
        return out

    def put_assignment(self, topology_id: str, record: dict[str, Any]) -> None:
        self._put(self.path("assignments", topology_id), record)

    def remove_assignment(self, topology_id: str) -> None:
        self._delete(self.path("assignments", topology_id))

    # -- supervisors and worker heartbeats -----------------------------------

    def register_supervisor(self, node: str, info: dict[str, Any]) -> None:
        self._put(self.path("supervisors", node), info, ephemeral=True)

    def supervisors(self) -> dict[str, dict[str, Any]]:
        out = {}
        for node in self._children(self.path("supervisors")):
            info = self._get(self.path("supervisors", node))
            if info is not None:
                out[node] = info
        return out

    def put_worker_beats(self, node: str, beats: dict[str, Any]) -> None:
        self._put(self.path("workerbeats", node), beats, ephemeral=True)

    def supervisors_started(self) -> dict[str, float]:
        """node -> when its supervisor registered (its ephemeral node's creation, wall seconds)."""
        out = {}
        for node in self._children(self.path("supervisors")):
            stat = self.zk.exists(self.path("supervisors", node))
            if stat is not None:
                out[node] = stat.ctime / 1000.0
        return out

    def worker_beats(self) -> dict[str, dict[str, Any]]:
        out = {}
        for node in self._children(self.path("workerbeats")):
            beats = self._get(self.path("workerbeats", node))
            if beats is not None:
                out[node] = beats
        return out

    # -- errors --------------------------------------------------------------

    def add_error(self, topology_id: str, error: dict[str, Any]) -> None:
        base = self.path("errors", topology_id)
        self.zk.create(f"{base}/e-", _dump(error), sequence=True, makepath=True)
        children = self._children(base)
        for old in children[:-MAX_ERRORS]:
            self._delete(f"{base}/{old}")

    def errors(self, topology_id: str) -> list[dict[str, Any]]:
        base = self.path("errors", topology_id)
        return [e for e in (self._get(f"{base}/{c}") for c in self._children(base)) if e is not None]

    # -- nimbus --------------------------------------------------------------

    def election_path(self) -> str:
        return self.path("nimbus", "election")

    def register_nimbus(self, nimbus_id: str, info: dict[str, Any]) -> None:
        self._put(self.path("nimbus", "hosts", nimbus_id), info, ephemeral=True)

    def nimbuses(self) -> dict[str, dict[str, Any]]:
        base = self.path("nimbus", "hosts")
        out = {}
        for nimbus_id in self._children(base):
            info = self._get(f"{base}/{nimbus_id}")
            if info is not None:
                out[nimbus_id] = info
        return out
