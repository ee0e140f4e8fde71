"""Transactional topologies' state in ZooKeeper (Storm's ``TransactionalState``).

What it holds: a transactional spout's coordinator keeps the current txid and
each open transaction's metadata; partitioned emitters keep each partition's
metadata per transaction.  Layout (paths given to the state are relative to
``<subdir>``)::

    <transactional.zookeeper.root>/<transactional id>/
        coordinator/
            currtx              the next txid
            epoch               the latest epoch a coordinator claimed
            holders/<epoch>     ephemeral: that epoch's coordinator is running
            meta/<txid>         a transaction's coordinator metadata
        user/
            <partition>/<txid>  a partition's emitter metadata

A fenced write is one ZooKeeper multi-op: a version check of ``epoch`` (and
of ``coordinator/currtx`` when the fence names a txid) with the write, so
nothing is written once another coordinator claimed an epoch, whatever the
timing (see squall.cluster.fence).

Values are JSON text (``squall.cluster.fenced_state.encode_value``), as in
every backend: local mode refuses exactly what this one does, and a value read
back after a worker restart is what any reader gets (tuples become lists).
Writes are one small znode per transaction or partition, never one per tuple:
ZooKeeper is a coordination service, not a data store.

Every ZooKeeper failure (connection loss, an expired session, a timeout) comes
out as :class:`~squall.errors.CoordinationError`, within a bounded time: the
caller fails the batch and retries it later.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, ConnectionLoss, KazooException, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KeeperState
from kazoo.retry import KazooRetry

from squall import config
from squall.cluster.fence import Fence, FencedOut, holds
from squall.cluster.fenced_state import COORDINATOR, CURRENT_TXID, EPOCH, HOLDERS, decode_value, encode_value
from squall.cluster.zookeeper import Credentials, connect, make_client
from squall.errors import ConfigError, CoordinationError

# Ride out a short connection blip (~3 s of backoff), then give up: a batch
# that cannot reach ZooKeeper fails and replays rather than stalling its bolt.
_RETRY = {"max_tries": 5, "delay": 0.1, "backoff": 2, "max_delay": 2}


def _components(path: str, what: str) -> list[str]:
    """The '/'-separated parts of ``path`` (outer slashes ignored), each valid as a znode name."""
    parts = path.strip("/").split("/") if path.strip("/") else []
    for part in parts:
        if part in ("", ".", ".."):
            msg = f"invalid {what} {path!r}: empty, '.' and '..' components are not allowed"
            raise ValueError(msg)
    return parts


class ZooKeeperState:
    """The TransactionalState protocol over a started KazooClient, below ``base``."""

    def __init__(self, client: KazooClient, base: str, request_timeout: float = 30.0,
                 owner: str | None = None) -> None:
        self.zk = client
        self.base = base
        self.request_timeout = request_timeout
        # Where the fence's epoch and current txid live: the coordinator's subtree.
        owner = owner if owner is not None else f"{base.rsplit('/', 1)[0]}/{COORDINATOR}"
        self._epoch_path = f"{owner}/{EPOCH}"
        self._holders = f"{owner}/{HOLDERS}"
        self._current_path = f"{owner}/{CURRENT_TXID}"

    def _path(self, path: str) -> str:
        return "/".join([self.base, *_components(path, "state path")])

    def _wait(self, start: Callable[[], Any]) -> Any:
        # kazoo queues a request made while disconnected until it reconnects
        # (forever if it never does), and would then apply a write the caller
        # already saw fail: refuse instead (ConnectionLoss is retried), and
        # bound the wait for the rare request queued just before a drop.
        if not self.zk.connected:
            raise ConnectionLoss("not connected to ZooKeeper")
        return start().get(timeout=self.request_timeout)

    def _run(self, op: str, full: str, func: Callable[[], Any]) -> Any:
        if self.zk.client_state == KeeperState.CLOSED:
            msg = f"transactional state: cannot {op} {full}: the ZooKeeper client is closed"
            raise CoordinationError(msg)
        try:
            return KazooRetry(**_RETRY)(func)
        except (KazooException, KazooTimeoutError) as e:
            msg = f"transactional state: cannot {op} {full} in ZooKeeper: {type(e).__name__}: {e}"
            raise CoordinationError(msg) from e

    def set_data(self, path: str, value: Any, fence: Fence | None = None) -> None:
        full = self._path(path)
        data = encode_value(value, f"the value at {full!r}")  # refused before anything is written
        if fence is not None:
            self._run("write", full, lambda: self._fenced(fence, full, data, "set"))
            return

        def write() -> None:
            try:
                self._wait(lambda: self.zk.set_async(full, data))
            except NoNodeError:
                try:
                    self._wait(lambda: self.zk.create_async(full, data, makepath=True))
                except NodeExistsError:  # another writer, or our own create retried after a drop
                    self._wait(lambda: self.zk.set_async(full, data))

        self._run("write", full, write)

    def create(self, path: str, value: Any, fence: Fence | None = None) -> Any:
        full = self._path(path)
        data = encode_value(value, f"the value at {full!r}")
        if fence is not None:
            stored = self._run("create", full, lambda: self._fenced(fence, full, data, "create"))
            return decode_value(stored)

        def create() -> bytes:
            try:
                self._wait(lambda: self.zk.create_async(full, data, makepath=True))
            except NodeExistsError:  # the first value stays (our own, if a retried create made it)
                return self._wait(lambda: self.zk.get_async(full))[0]
            return data

        return decode_value(self._run("create", full, create))

    # -- epochs and fences -----------------------------------------------------

    def _read(self, path: str) -> tuple[Any, int | None]:
        """(value, version) of a node, (None, None) when absent."""
        try:
            data, stat = self._wait(lambda: self.zk.get_async(path))
        except NoNodeError:
            return None, None
        return decode_value(data), stat.version

    def _fenced(self, fence: Fence, full: str, data: bytes | None, op: str) -> bytes | None:
        """``op`` (set, create or delete) on ``full`` in one multi-op with the
        checks that make ``fence`` hold; FencedOut when it does not.  For a
        create, the bytes stored (another writer's if it came first)."""
        wanted = op
        while True:
            epoch, epoch_version = self._read(self._epoch_path)
            current, current_version = (self._read(self._current_path) if fence.txid is not None
                                        else (None, None))
            if not holds(fence, epoch or 0, current) or epoch_version is None:
                raise FencedOut(fence, epoch or 0, current)
            txn = self.zk.transaction()
            txn.check(self._epoch_path, epoch_version)
            if fence.txid is not None:
                txn.check(self._current_path, current_version)
            if op == "set":
                txn.set_data(full, data)
            elif op == "create":
                txn.create(full, data)
            else:
                txn.delete(full)
            results = self._wait(txn.commit_async)
            failed = results[-1]
            if not any(isinstance(r, Exception) for r in results):
                return data
            if isinstance(failed, NoNodeError) and op == "set":
                op = "create"  # the first write of this path
            elif isinstance(failed, NoNodeError) and op == "create":
                parent = full.rsplit("/", 1)[0]  # the first write below it: make it, then again
                self._wait(lambda p=parent: self.zk.ensure_path_async(p))
            elif isinstance(failed, NodeExistsError) and wanted == "create":
                return self._wait(lambda: self.zk.get_async(full))[0]  # write-once: the first stays
            elif isinstance(failed, NodeExistsError):
                op = "set"  # a set that raced with another writer's first write: set it now
            elif isinstance(failed, NoNodeError) and op == "delete":
                return None
            # Otherwise a check failed (a claim, or the current txid moved): read again.

    def check(self, fence: Fence) -> None:
        def read() -> None:
            epoch, _v = self._read(self._epoch_path)
            current = self._read(self._current_path)[0] if fence.txid is not None else None
            if not holds(fence, epoch or 0, current):
                raise FencedOut(fence, epoch or 0, current)

        self._run("check the fence at", self._epoch_path, read)

    def claim_epoch(self) -> int:
        def claim() -> int:
            while True:
                epoch, version = self._read(self._epoch_path)
                new = (epoch or 0) + 1
                data = encode_value(new, "an epoch")
                try:
                    if version is None:
                        self._wait(lambda d=data: self.zk.create_async(self._epoch_path, d, makepath=True))
                    else:
                        self._wait(lambda d=data, v=version: self.zk.set_async(self._epoch_path, d,
                                                                               version=v))
                except (NodeExistsError, BadVersionError):
                    continue  # another coordinator claimed meanwhile: claim above it
                break
            try:
                # Ephemeral: it goes with this worker's ZooKeeper session, so a
                # coordinator in standby learns when this one is gone, however it died.
                self._wait(lambda: self.zk.create_async(f"{self._holders}/{new}", b"", ephemeral=True,
                                                        makepath=True))
            except NodeExistsError:
                pass
            return new

        return self._run("claim an epoch at", self._epoch_path, claim)

    def epoch(self) -> int:
        return self._run("read", self._epoch_path, lambda: self._read(self._epoch_path)[0]) or 0

    def epoch_held(self, epoch: int) -> bool:
        path = f"{self._holders}/{epoch}"
        return self._run("read", path, lambda: self._wait(lambda: self.zk.exists_async(path)) is not None)

    def release_epoch(self, epoch: int) -> None:
        path = f"{self._holders}/{epoch}"

        def release() -> None:
            try:
                self._wait(lambda: self.zk.delete_async(path))
            except NoNodeError:
                pass

        self._run("delete", path, release)

    def get_data(self, path: str, default: Any = None) -> Any:
        full = self._path(path)
        missing = object()

        def read() -> Any:
            try:
                return self._wait(lambda: self.zk.get_async(full))[0]
            except NoNodeError:
                return missing

        data = self._run("read", full, read)
        return default if data is missing else decode_value(data)

    def _children(self, full: str) -> list[str]:
        try:
            return sorted(self._wait(lambda: self.zk.get_children_async(full)))
        except NoNodeError:
            return []

    def list(self, path: str) -> list[str]:
        full = self._path(path)
        return self._run("list", full, lambda: self._children(full))

    def delete(self, path: str, fence: Fence | None = None) -> None:
        full = self._path(path)
        if fence is not None:
            self._run("delete", full, lambda: self._fenced(fence, full, None, "delete"))
            return

        def remove(node: str) -> None:
            # Depth first, each request bounded (kazoo's recursive delete is not).
            for child in self._children(node):
                remove(f"{node}/{child}")
            try:
                self._wait(lambda: self.zk.delete_async(node))
            except NoNodeError:
                pass

        self._run("delete", full, lambda: remove(full))


class ZooKeeperBackend:
    """Opens ZooKeeperStates on one client; closes the client if it owns it."""

    def __init__(self, client: KazooClient, root: str = "/transactional", owns_client: bool = True,
                 request_timeout: float = 30.0) -> None:
        self.zk = client
        parts = _components(root, "transactional.zookeeper.root")
        self.root = "/" + "/".join(parts) if parts else ""
        self.owns_client = owns_client
        self.request_timeout = request_timeout
        self._closed = False

    def open(self, transactional_id: str, subdir: str, owner: str = COORDINATOR) -> ZooKeeperState:
        if not transactional_id or "/" in transactional_id or transactional_id in (".", ".."):
            msg = f"invalid transactional id {transactional_id!r}: it must be one non-empty znode name"
            raise ValueError(msg)
        if not subdir or subdir != subdir.strip("/"):
            msg = f"invalid transactional state subdir {subdir!r}: it must be a non-empty relative path"
            raise ValueError(msg)
        id_base = f"{self.root}/{transactional_id}"
        base = "/".join([id_base, *_components(subdir, "transactional state subdir")])
        owner_base = "/".join([id_base, *_components(owner, "transactional state owner")])
        return ZooKeeperState(self.zk, base, self.request_timeout, owner=owner_base)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.owns_client:
            self.zk.stop()
            self.zk.close()

    @classmethod
    def for_transactional_conf(cls, conf: dict[str, Any], credentials: Credentials | None = None,
                               also_allowed: list[str] | None = None) -> ZooKeeperBackend:
        """Storm's rule: the transactional.zookeeper.* servers and port, each
        falling back to storm.zookeeper.* when unset.

        Secure conf (``squall.secure``): digest auth and ACLs with
        ``credentials`` (a worker has them from its secrets file), else the
        keyring's (see squall.cluster.zookeeper.make_client).
        """

        def pick(key: str, fallback: str) -> Any:
            value = conf.get(key)
            if value is None or value == []:
                value = conf.get(fallback, config.DEFAULTS[fallback])
            return value

        servers = pick("transactional.zookeeper.servers", "storm.zookeeper.servers")
        if not isinstance(servers, (list, tuple)) or not servers:
            msg = f"ZooKeeper servers for transactional state must be a non-empty list, got {servers!r}"
            raise ConfigError(msg)
        zk_conf = {
            "storm.zookeeper.servers": list(servers),
            "storm.zookeeper.port": pick("transactional.zookeeper.port", "storm.zookeeper.port"),
            **{key: conf.get(key, config.DEFAULTS[key])
               for key in ("storm.zookeeper.session.timeout", "storm.zookeeper.connection.timeout",
                           "squall.secure", "squall.keyring.path")},
        }
        client = make_client(zk_conf, credentials, also_allowed or [])
        connect(client, zk_conf, who="transactional state")
        # A request unanswered for a whole session timeout is on a dead connection.
        return cls(client, conf.get("transactional.zookeeper.root") or "/transactional",
                   request_timeout=zk_conf["storm.zookeeper.session.timeout"] / 1000.0)

    @classmethod
    def for_cluster_conf(cls, conf: dict[str, Any], credentials: Credentials | None = None,
                         also_allowed: list[str] | None = None) -> ZooKeeperBackend:
        """What a cluster worker uses: the cluster's ZooKeeper unless the
        transactional.zookeeper.* keys name another."""
        return cls.for_transactional_conf(conf, credentials, also_allowed)
