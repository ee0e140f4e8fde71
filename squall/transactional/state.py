"""Which coordination store a transactional component uses (squall.cluster.fenced_state
holds the store's interface and its in-memory twin, squall.cluster.transactional_state
the ZooKeeper one)."""

from __future__ import annotations

from typing import Any

from squall.cluster.fenced_state import BACKEND_RESOURCE, StateBackend
from squall.errors import TopologyValidationError
from squall.lazy import Lazy, shared_resource


def open_backend(conf: dict[str, Any], resources: dict[str, Any]) -> StateBackend:
    """The backend a transactional component of this worker uses.

    ``transactional.zookeeper.servers`` wins everywhere (Storm's override);
    otherwise the runtime's own backend: the cluster's ZooKeeper in a worker
    process, memory in local mode.  One client per worker process, shared.
    """
    servers = conf.get("transactional.zookeeper.servers")
    if servers:
        key = f"{BACKEND_RESOURCE}:{','.join(map(str, servers))}:{conf.get('transactional.zookeeper.port')}"

        def zookeeper() -> StateBackend:
            from squall.cluster.transactional_state import ZooKeeperBackend  # kazoo: only when asked

            return ZooKeeperBackend.for_transactional_conf(conf)

        return shared_resource(resources, key, zookeeper)
    backend = resources.get(BACKEND_RESOURCE)
    if isinstance(backend, Lazy):
        backend = backend.get()
    if backend is None:
        msg = ("no transactional state backend in this runtime: set transactional.zookeeper.servers "
               "or run under a LocalCluster or a cluster worker")
        raise TopologyValidationError(msg)
    return backend
