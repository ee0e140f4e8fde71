"""How nimbus takes a topology in: checked (its name, conf and size, its plan, its
code imported in a sandbox: squall.nimbus.package_verifier), then written to ZooKeeper
and assigned.

The topology's record and code go to ZooKeeper before its assignment, and in a
secure cluster its workers' CURVE keypair before either: a supervisor never
sees a topology whose workers it cannot launch.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import secrets
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from squall import config as config_mod
from squall.cluster.state import TOPOLOGY_USER_PREFIX, ClusterState
from squall.cluster.zookeeper import digest_id
from squall.errors import (
    ConfigError,
    Conflict,
    Forbidden,
    InvalidRequest,
    SquallError,
    TopologyValidationError,
    Unavailable,
)
from squall.nimbus.admission import check_name, plan_submission
from squall.nimbus.envbuilds import BuildSlots, bytes_of, check_disk
from squall.nimbus.package_verifier import Verifier
from squall.runtime.buildbox import Builder
from squall.runtime.envbuild import EnvBuildError, Environment, EnvRefused, EnvStore, key_of
from squall.runtime.envs import EnvCache, Requirements, from_record
from squall.security.admission import check_id, check_topology_conf
from squall.security.curve import new_keypair
from squall.security.keyring import DRPC_TOKEN_PREFIX, Keyring
from squall.state.checkpoint import CHECKPOINT_STREAM
from squall.topology.topology import definition_from_dict

log = structlog.get_logger("squall.nimbus.submission")

def state_ids(defn: Any, topo_conf: dict[str, Any]) -> list[str]:
    """The ids keying state this topology uses in the cluster's ZooKeeper: each
    transactional component's id (its own, else topology.transactional.id, else the
    name submitted: squall.transactional's rule), and the definition's name when it
    has checkpointed state (its record's key: squall.state.providers.state_key).
    None when it keeps that state in another ensemble (transactional.zookeeper.servers).
    Each is checked by admission's one pattern: it names a znode and a directory."""
    if topo_conf.get("transactional.zookeeper.servers"):
        return []
    ids: set[Any] = set()
    for component in defn.components.values():
        if "transactional_id" in component.options:
            ids.add(component.options.get("transactional_id") or topo_conf.get("topology.transactional.id")
                    or topo_conf.get("topology.name"))
        if CHECKPOINT_STREAM in component.streams:
            ids.add(defn.name)
    for state_id in ids:
        check_id("transactional id", state_id)
    return sorted(ids)


def transactional_paths(root: str, ids: list[str]) -> list[str]:
    """The nodes a topology's own identity is granted: its state ids under the cluster's
    transactional.zookeeper.root (never a topology's: admission refuses that key)."""
    return [f"{root.rstrip('/')}/{state_id}" for state_id in ids]


class Submission:
    """Checks a submitted topology, writes it, and has it assigned (``reconcile``)."""

    def __init__(self, state: ClusterState, conf: dict[str, Any], reconcile: Callable[[str], None],
                 put_topology: Callable[[dict[str, Any]], None],
                 now: Callable[[], float] = time.time) -> None:
        self.state = state
        self.conf = conf
        self.now = now
        self._reconcile = reconcile  # assigns the new topology (squall.nimbus.control)
        # Writes the new topology's record within the leader's term (squall.nimbus.control):
        # a nimbus deposed since answers 503 and records nothing, so a retry is not a 409.
        self._put_topology = put_topology
        self.verifier = Verifier(conf)
        # Topologies' environments, built here before one is taken in (squall.runtime.envbuild).
        setting = {**config_mod.DEFAULTS, **conf}.__getitem__  # tests build nimbus from a partial conf
        timeout = setting("supervisor.env.build.timeout.secs")
        self.envs = EnvStore(Path(setting("storm.local.dir")).resolve() / "envs", timeout,
                             Builder(conf, "nimbus", timeout))
        self.env_builds = BuildSlots(setting("nimbus.env.builds.per.user"), setting("nimbus.env.builds.max"))
        self.env_max_bytes = setting("nimbus.env.max.bytes.per.user")
        self.env_cache = EnvCache(setting("supervisor.env.cache.grace.secs"))
        self._env_lock = threading.Lock()
        self._envs_in_flight: dict[str, int] = {}  # key -> submissions building or verifying in it

    def start(self) -> None:
        """At nimbus's start: whether submitted code is imported here (ConfigError when
        nimbus.verify.sandbox is 'required' and no sandbox works)."""
        self.verifier.start()

    def submit(self, body: Any, owner: str | None = None) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise InvalidRequest("the request body must be a JSON object")
        name = body.get("name")
        conf = body.get("conf") or {}
        try:
            check_name(name)  # first: the rest of a request under a bad name is not read
            defn = definition_from_dict(body.get("topology"))
            # Keys that steer daemons come from the cluster's conf only (admission's rule).
            if isinstance(conf, dict):
                check_topology_conf(conf, "the submit's conf")
            check_topology_conf(defn.config, "the topology's config")
            for component in defn.components.values():
                check_topology_conf(component.config, f"component {component.name!r}'s config")
            # The checks local mode runs too (squall.nimbus.admission), the cluster's size
            # caps among them: e.g. checkpointed state in a node-local store is refused when
            # workers may span hosts; Spark bolts near the timeout warned of.
            hosts = [s.get("host", node) for node, s in self.state.supervisors().items()]
            plan, warnings = plan_submission(name, defn, conf, hosts, log, limits=self.conf)
            ids = state_ids(defn, {**defn.config, **conf, "topology.name": name})
        except (TopologyValidationError, ConfigError) as e:
            raise InvalidRequest(str(e)) from e
        if any(r["name"] == name and r["status"] != "killing" for r in self.state.topologies()):
            raise Conflict(f"a topology named {name!r} is already running")
        blob = self._decode_code(body.get("code"))
        try:
            requirements = from_record(body.get("requirements"))
        except SquallError as e:
            raise InvalidRequest(f"requirements: {e}") from e
        key = key_of(requirements) if requirements is not None else None
        if key is not None:
            with self._env_lock:
                self._envs_in_flight[key] = self._envs_in_flight.get(key, 0) + 1
        try:
            env = self._environment(name, requirements, owner)
            self.verifier.verify(defn.to_dict(), blob, env.path if env is not None else None)
            return self._take_in(name, defn, conf, plan, warnings, blob, owner, requirements, env, ids)
        finally:
            if key is not None:
                with self._env_lock:
                    self._envs_in_flight[key] -= 1
                    if not self._envs_in_flight[key]:
                        del self._envs_in_flight[key]

    def _environment(self, name: str, requirements: Requirements | None,
                     owner: str | None = None) -> Environment | None:
        """The topology's environment, built here now unless cached (squall.runtime.buildbox:
        as user code, in a sandbox), within the cluster's policy and nimbus's caps
        (squall.nimbus.envbuilds); a failed build is the submitter's error, with pip's
        ERROR lines and a reference to nimbus's log (nothing of it is left)."""
        if requirements is None:
            return None
        try:
            self.envs.admit(requirements)
        except EnvRefused as e:
            log.warning("topology environment refused", topology=name, owner=owner, error=str(e))
            raise InvalidRequest(f"the topology's environment is refused: {e}") from e
        key = key_of(requirements)
        try:
            if self.envs.ready(key):
                env = self.envs.ensure(requirements)  # cached: no build, no slot
            else:
                used = bytes_of(owner, self.state.topologies(), self.envs.size, key_of)
                check_disk(owner, used, self.env_max_bytes)
                with self.env_builds.hold(owner):
                    env = self.envs.ensure(requirements)
                if env.built:
                    check_disk(owner, used, self.env_max_bytes, max(self.envs.size(key), 1))
        except EnvBuildError as e:
            log.warning("topology environment failed", topology=name, error=str(e))
            raise InvalidRequest(f"the topology's environment could not be built: {e}") from e
        log.info("topology environment ready", topology=name, key=env.key, built=env.built,
                 secs=round(env.secs, 2))
        return env

    def sweep_envs(self) -> None:
        """Remove environments no topology uses, after supervisor.env.cache.grace.secs."""
        in_use: dict[str, set[str]] = {}
        for record in self.state.topologies():
            try:
                requirements = from_record(record.get("requirements"))
            except SquallError:
                continue
            if requirements is not None:
                in_use.setdefault(key_of(requirements), set()).add(record["id"])
        with self._env_lock:
            for key in self._envs_in_flight:
                in_use.setdefault(key, set()).add("(submitting)")
        for key in self.env_cache.sweep(self.envs.present(), in_use, self.now()):
            self.envs.remove(key)

    def _take_in(self, name: str, defn: Any, conf: dict[str, Any], plan: Any, warnings: list[str],
                 blob: bytes, owner: str | None, requirements: Requirements | None,
                 env: Environment | None, ids: list[str]) -> dict[str, Any]:
        topology_id = f"{name}-{int(self.now())}-{os.urandom(3).hex()}"
        if owner is not None:
            # One team's state is never another's: an id is its first user's (squall.cluster.state).
            taken = self.state.claim_state_ids(ids, owner)
            if taken:
                names = ", ".join(f"{i!r} (of {who})" for i, who in sorted(taken.items()))
                raise Forbidden(f"the topology's state ids belong to another user: {names}; "
                                    "set its transactional_id or rename its definition")
        if self.conf["squall.secure"]:
            # Before the topology exists: a supervisor never sees it without its workers' key.
            self.state.put_topology_secrets(topology_id, self._new_secrets(topology_id, ids))
        self.state.put_code(topology_id, blob)
        # Storm's topology.name: the name submitted, which the workers' components see in
        # their conf (the definition's own name is its class's); a transactional id
        # defaults to it.
        topo_conf = {**defn.config, **conf, "topology.name": name}
        try:
            self._put_topology({
                "id": topology_id, "name": name, "status": "active", "definition": defn.to_dict(),
                "conf": topo_conf, "submitted": self.now(), "num_workers": plan.conf["topology.workers"],
                "owner": owner,
                **({"requirements": requirements.to_record()} if requirements is not None else {}),
            })
        except Unavailable:  # refused (no longer the leader): its code, secrets and grants go too
            self.state.remove_topology(topology_id)
            raise
        log.info("topology submitted", topology=name, id=topology_id, owner=owner,
                 executors=len(plan.executors), workers=plan.conf["topology.workers"])
        self._reconcile(topology_id)
        answer: dict[str, Any] = {"name": name, "id": topology_id}
        if warnings:
            answer["warnings"] = warnings
        if env is not None:
            answer["environment"] = {"key": env.key, "built": env.built, "secs": round(env.secs, 3)}
        return answer

    def _new_secrets(self, topology_id: str, ids: list[str]) -> dict[str, Any]:
        """The topology's CURVE keypair, and a ZooKeeper identity of its own that
        reaches only its transactional state's nodes (granted now, revoked when
        it is removed): its workers never hold the cluster's password."""
        user, password = f"{TOPOLOGY_USER_PREFIX}{topology_id}", secrets.token_urlsafe(24)
        paths = transactional_paths(self.conf.get("transactional.zookeeper.root")
                                    or config_mod.DEFAULTS["transactional.zookeeper.root"], ids)
        self.state.grant(paths, digest_id(user, password))
        # Its DRPC credential: what its DRPC spouts and ReturnResults show a DRPC server, which
        # knows it by its hash (squall.drpc_server.invokers) until the topology is removed.
        token = f"{DRPC_TOKEN_PREFIX}{topology_id}.{secrets.token_urlsafe(32)}"
        self.state.put_drpc_invoker(topology_id, hashlib.sha256(token.encode()).hexdigest())
        return {"curve": new_keypair(), "zookeeper": {"user": user, "password": password, "paths": paths},
                "drpc": {"token": token, "ca": self._ca_pem()}}

    def _ca_pem(self) -> str | None:
        """What the cluster's clients trust: nimbus.tls.ca.path, else the keyring's CA."""
        ca_path = self.conf.get("nimbus.tls.ca.path")
        if ca_path:
            return Path(ca_path).read_text()
        return Keyring.for_conf(self.conf).ca_pem

    def _decode_code(self, code: Any) -> bytes:
        if code is None:
            return b""
        if not isinstance(code, str):
            raise InvalidRequest("'code' must be a base64 string of a zip file")
        try:
            blob = base64.b64decode(code, validate=True)
        except (binascii.Error, ValueError) as e:
            raise InvalidRequest(f"'code' is not valid base64: {e}") from e
        if len(blob) > self.conf["nimbus.code.max.bytes"]:
            raise InvalidRequest(f"the code package is {len(blob)} bytes, over nimbus.code.max.bytes")
        return blob
