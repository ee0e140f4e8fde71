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
    secrets/<id>           the topology's secrets: {"curve": {"public", "secret"}, "zookeeper",
                           "drpc": {"token", "ca"}}
    logconfigs/<id>        its log levels set while it runs (Storm's path; the form is
                           squall.runtime.log_levels'): apart from the topology record, as
                           a change of them must not relaunch a worker
    autoscale/<id>         self-regulation's switch and state (squall.tuning.regulator): the
                           action log, the action being judged, the cool-downs; a new leader
                           carries on from it
    profilerequests/<node>/<request id>
                           a worker profile asked for (squall.runtime.profiling): by node, so
                           that a supervisor watches its own requests alone; removed by that
                           supervisor once carried out (or found stale)
    debug/<id>             its debug sampling (Storm's component_debug, apart from the record
                           for the same reason; the form is squall.runtime.debug_options')
    owners/<state id>      {"owner"}: the user whose topologies alone may use a transactional
                           id or checkpointed state's key (claimed by the first submit that
                           uses it; kept as long as the state itself, which outlives topologies)
    drpc/<id>.<sha256>     empty: the hash of topology <id>'s DRPC credential, which DRPC
                           servers read (one watch on drpc/, no reads per node)
    drpcowners/<sha256>    {"function", "owner", "topologies"}: who serves a DRPC function
                           (squall.drpc_server.ownership), named by the function's SHA-256
    users                  {"users": {name: {"tokens": [sha256:...]}}}: the keyring's users as
                           the leading nimbus has them, for the daemons that check tokens
    logviewerkeys          {"keys": [{"kid", "public", "endorsement"}, ...]}: the public keys of
                           the tokens nimbus mints for logviewers (squall.security.logtokens),
                           each endorsed by the CA; the newest first
    nimbus/election/...    leader election (squall.cluster.election)
    nimbus/hosts/<id>      ephemeral: {"url"} of every running nimbus

Every write is JSON.  Idempotent steps treat NodeExists/NoNode as done.

Assignment writes given a :class:`~squall.cluster.election.LeaderFence` are
made in one transaction with a check that the leader's lock node still
exists: a nimbus deposed while its round was under way (its session expired
behind a partition or a pause) has its write refused (:class:`NotLeader`)
rather than undoing its successor's.

Secure clusters: every node carries the client's digest ACL (see
``squall.cluster.zookeeper``).  After a rotation of the ZooKeeper password,
:meth:`ClusterState.fix_acls` (run by :meth:`ClusterState.setup`) gives the
nodes made under the old ACL the current one, which names the new password
and the previous one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from typing import Any

import structlog
from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NoAuthError, NodeExistsError, NoNodeError
from kazoo.security import ACL, Id, Permissions

from squall.clock import Clock
from squall.cluster.election import LeaderElection, LeaderFence, NotLeader
from squall.cluster.session import Session
from squall.cluster.watches import ChildrenWatch, DataWatch
from squall.errors import CoordinationError

# ZooKeeper's default jute.maxbuffer is 1 MiB per node; stay well under.
CODE_CHUNK = 512 * 1024
MAX_ERRORS = 20
# fix_acls looks at no more nodes than this (a cluster has a few per topology
# and per code chunk), asking this many at a time.
MAX_ACL_NODES = 100_000
ACL_BATCH = 500
PARTS = ("topologies", "code", "assignments", "supervisors", "workerbeats", "errors", "secrets",
         "logconfigs", "debug", "autoscale", "drpc", "owners", "profilerequests", "nimbus/election",
         "nimbus/hosts")

log = structlog.get_logger("squall.cluster.state.ClusterState")


