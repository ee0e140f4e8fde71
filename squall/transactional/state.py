"""Which coordination store a transactional component uses (squall.cluster.fenced_state
holds the store's interface and its in-memory twin, squall.cluster.transactional_state
the ZooKeeper one)."""

from __future__ import annotations

from typing import Any

from squall.cluster.fenced_state import BACKEND_RESOURCE, StateBackend
from squall.errors import TopologyValidationError
from squall.lazy import Lazy


def open_backend(conf: dict[str, Any], resources: dict[str, Any]) -> StateBackend:
    """The backend a transactional component of this worker uses.

    ``transactional.zookeeper.servers`` wins everywhere (Storm's override);
    otherwise the runtime's own backend: the cluster's ZooKeeper in a worker
    process, memory in local mode.  One client per worker process, shared.
    """
    servers = conf.get("transactional.zookeeper.servers")
    if servers:
        key = f"{BACKEND_RESOURCE}:{','.join(map(str, servers))}:{conf.get('transactional.zookeeper.port')}"
        if key not in resources:
            from squall.cluster.transactional_state import ZooKeeperBackend

            resources.setdefault(key, Lazy(lambda: ZooKeeperBackend.for_transactional_conf(conf)))
        return resources[key].get()
    backend = resources.get(BACKEND_RESOURCE)
    if isinstance(backend, Lazy):
        backend = backend.get()
    if backend is None:
        msg = ("no transactional state backend in this runtime: set transactional.zookeeper.servers "
               "or run under a LocalCluster or a cluster worker")
        raise TopologyValidationError(msg)
    return backend