def _dump(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _load(data: bytes | None) -> Any:
    return json.loads(data.decode()) if data else None


def _logviewer_keys(data: bytes | None) -> list[dict[str, Any]]:
    try:
        record = _load(data)
    except ValueError:
        return []
    keys = record.get("keys") if isinstance(record, dict) else None
    return [k for k in keys if isinstance(k, dict)] if isinstance(keys, list) else []


TOPOLOGY_USER_PREFIX = "topology-"  # a topology's own ZooKeeper identity: topology-<id>


class ClusterState:
    def __init__(self, client: KazooClient, root: str = "/squall") -> None:
        self.zk = client
        self.root = root.rstrip("/") or "/squall"

    def path(self, *parts: str) -> str:
        return "/".join((self.root, *parts))

    def exists(self) -> bool:
        """Whether the root node is there (a tree another ensemble's daemons may never have made)."""
        return self.zk.exists(self.root) is not None

    def setup(self, fix_acls: bool = True) -> None:
        """Make the tree; on a secure client also :meth:`fix_acls` unless told not to."""
        for part in PARTS:
            self.zk.ensure_path(self.path(part))
        if fix_acls:
            self.fix_acls()

    @property
    def secure(self) -> bool:
        """Whether this client creates nodes with digest ACLs (squall.secure)."""
        acls = self.zk.default_acl or ()
        return bool(acls) and all(acl.id.scheme == "digest" for acl in acls)

    def fix_acls(self, limit: int = MAX_ACL_NODES, timeout: float = 30.0) -> int:
        """Give every node under the root this client's ACL; how many nodes changed.

        A no-op for an insecure client: it never opens nodes up.  Bounded: it
        walks at most ``limit`` nodes, level by level, asking ``ACL_BATCH`` at a
        time.  A node none of our credentials may read (made under a password
        older than the previous one) is reported and left alone.
        """
        if not self.secure:
            return 0
        wanted = list(self.zk.default_acl)
        changed = seen = 0
        unreachable: list[str] = []
        level = [self.root]
        while level and seen < limit:
            level = level[:limit - seen]
            seen += len(level)
            children: list[str] = []
            for batch in _batches(level, ACL_BATCH):
                acl_replies = [(p, self.zk.get_acls_async(p)) for p in batch]
                child_replies = [(p, self.zk.get_children_async(p)) for p in batch]
                for path, reply in acl_replies:
                    try:
                        current, _stat = reply.get(timeout=timeout)
                        # A topology's own identity, granted its transactional state's nodes, keeps them.
                        kept = wanted + [a for a in current if a.id.scheme == "digest"
                                         and a.id.id.startswith(TOPOLOGY_USER_PREFIX)]
                        if set(current) != set(kept):
                            self.zk.set_acls(path, kept)
                            changed += 1
                    except NoNodeError:
                        continue
                    except NoAuthError:
                        unreachable.append(path)
                for path, reply in child_replies:
                    try:
                        children.extend(f"{path}/{c}" for c in sorted(reply.get(timeout=timeout)))
                    except (NoNodeError, NoAuthError):
                        continue
            level = children
        if level:
            log.warning("zookeeper ACL walk stopped at its limit", root=self.root, limit=limit)
        if unreachable:
            log.error("zookeeper nodes not reachable with the keyring's credentials: their ACL names a "
                      "retired password", count=len(unreachable), first=unreachable[:5])
        if changed:
            log.info("zookeeper ACLs updated to the keyring's credentials", nodes=changed, root=self.root)
        return changed

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

    def put_topology(self, record: dict[str, Any], fence: LeaderFence | None = None) -> None:
        """Write a topology's record; with ``fence``, only while its term holds (a status, a
        kill or a rebalance asked of a nimbus deposed since is not made: :class:`NotLeader`)."""
        self._fenced_put(self.path("topologies", record["id"]), record, fence)

    def remove_topology(self, topology_id: str, fence: LeaderFence | None = None) -> None:
        """Remove a topology and all of it; with ``fence``, its assignment goes first and only
        while the term holds (the rest is the topology's own, which no other writer touches).
        Its ZooKeeper identity goes first of all: the nodes it was granted are the cluster's again."""
        granted = ((self.topology_secrets(topology_id) or {}).get("zookeeper") or {})
        if isinstance(granted.get("paths"), list):
            self.revoke([p for p in granted["paths"] if isinstance(p, str)])
        self._fenced_delete(self.path("assignments", topology_id), fence)
        for part in ("code", "errors", "secrets", "logconfigs", "debug", "autoscale"):
            self._delete(self.path(part, topology_id))
        self._fenced_delete(self.path("topologies", topology_id), fence)
        for name in self._children(self.path("drpc")):
            if name.partition(".")[0] == topology_id:
                self._delete(self.path("drpc", name))

    # -- secrets -------------------------------------------------------------

    def put_topology_secrets(self, topology_id: str, secrets: dict[str, Any]) -> None:
        """What only the topology's workers get (its CURVE keypair).  Write it
        before the topology's assignment: a secure supervisor refuses to launch
        a worker of a topology without one (until a later sync finds it)."""
        self._put(self.path("secrets", topology_id), secrets)

    def topology_secrets(self, topology_id: str) -> dict[str, Any] | None:
        return self._get(self.path("secrets", topology_id))

    # -- DRPC ----------------------------------------------------------------

    def put_drpc_invoker(self, topology_id: str, credential_hash: str) -> None:
        """Let DRPC servers accept the credential whose SHA-256 (hex) is ``credential_hash``
        from topology ``topology_id`` (until :meth:`remove_topology`)."""
        if "." in topology_id or not credential_hash.isalnum():
            msg = f"not a topology id and a hex digest: {topology_id!r}, {credential_hash!r}"
            raise ValueError(msg)
        self._put(self.path("drpc", f"{topology_id}.{credential_hash}"), None)

    def watch_drpc_invokers(self, on_change: Callable[[dict[str, str]], None]) -> ChildrenWatch:
        """``on_change({topology id: credential hash})`` now and whenever a topology gets
        or loses its DRPC credential."""
        self.zk.ensure_path(self.path("drpc"))

        def changed(children: list[str]) -> None:
            hashes = {}
            for name in children:
                topology_id, _, digest = name.rpartition(".")  # an id may hold '.', a hash never
                if topology_id and digest:
                    hashes[topology_id] = digest
            on_change(hashes)

        return ChildrenWatch(self.zk, self.path("drpc"), changed)

    def claim_state_ids(self, ids: list[str], owner: str) -> dict[str, str]:
        """Claim each of ``ids`` (transactional ids, checkpointed state's keys) for
        ``owner`` unless another user holds it; {id: its owner} of those another holds
        (nothing of them is claimed then).  Ids come checked (squall.security.admission)."""
        taken: dict[str, str] = {}
        for state_id in ids:
            held = (self._get(self.path("owners", state_id)) or {}).get("owner")
            if held is not None and held != owner:
                taken[state_id] = held
        if taken:
            return taken
        for state_id in ids:
            try:
                self.zk.create(self.path("owners", state_id), _dump({"owner": owner}), makepath=True)
            except NodeExistsError:  # claimed meanwhile: by whom decides
                held = (self._get(self.path("owners", state_id)) or {}).get("owner")
                if held != owner:
                    taken[state_id] = str(held)
        return taken

    def _owner_path(self, function: str) -> str:
        # Hashed: any text names a function, and a node name must not hold '/' or be huge.
        return self.path("drpcowners", hashlib.sha256(function.encode()).hexdigest())

    def drpc_owners(self, timeout: float = 30.0) -> list[tuple[Any, int]]:
        """Every DRPC function's owner record with its node's version (asked all at once)."""
        base = self.path("drpcowners")
        replies = [self.zk.get_async(f"{base}/{name}") for name in self._children(base)]
        out = []
        for reply in replies:
            try:
                data, stat = reply.get(timeout=timeout)
            except NoNodeError:  # released meanwhile
                continue
            out.append((_load(data), stat.version))
        return out

    def drpc_owner(self, function: str) -> tuple[Any, int] | None:
        """``function``'s owner record and its version; None when nobody owns it."""
        try:
            data, stat = self.zk.get(self._owner_path(function))
        except NoNodeError:
            return None
        return _load(data), stat.version

    def claim_drpc_function(self, function: str, record: dict[str, Any]) -> int | None:
        """Write ``function``'s first owner record: its version (0), or None when another
        server wrote one first."""
        self.zk.ensure_path(self.path("drpcowners"))
        try:
            self.zk.create(self._owner_path(function), _dump(record))
        except NodeExistsError:
            return None
        return 0

    def update_drpc_owner(self, function: str, record: dict[str, Any], version: int) -> int | None:
        """Rewrite ``function``'s owner record if it is still at ``version``: the new version,
        or None when it changed or went meanwhile."""
        try:
            return int(self.zk.set(self._owner_path(function), _dump(record), version=version).version)
        except (BadVersionError, NoNodeError):
            return None

    def release_drpc_function(self, function: str, version: int) -> bool:
        """Remove ``function``'s owner record if it is still at ``version``."""
        try:
            self.zk.delete(self._owner_path(function), version=version)
        except (BadVersionError, NoNodeError):
            return False
        return True

    # -- users ---------------------------------------------------------------

    def put_users(self, users: dict[str, list[str]]) -> None:
        """The keyring's users and the hashes of their tokens (a hash lets no one in), as the
        leading nimbus has them: the other daemons that check tokens follow this node."""
        self._put(self.path("users"), {"users": {name: {"tokens": list(tokens)} for name, tokens
                                                 in users.items()}})

    def watch_users(self, on_change: Callable[[dict[str, list[str]] | None], None]) -> DataWatch:
        """``on_change({user: [token hash, ...]})`` now and whenever nimbus publishes the users
        again; ``on_change(None)`` while none are published (a nimbus that does not)."""

        def changed(data: bytes | None) -> None:
            try:
                record = _load(data)
            except ValueError:
                record = None
            users = record.get("users") if isinstance(record, dict) else None
            if not isinstance(users, dict):
                on_change(None)
                return
            on_change({name: [t for t in entry.get("tokens", ()) if isinstance(t, str)]
                       for name, entry in users.items() if isinstance(name, str) and isinstance(entry, dict)})

        return DataWatch(self.zk, self.path("users"), changed)

    # -- the logviewers' token keys ----------------------------------------------

    def add_logviewer_key(self, record: dict[str, Any], keep: int = 4, attempts: int = 10) -> bool:
        """``record`` first among the published keys (the ``keep`` newest kept: a keyring
        changed under a running nimbus leaves its old key valid a while), unless a key of
        its ``kid`` is there already; whether it was added."""
        path = self.path("logviewerkeys")
        for _ in range(attempts):  # another nimbus may be writing it too: read again, decide again
            try:
                data, stat = self.zk.get(path)
            except NoNodeError:
                try:
                    self.zk.create(path, _dump({"keys": [record]}), makepath=True)
                except NodeExistsError:
                    continue
                return True
            keys = _logviewer_keys(data)
            if any(k.get("kid") == record["kid"] for k in keys):
                return False
            try:
                self.zk.set(path, _dump({"keys": [record, *keys][:keep]}), version=stat.version)
            except BadVersionError:
                continue
            return True
        msg = f"could not publish the logviewer key in {attempts} attempts: {path} kept changing"
        raise CoordinationError(msg)

    def watch_logviewer_keys(self, on_change: Callable[[list[dict[str, Any]]], None]) -> DataWatch:
        """``on_change([key record, ...])`` now and whenever nimbus publishes a key ([] when none is)."""
        return DataWatch(self.zk, self.path("logviewerkeys"), lambda data: on_change(_logviewer_keys(data)))

    def grant(self, paths: list[str], digest: str) -> None:
        """Make ``paths`` (and all below them) reachable by the cluster's
        credentials and the digest id ``digest`` only -- a topology's own
        ZooKeeper identity, for its transactional state.  Whoever held them
        before (an earlier version of the topology) no longer does."""
        acl = [*self.zk.default_acl, ACL(Permissions.ALL, Id("digest", digest))]
        for path in paths:
            self.zk.ensure_path(path.rsplit("/", 1)[0] or "/")  # the root: the cluster's only
            try:
                self.zk.create(path, b"", acl=acl)
            except NodeExistsError:
                self._set_acls_below(path, acl)

    def revoke(self, paths: list[str]) -> None:
        """``paths`` and all below them back to the cluster's credentials only."""
        for path in paths:
            self._set_acls_below(path, list(self.zk.default_acl))

    def _set_acls_below(self, path: str, acl: list[ACL], limit: int = MAX_ACL_NODES) -> None:
        level, seen = [path], 0
        while level and seen < limit:
            seen += len(level)
            below: list[str] = []
            for node in level:
                try:
                    self.zk.set_acls(node, acl)
                    below += [f"{node}/{c}" for c in self.zk.get_children(node)]
                except NoNodeError:
                    continue
                except NoAuthError:  # made by a client that did not name the cluster: left, said
                    log.error("zookeeper node not reachable with the cluster's credentials", path=node)
            level = below

    # -- log levels ----------------------------------------------------------

    def log_levels(self, topology_id: str) -> dict[str, Any]:
        """The levels set on the topology's workers (squall set_log_level): {} when none are."""
        return self._get(self.path("logconfigs", topology_id)) or {}

    def put_log_levels(self, topology_id: str, levels: dict[str, Any]) -> None:
        self._put(self.path("logconfigs", topology_id), levels)

    def watch_log_levels(self, topology_id: str, on_change: Callable[[], None]) -> DataWatch:
        """``on_change()`` now and whenever the topology's log levels are written or removed."""
        return DataWatch(self.zk, self.path("logconfigs", topology_id), lambda _data: on_change())

    # -- self-regulation -----------------------------------------------------

    def autoscale(self, topology_id: str) -> dict[str, Any]:
        """Self-regulation's record of a topology: {} when it never ran or was switched."""
        return self._get(self.path("autoscale", topology_id)) or {}

    def put_autoscale(self, topology_id: str, record: dict[str, Any],
                      fence: LeaderFence | None = None) -> None:
        """Only while the term holds, with ``fence``: a deposed leader's round writes nothing."""
        self._fenced_put(self.path("autoscale", topology_id), record, fence)

    # -- worker profiling ----------------------------------------------------

    def put_profile_request(self, node: str, request_id: str, record: dict[str, Any]) -> None:
        """A profile request for a worker of ``node`` (squall.runtime.profiling)."""
        self._put(self.path("profilerequests", node, request_id), record)

    def profile_requests(self, node: str) -> dict[str, Any]:
        """The requests for ``node``'s workers by node name, as written (None: not JSON); the
        reader checks them."""
        base = self.path("profilerequests", node)
        out: dict[str, Any] = {}
        for name in self._children(base):
            try:
                out[name] = self._get(f"{base}/{name}")
            except ValueError:
                out[name] = None
        return out

    def remove_profile_request(self, node: str, request_id: str) -> None:
        self._delete(self.path("profilerequests", node, request_id))

    def watch_profile_requests(self, node: str, on_change: Callable[[list[str]], None]) -> ChildrenWatch:
        """``on_change(request ids)`` now and whenever a request for ``node`` comes or goes."""
        self.zk.ensure_path(self.path("profilerequests", node))
        return ChildrenWatch(self.zk, self.path("profilerequests", node), on_change)

    # -- debug sampling --------------------------------------------------------

    def debug_options(self, topology_id: str) -> dict[str, Any]:
        """The topology's debug sampling (Storm's debug action): {} when none was set."""
        return self._get(self.path("debug", topology_id)) or {}

    def put_debug_options(self, topology_id: str, options: dict[str, Any]) -> None:
        self._put(self.path("debug", topology_id), options)

    def watch_debug_options(self, topology_id: str, on_change: Callable[[], None]) -> DataWatch:
        """``on_change()`` now and whenever the topology's debug sampling is written or removed."""
        return DataWatch(self.zk, self.path("debug", topology_id), lambda _data: on_change())

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

    def assignment_ids(self) -> list[str]:
        return self._children(self.path("assignments"))

    def assignments(self) -> dict[str, dict[str, Any]]:
        out = {}
        for topology_id in self.assignment_ids():
            record = self.assignment(topology_id)
            if record is not None:
                out[topology_id] = record
        return out

    def watch_assignments(self, on_change: Callable[[list[str]], None]) -> ChildrenWatch:
        """``on_change(topology ids)`` now and whenever a topology's assignment appears or goes."""
        return ChildrenWatch(self.zk, self.path("assignments"), on_change)

    def put_assignment(self, topology_id: str, record: dict[str, Any],
                       fence: LeaderFence | None = None) -> int | None:
        """Write the assignment; with ``fence``, only while its term holds (else :class:`NotLeader`),
        returning the write's zxid: ZooKeeper's order of writes, which a leader audit reads
        (a node's clock may be wrong, the zxids are not)."""
        return self._fenced_put(self.path("assignments", topology_id), record, fence)

    def remove_assignment(self, topology_id: str, fence: LeaderFence | None = None) -> None:
        """Remove the assignment (none is fine); with ``fence``, only while its term holds."""
        self._fenced_delete(self.path("assignments", topology_id), fence)

    def _fenced_put(self, path: str, record: Any, fence: LeaderFence | None) -> int | None:
        """Set or create ``path`` in one transaction with a check that ``fence``'s lock node
        still lives: a leader deposed mid-round (cut off or paused past its session) writes
        nothing after its successor may have begun.  The write's zxid (None unfenced)."""
        if fence is None:
            self._put(path, record)
            return None
        data = _dump(record)
        # set, or create when there is none yet; a create racing another's (NodeExists) sets again.
        for attempt in ("set", "create", "set"):
            txn = self.zk.transaction()
            txn.check(fence.node, 0)  # the lock node's data is never changed: version 0 while it lives
            if attempt == "set":
                txn.set_data(path, data)
            else:
                txn.create(path, data)
            results = txn.commit()
            failure = _failure(results, fence)
            if failure is None:
                return _zxid(results[1], self.zk, path)
            if not isinstance(failure, (NoNodeError, NodeExistsError)):
                raise failure
        msg = f"{path} kept appearing and vanishing while being written"
        raise CoordinationError(msg)

    def _fenced_delete(self, path: str, fence: LeaderFence | None) -> None:
        if fence is None:
            self._delete(path)
            return
        txn = self.zk.transaction()
        txn.check(fence.node, 0)
        txn.delete(path)
        failure = _failure(txn.commit(), fence)
        if failure is not None and not isinstance(failure, NoNodeError):
            raise failure

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

    def election(self, identifier: str, session: Session, on_change: Callable[[bool], None],
                 clock: Clock | None = None) -> LeaderElection:
        """Nimbus's leader election, ``identifier`` (its URL) naming this contender."""
        return LeaderElection(self.zk, self.election_path(), identifier, session, on_change, clock,
                              name="nimbus-election")

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


def _failure(results: list[Any], fence: LeaderFence) -> Exception | None:
    """What failed in a fenced transaction ``[check, op]``: None if it was made,
    :class:`NotLeader` if the fence's lock node is gone, else the op's own error."""
    check, outcome = results
    if isinstance(check, (NoNodeError, BadVersionError)):
        return NotLeader(fence)
    return outcome if isinstance(outcome, Exception) else None


def _zxid(outcome: Any, zk: Any, path: str) -> int | None:
    """The zxid of a transaction's set (its stat) or create (which returns only the path:
    read back, so a later write may show through; only a fenced leader writes here)."""
    stat = getattr(outcome, "mzxid", None)
    if stat is not None:
        return int(stat)
    found = zk.exists(path)
    return int(found.mzxid) if found is not None else None


def _batches(items: list[str], size: int) -> Iterator[list[str]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]
